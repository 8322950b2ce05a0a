#include "tokenizer/jinja/parser.h"

#include <initializer_list>

#include "tokenizer/jinja/errors.h"
#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/pystr.h"

namespace ringlm::jinja {

namespace {

// Deeper nesting than this (expressions or blocks) is refused: it bounds the interpreter's stack.
constexpr int kMaxNesting = 200;

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  std::vector<StmtPtr> parse() {
    std::vector<StmtPtr> body = subparse({});
    return body;
  }

 private:
  // ---- token stream ----
  const Token& cur() const { return t_[i_]; }
  const Token& look() const { return t_[i_ + 1 < t_.size() ? i_ + 1 : i_]; }
  const Token& next() {
    const Token& t = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return t;
  }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }

  [[noreturn]] void error(const std::string& msg, int line = -1) {
    throw TemplateError(ErrorKind::Syntax, line < 0 ? cur().line : line, msg);
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::Data:
        return "template data / text";
      case Tok::VarBegin:
        return "begin of print statement";
      case Tok::VarEnd:
        return "end of print statement";
      case Tok::BlockBegin:
        return "begin of statement block";
      case Tok::BlockEnd:
        return "end of statement block";
      case Tok::Name:
        return t.text;
      case Tok::String:
        return "string";
      case Tok::Int:
        return "integer";
      case Tok::Float:
        return "float";
      case Tok::Op:
        return t.text;
      case Tok::Eof:
        return "end of template";
    }
    return "?";
  }

  void expect_op(const char* op) {
    if (cur().type == Tok::Eof)
      error(std::string("unexpected end of template, expected '") + op + "'");
    if (!is_op(op))
      error(std::string("expected token '") + op + "', got '" + describe(cur()) + "'");
    next();
  }
  void expect(Tok type, const char* what) {
    if (cur().type == Tok::Eof) error(std::string("unexpected end of template, expected ") + what);
    if (cur().type != type)
      error(std::string("expected ") + what + ", got '" + describe(cur()) + "'");
    next();
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) {
      if (cur().type == Tok::Eof) error("unexpected end of template, expected name");
      error("expected token 'name', got '" + describe(cur()) + "'");
    }
    return next().text;
  }
  void expect_name(const char* n) {
    if (!is_name(n)) {
      if (cur().type == Tok::Eof)
        error(std::string("unexpected end of template, expected '") + n + "'");
      error(std::string("expected token '") + n + "', got '" + describe(cur()) + "'");
    }
    next();
  }

  struct DepthGuard {
    Parser* p;
    explicit DepthGuard(Parser* parser) : p(parser) {
      if (++p->depth_ > kMaxNesting) p->error("template nesting too deep");
    }
    ~DepthGuard() { --p->depth_; }
  };

  static ExprPtr make(ExprKind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // ---- statements ----
  bool at_end_token(const std::vector<const char*>& ends) const {
    for (const char* e : ends)
      if (is_name(e)) return true;
    return false;
  }

  std::vector<StmtPtr> subparse(const std::vector<const char*>& ends) {
    std::vector<StmtPtr> body;
    while (cur().type != Tok::Eof) {
      const Token& tok = cur();
      if (tok.type == Tok::Data) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Data;
        s->line = tok.line;
        s->text = tok.text;
        body.push_back(std::move(s));
        next();
      } else if (tok.type == Tok::VarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Print;
        s->line = cur().line;
        s->expr = parse_tuple(false, true, {}, false);
        expect(Tok::VarEnd, "end of print statement");
        body.push_back(std::move(s));
      } else if (tok.type == Tok::BlockBegin) {
        next();
        if (!ends.empty() && at_end_token(ends)) return body;
        parse_statement(body);
        expect(Tok::BlockEnd, "end of statement block");
      } else {
        error("unexpected '" + describe(tok) + "'");
      }
    }
    if (!ends.empty()) {
      std::string want;
      for (const char* e : ends) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
      error("Unexpected end of template. Jinja was looking for the following tags: " + want + ".");
    }
    return body;
  }

  // Parses `:`? `%}` then statements up to one of `ends`; the end name stays current.
  std::vector<StmtPtr> parse_statements(const std::vector<const char*>& ends, bool drop_needle) {
    skip_op(":");
    expect(Tok::BlockEnd, "end of statement block");
    std::vector<StmtPtr> body = subparse(ends);
    if (drop_needle) next();
    return body;
  }

  void parse_statement(std::vector<StmtPtr>& out) {
    DepthGuard g(this);
    if (cur().type != Tok::Name) error("tag name expected");
    const std::string tag = cur().text;
    int line = cur().line;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (tag == "if") {
      parse_if(*s);
    } else if (tag == "for") {
      parse_for(*s);
    } else if (tag == "set") {
      parse_set(*s);
    } else if (tag == "macro") {
      next();
      s->kind = StmtKind::Macro;
      s->text = expect_name();
      parse_signature(*s);
      s->body = parse_statements({"endmacro"}, true);
    } else if (tag == "call") {
      next();
      s->kind = StmtKind::CallBlock;
      if (is_op("(")) parse_signature(*s);
      s->expr = parse_expression(true);
      if (s->expr->kind != ExprKind::Call) error("expected call", line);
      s->body = parse_statements({"endcall"}, true);
    } else if (tag == "filter") {
      next();
      s->kind = StmtKind::FilterBlock;
      s->expr = parse_filter(nullptr, true);
      s->body = parse_statements({"endfilter"}, true);
    } else if (tag == "with") {
      next();
      s->kind = StmtKind::With;
      while (cur().type != Tok::BlockEnd) {
        if (!s->assignments.empty()) expect_op(",");
        if (cur().type == Tok::Eof) error("unexpected end of template");
        ExprPtr target = parse_assign_target(true, false, {}, false);
        expect_op("=");
        s->assignments.emplace_back(std::move(target), parse_expression(true));
      }
      s->body = parse_statements({"endwith"}, true);
    } else if (tag == "print") {
      next();
      bool first = true;
      while (cur().type != Tok::BlockEnd) {
        if (!first) expect_op(",");
        if (cur().type == Tok::Eof) error("unexpected end of template");
        first = false;
        auto p = std::make_unique<Stmt>();
        p->kind = StmtKind::Print;
        p->line = cur().line;
        p->expr = parse_expression(true);
        out.push_back(std::move(p));
      }
      return;
    } else if (tag == "break" || tag == "continue") {
      next();
      s->kind = tag == "break" ? StmtKind::Break : StmtKind::Continue;
    } else if (tag == "generation") {
      // transformers' AssistantTracker: renders its body (a call block, so its own scope).
      next();
      s->kind = StmtKind::Scope;
      s->body = parse_statements({"endgeneration"}, true);
    } else if (tag == "autoescape") {
      next();
      s->kind = StmtKind::Scope;
      s->expr = parse_expression(true);  // evaluated for errors only; output is never escaped
      s->body = parse_statements({"endautoescape"}, true);
    } else if (tag == "block") {
      next();
      s->kind = StmtKind::Scope;
      std::string name = expect_name();
      skip_name("scoped");
      skip_name("required");
      s->body = parse_statements({"endblock"}, true);
      if (cur().type == Tok::Name) {
        if (cur().text != name) error("mismatching name for block: " + cur().text);
        next();
      }
    } else if (tag == "extends" || tag == "include" || tag == "import" || tag == "from") {
      error("'" + tag + "' needs a template loader, which chat templates do not have");
    } else {
      error("Encountered unknown tag '" + tag + "'.");
    }
    out.push_back(std::move(s));
  }

  void parse_if(Stmt& s) {
    next();
    s.kind = StmtKind::If;
    while (true) {
      ExprPtr test = parse_tuple(false, false, {}, false);
      std::vector<StmtPtr> body = parse_statements({"elif", "else", "endif"}, false);
      s.branches.emplace_back(std::move(test), std::move(body));
      const Token& t = next();
      if (t.text == "elif") continue;
      if (t.text == "else") s.else_body = parse_statements({"endif"}, true);
      return;
    }
  }

  void parse_for(Stmt& s) {
    next();
    s.kind = StmtKind::For;
    s.target = parse_assign_target(true, false, {"in"}, false);
    expect_name("in");
    s.expr = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) s.test = parse_expression(true);
    s.recursive = skip_name("recursive");
    s.body = parse_statements({"endfor", "else"}, false);
    if (next().text == "else") s.else_body = parse_statements({"endfor"}, true);
  }

  void parse_set(Stmt& s) {
    next();
    s.target = parse_assign_target(true, false, {}, true);
    if (skip_op("=")) {
      s.kind = StmtKind::Set;
      s.expr = parse_tuple(false, true, {}, false);
      return;
    }
    s.kind = StmtKind::SetBlock;
    if (is_op("|")) s.expr = parse_filter(nullptr, false);
    s.body = parse_statements({"endset"}, true);
  }

  void parse_signature(Stmt& s) {
    expect_op("(");
    while (!is_op(")")) {
      if (!s.params.empty()) expect_op(",");
      if (cur().type == Tok::Eof) error("unexpected end of template");
      std::string name = expect_name();
      if (skip_op("=")) {
        s.defaults.push_back(parse_expression(true));
      } else if (!s.defaults.empty()) {
        error("non-default argument follows default argument");
      }
      s.params.push_back(std::move(name));
    }
    expect_op(")");
  }

  ExprPtr parse_assign_target(bool with_tuple, bool name_only,
                              const std::vector<const char*>& extra_end, bool with_namespace) {
    if (with_namespace && look().type == Tok::Op && look().text == ".") {
      int line = cur().line;
      std::string name = expect_name();
      next();  // dot
      auto e = make(ExprKind::NSRef, line);
      e->name = std::move(name);
      e->value = Value::string(expect_name());
      return e;
    }
    ExprPtr target;
    if (name_only) {
      target = make(ExprKind::Name, cur().line);
      target->name = expect_name();
    } else if (with_tuple) {
      target = parse_tuple(true, true, extra_end, false);
    } else {
      target = parse_primary();
    }
    check_assignable(*target);
    return target;
  }

  void check_assignable(const Expr& e) {
    if (e.kind == ExprKind::Name) {
      if (e.name == "true" || e.name == "false" || e.name == "none" || e.name == "True" ||
          e.name == "False" || e.name == "None")
        error("can't assign to '" + e.name + "'", e.line);
      return;
    }
    if (e.kind == ExprKind::Tuple) {
      for (const auto& a : e.args) check_assignable(*a);
      return;
    }
    error("can't assign to this expression", e.line);
  }

  // ---- expressions ----
  bool is_tuple_end(const std::vector<const char*>& extra_end) const {
    if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || is_op(")")) return true;
    return at_end_token(extra_end);
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr,
                      const std::vector<const char*>& extra_end, bool explicit_parens) {
    int line = cur().line;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      if (simplified)
        args.push_back(parse_primary());
      else
        args.push_back(parse_expression(with_condexpr));
      if (is_op(","))
        is_tuple = true;
      else
        break;
      line = cur().line;
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) {
        if (cur().type == Tok::Eof) error("unexpected end of template");
        error("Expected an expression, got '" + describe(cur()) + "'");
      }
    }
    auto e = make(ExprKind::Tuple, line);
    e->args = std::move(args);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard g(this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    int line = cur().line;
    ExprPtr expr1 = parse_or();
    while (skip_name("if")) {
      ExprPtr expr2 = parse_or();
      ExprPtr expr3;
      if (skip_name("else")) expr3 = parse_condexpr();
      auto e = make(ExprKind::CondExpr, line);
      e->args.push_back(std::move(expr2));
      e->args.push_back(std::move(expr1));
      e->args.push_back(std::move(expr3));
      expr1 = std::move(e);
      line = cur().line;
    }
    return expr1;
  }

  ExprPtr binary(ExprKind k, ExprPtr l, ExprPtr r, int line) {
    auto e = make(k, line);
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    return e;
  }

  ExprPtr parse_or() {
    int line = cur().line;
    ExprPtr left = parse_and();
    while (skip_name("or")) {
      left = binary(ExprKind::Or, std::move(left), parse_and(), line);
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_and() {
    int line = cur().line;
    ExprPtr left = parse_not();
    while (skip_name("and")) {
      left = binary(ExprKind::And, std::move(left), parse_not(), line);
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard g(this);
      int line = next().line;
      auto e = make(ExprKind::Not, line);
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr expr = parse_math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> operands;
    while (true) {
      if (cur().type == Tok::Op &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        ops.push_back(next().text);
      } else if (skip_name("in")) {
        ops.emplace_back("in");
      } else if (is_name("not") && look().type == Tok::Name && look().text == "in") {
        next();
        next();
        ops.emplace_back("notin");
      } else {
        break;
      }
      operands.push_back(parse_math1());
      line = cur().line;
    }
    if (ops.empty()) return expr;
    auto e = make(ExprKind::Compare, line);
    e->args.push_back(std::move(expr));
    for (auto& o : operands) e->args.push_back(std::move(o));
    e->ops = std::move(ops);
    return e;
  }

  ExprPtr binop(const std::string& op, ExprPtr l, ExprPtr r, int line) {
    auto e = binary(ExprKind::BinOp, std::move(l), std::move(r), line);
    e->name = op;
    return e;
  }

  ExprPtr parse_math1() {
    int line = cur().line;
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = next().text;
      left = binop(op, std::move(left), parse_concat(), line);
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_concat() {
    int line = cur().line;
    std::vector<ExprPtr> args;
    args.push_back(parse_math2());
    while (skip_op("~")) args.push_back(parse_math2());
    if (args.size() == 1) return std::move(args[0]);
    auto e = make(ExprKind::Concat, line);
    e->args = std::move(args);
    return e;
  }

  ExprPtr parse_math2() {
    int line = cur().line;
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = next().text;
      left = binop(op, std::move(left), parse_pow(), line);
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_pow() {
    int line = cur().line;
    ExprPtr left = parse_unary(true);
    while (skip_op("**")) {
      left = binop("**", std::move(left), parse_unary(true), line);
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard g(this);
    int line = cur().line;
    ExprPtr node;
    if (skip_op("-")) {
      node = make(ExprKind::Neg, line);
      node->args.push_back(parse_unary(false));
    } else if (skip_op("+")) {
      node = make(ExprKind::Pos, line);
      node->args.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    DepthGuard g(this);
    const Token& tok = cur();
    int line = tok.line;
    if (tok.type == Tok::Name) {
      ExprPtr e;
      if (tok.text == "true" || tok.text == "True") {
        e = make(ExprKind::Const, line);
        e->value = Value::boolean(true);
      } else if (tok.text == "false" || tok.text == "False") {
        e = make(ExprKind::Const, line);
        e->value = Value::boolean(false);
      } else if (tok.text == "none" || tok.text == "None") {
        e = make(ExprKind::Const, line);
        e->value = Value::none();
      } else {
        e = make(ExprKind::Name, line);
        e->name = tok.text;
      }
      next();
      return e;
    }
    if (tok.type == Tok::String) {
      std::string buf;
      while (cur().type == Tok::String) buf += next().text;
      auto e = make(ExprKind::Const, line);
      e->value = Value::string(std::move(buf));
      return e;
    }
    if (tok.type == Tok::Int || tok.type == Tok::Float) {
      auto e = make(ExprKind::Const, line);
      e->value = tok.type == Tok::Int ? Value::integer(tok.ival) : Value::number(tok.fval);
      next();
      return e;
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(false, true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      auto e = make(ExprKind::List, line);
      while (!is_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("]")) break;
        e->args.push_back(parse_expression(true));
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      next();
      auto e = make(ExprKind::Dict, line);
      while (!is_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("}")) break;
        e->args.push_back(parse_expression(true));
        expect_op(":");
        e->args.push_back(parse_expression(true));
      }
      expect_op("}");
      return e;
    }
    if (tok.type == Tok::Eof) error("unexpected end of template");
    error("unexpected '" + describe(tok) + "'");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        node = parse_filter(std::move(node), false);
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    DepthGuard g(this);
    const Token& tok = next();
    int line = tok.line;
    if (tok.text == ".") {
      const Token& attr = cur();
      if (attr.type == Tok::Name) {
        next();
        auto e = make(ExprKind::Getattr, line);
        e->target = std::move(node);
        e->name = attr.text;
        return e;
      }
      if (attr.type != Tok::Int) error("expected name or number", attr.line);
      auto key = make(ExprKind::Const, attr.line);
      key->value = Value::integer(attr.ival);
      next();
      auto e = make(ExprKind::Getitem, line);
      e->target = std::move(node);
      e->args.push_back(std::move(key));
      return e;
    }
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      if (cur().type == Tok::Eof) error("unexpected end of template");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    auto e = make(ExprKind::Getitem, line);
    e->target = std::move(node);
    if (args.size() == 1) {
      e->args.push_back(std::move(args[0]));
    } else {
      auto t = make(ExprKind::Tuple, line);
      t->args = std::move(args);
      e->args.push_back(std::move(t));
    }
    return e;
  }

  ExprPtr parse_subscribed() {
    int line = cur().line;
    auto slice = make(ExprKind::Slice, line);
    if (is_op(":")) {
      next();
      slice->args.push_back(nullptr);
    } else {
      ExprPtr node = parse_expression(true);
      if (!is_op(":")) return node;
      next();
      slice->args.push_back(std::move(node));
    }
    if (is_op(":")) {
      slice->args.push_back(nullptr);
    } else if (!is_op("]") && !is_op(",")) {
      slice->args.push_back(parse_expression(true));
    } else {
      slice->args.push_back(nullptr);
    }
    if (is_op(":")) {
      next();
      if (!is_op("]") && !is_op(","))
        slice->args.push_back(parse_expression(true));
      else
        slice->args.push_back(nullptr);
    } else {
      slice->args.push_back(nullptr);
    }
    return slice;
  }

  void parse_call_args(Expr& e) {
    int line = cur().line;
    expect_op("(");
    bool require_comma = false;
    auto ensure = [&](bool ok) {
      if (!ok) error("invalid syntax for function call expression", line);
    };
    while (!is_op(")")) {
      if (cur().type == Tok::Eof) error("unexpected end of template");
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*")) {
        ensure(!e.dyn_args && !e.dyn_kwargs);
        next();
        e.dyn_args = parse_expression(true);
      } else if (is_op("**")) {
        ensure(!e.dyn_kwargs);
        next();
        e.dyn_kwargs = parse_expression(true);
      } else if (cur().type == Tok::Name && look().type == Tok::Op && look().text == "=") {
        ensure(!e.dyn_kwargs);
        std::string key = cur().text;
        next();
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        ensure(!e.dyn_args && !e.dyn_kwargs && e.kwargs.empty());
        e.args.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    DepthGuard g(this);
    auto e = make(ExprKind::Call, cur().line);
    e->target = std::move(node);
    parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    DepthGuard g(this);
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      int line = cur().line;
      std::string name = expect_name();
      while (skip_op(".")) name += "." + expect_name();
      auto e = make(ExprKind::Filter, line);
      e->target = std::move(node);
      e->name = std::move(name);
      if (is_op("(")) parse_call_args(*e);
      node = std::move(e);
      start_inline = false;
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    DepthGuard g(this);
    int line = next().line;  // `is`
    bool negated = skip_name("not");
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    auto e = make(ExprKind::Test, line);
    e->target = std::move(node);
    e->name = std::move(name);
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
                cur().type == Tok::Float || is_op("(") || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) error("You cannot chain multiple tests with is");
      ExprPtr arg = parse_postfix(parse_primary());
      e->args.push_back(std::move(arg));
    }
    if (!negated) return e;
    auto n = make(ExprKind::Not, line);
    n->args.push_back(std::move(e));
    return n;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

std::vector<StmtPtr> parse_template(std::string_view source) {
  if (!py::valid_utf8(source))
    throw TemplateError(ErrorKind::Syntax, 1, "template is not valid UTF-8");
  std::vector<StmtPtr> body = Parser(tokenize(source)).parse();
  check_filter_and_test_names(body);
  return body;
}

}  // namespace ringlm::jinja
