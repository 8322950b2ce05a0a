#include "tokenizer/jinja/interp.h"

#include <algorithm>

#include "tokenizer/jinja/errors.h"
#include "tokenizer/jinja/pystr.h"

namespace ringlm::jinja {

namespace {

// Undefined for a missing attribute/element, with jinja2's message shape.
Value missing_attr(const Value& obj, const std::string& name) {
  return Value::undefined("'" + type_name(obj) + " object' has no attribute '" + name + "'");
}

Value missing_item(const Value& obj, const Value& key) {
  if (key.is_string()) return missing_attr(obj, key.str());
  return Value::undefined(type_name(obj) + " object has no element " + repr(key));
}

bool references(const std::vector<StmtPtr>& body, const std::string& name);

bool references(const Expr* e, const std::string& name) {
  if (e == nullptr) return false;
  if (e->kind == ExprKind::Name && e->name == name) return true;
  if (references(e->target.get(), name) || references(e->dyn_args.get(), name) ||
      references(e->dyn_kwargs.get(), name))
    return true;
  for (const auto& a : e->args)
    if (references(a.get(), name)) return true;
  for (const auto& kv : e->kwargs)
    if (references(kv.second.get(), name)) return true;
  return false;
}

bool references(const std::vector<StmtPtr>& body, const std::string& name) {
  for (const auto& s : body) {
    if (references(s->expr.get(), name) || references(s->test.get(), name) ||
        references(s->body, name) || references(s->else_body, name))
      return true;
    for (const auto& d : s->defaults)
      if (references(d.get(), name)) return true;
    for (const auto& kv : s->assignments)
      if (references(kv.second.get(), name)) return true;
    for (const auto& br : s->branches)
      if (references(br.first.get(), name) || references(br.second, name)) return true;
  }
  return false;
}

// Literals that jinja2's optimizer folds at compile time; a folded subscript goes through the
// sandbox's getitem, where errors become undefined instead of raising.
bool is_literal(const Expr* e) {
  if (e == nullptr) return true;
  switch (e->kind) {
    case ExprKind::Const:
      return true;
    case ExprKind::List:
    case ExprKind::Tuple:
    case ExprKind::Dict:
      for (const auto& a : e->args)
        if (!is_literal(a.get())) return false;
      return true;
    default:
      return false;
  }
}

FramePtr child(const FramePtr& parent) {
  auto f = std::make_shared<Frame>();
  f->parent = parent;
  return f;
}

}  // namespace

DepthScope::DepthScope(Interp& i) : in(i) {
  if (++in.depth_ > in.limits_.max_depth) {
    --in.depth_;
    fail(ErrorKind::Limit,
         "recursion too deep (limit " + std::to_string(in.limits_.max_depth) + ")");
  }
}

Interp::Interp(const RenderLimits& limits, std::chrono::system_clock::time_point now)
    : limits_(limits), now_(now) {}

Interp::~Interp() {
  // Namespaces may reference themselves; drop their contents so nothing leaks.
  for (auto& ns : namespaces_) ns->attrs->items.clear();
}

void Interp::step() {
  if (++steps_ > limits_.max_steps)
    fail(ErrorKind::Limit,
         "template ran more than " + std::to_string(limits_.max_steps) + " steps");
}

void Interp::check_string_size(size_t n) const {
  if (n > limits_.max_string_bytes)
    fail(ErrorKind::Limit,
         "string longer than " + std::to_string(limits_.max_string_bytes) + " bytes");
}

Value Interp::make_string(std::string s) {
  check_string_size(s.size());
  return Value::string(std::move(s));
}

Value Interp::make_list(std::vector<Value> items, SeqKind kind) {
  if (items.size() > limits_.max_items)
    fail(ErrorKind::Limit, "list longer than " + std::to_string(limits_.max_items) + " items");
  return Value::list(std::move(items), kind);
}

void Interp::append_out(std::string& out, const std::string& s) const {
  check_string_size(out.size() + s.size());
  out += s;
}

std::string Interp::render(const std::vector<StmtPtr>& body,
                           const std::vector<std::pair<std::string, Value>>& context) {
  auto globals = std::make_shared<Frame>();
  for (auto& [k, v] : make_globals(*this)) globals->vars[k] = v;
  auto ctx = child(globals);
  for (const auto& [k, v] : context) ctx->vars[k] = v;
  auto root = child(ctx);
  std::string out;
  if (exec(body, root, out) != Flow::Normal) type_error("'break' or 'continue' outside a loop");
  return out;
}

// ---------------------------------------------------------------- access

Value Interp::getattr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Kind::Undefined:
      require_defined(obj);
      break;
    case Kind::Dict: {
      if (auto m = get_method(*this, obj, name)) return *m;
      if (const Value* v = obj.dict_obj().find(name)) return *v;
      return missing_attr(obj, name);
    }
    case Kind::Namespace: {
      if (const Value* v = obj.ns_obj().attrs->find(name)) return *v;
      return missing_attr(obj, name);
    }
    case Kind::Loop: {
      LoopObj& l = obj.loop_obj();
      const auto& items = *l.items;
      if (name == "index0") return Value::integer(l.index0);
      if (name == "index") return Value::integer(l.index0 + 1);
      if (name == "revindex0") return Value::integer(l.length - l.index0 - 1);
      if (name == "revindex") return Value::integer(l.length - l.index0);
      if (name == "first") return Value::boolean(l.index0 == 0);
      if (name == "last") return Value::boolean(l.index0 == l.length - 1);
      if (name == "length") return Value::integer(l.length);
      if (name == "depth0") return Value::integer(l.depth0);
      if (name == "depth") return Value::integer(l.depth0 + 1);
      if (name == "previtem")
        return l.index0 > 0 ? items[static_cast<size_t>(l.index0 - 1)]
                            : Value::undefined("there is no previous item");
      if (name == "nextitem")
        return l.index0 + 1 < l.length ? items[static_cast<size_t>(l.index0 + 1)]
                                       : Value::undefined("there is no next item");
      if (name == "cycle") {
        int64_t idx = l.index0;
        return Value::func("cycle", [idx](Interp&, CallArgs& a) {
          if (a.pos.empty()) type_error("no items for cycling given");
          return a.pos[static_cast<size_t>(idx % static_cast<int64_t>(a.pos.size()))];
        });
      }
      if (name == "changed") {
        LoopObj* lp = &l;
        Value self = obj;
        return Value::func("changed", [lp, self](Interp&, CallArgs& a) {
          bool changed = !lp->have_changed || lp->last_changed.size() != a.pos.size();
          if (!changed)
            for (size_t i = 0; i < a.pos.size(); ++i)
              if (!equal(lp->last_changed[i], a.pos[i])) changed = true;
          if (changed) {
            lp->have_changed = true;
            lp->last_changed = a.pos;
          }
          return Value::boolean(changed);
        });
      }
      return missing_attr(obj, name);
    }
    default:
      if (auto m = get_method(*this, obj, name)) return *m;
      return missing_attr(obj, name);
  }
  return Value();
}

Value Interp::getitem(const Value& obj, const Value& key) {
  require_defined(obj);
  switch (obj.kind()) {
    case Kind::Dict: {
      if (key.kind() == Kind::List || key.kind() == Kind::Dict) {
        // unhashable key: TypeError, which jinja2 turns into undefined
        return missing_item(obj, key);
      }
      if (const Value* v = obj.dict_obj().find(key)) return *v;
      break;
    }
    case Kind::List: {
      const List& l = obj.list_obj();
      if (l.kind != SeqKind::List && l.kind != SeqKind::Tuple) break;
      if (key.is_integral()) {
        int64_t i = key.as_int();
        auto n = static_cast<int64_t>(l.items.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n)
          return Value::undefined(type_name(obj) + " object has no element " + repr(key));
        return l.items[static_cast<size_t>(i)];
      }
      break;
    }
    case Kind::String: {
      if (key.is_integral()) {
        std::u32string cs = py::decode(obj.str());
        int64_t i = key.as_int();
        auto n = static_cast<int64_t>(cs.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::undefined("str object has no element " + repr(key));
        std::string ch;
        py::append_utf8(ch, cs[static_cast<size_t>(i)]);
        return Value::string(std::move(ch));
      }
      break;
    }
    default:
      break;
  }
  if (key.is_string()) {
    if (obj.kind() == Kind::Namespace || obj.kind() == Kind::Loop) return getattr(obj, key.str());
    if (auto m = get_method(*this, obj, key.str())) return *m;
  }
  return missing_item(obj, key);
}

// ---------------------------------------------------------------- calls

Value Interp::call(const Value& fn, CallArgs& args) {
  require_defined(fn);
  DepthScope d(*this);
  step();
  if (fn.kind() == Kind::Loop && fn.loop_obj().recurse) return fn.loop_obj().recurse(*this, args);
  if (fn.kind() != Kind::Func) type_error("'" + type_name(fn) + "' object is not callable");
  return fn.func_obj().fn(*this, args);
}

CallArgs Interp::eval_args(const Expr& e, const FramePtr& f) {
  CallArgs a;
  for (const auto& x : e.args) a.pos.push_back(eval(*x, f));
  for (const auto& [k, x] : e.kwargs) a.kw.emplace_back(k, eval(*x, f));
  if (e.dyn_args) {
    for (auto& v : iterate(eval(*e.dyn_args, f))) a.pos.push_back(std::move(v));
  }
  if (e.dyn_kwargs) {
    Value d = eval(*e.dyn_kwargs, f);
    if (!d.is_dict()) type_error("argument after ** must be a mapping, not " + type_name(d));
    for (const auto& [k, v] : d.dict_obj().items) {
      if (!k.is_string()) type_error("keywords must be strings");
      a.kw.emplace_back(k.str(), v);
    }
  }
  return a;
}

Value Interp::eval_call(const Expr& e, const FramePtr& f) {
  Value fn = eval(*e.target, f);
  CallArgs a = eval_args(e, f);
  return call(fn, a);
}

Value Interp::make_macro(const Stmt& s, const FramePtr& f, bool is_caller) {
  const Stmt* node = &s;
  std::weak_ptr<Frame> scope = f;
  bool wants_varargs = references(s.body, "varargs");
  bool wants_kwargs = references(s.body, "kwargs");
  bool wants_caller = !is_caller && references(s.body, "caller");
  std::string name = is_caller ? "caller" : s.text;
  Value macro = Value::func(name, [=](Interp& in, CallArgs& a) -> Value {
    FramePtr parent = scope.lock();
    if (!parent) type_error("macro '" + name + "' called after its defining scope ended");
    auto frame = child(parent);
    const auto& params = node->params;
    size_t nparams = params.size();
    std::vector<Value> extra;
    for (size_t i = 0; i < a.pos.size(); ++i) {
      if (i < nparams) {
        frame->vars[params[i]] = a.pos[i];
      } else if (wants_varargs) {
        extra.push_back(a.pos[i]);
      } else {
        type_error("macro '" + name + "' takes not more than " + std::to_string(nparams) +
                   " argument(s)");
      }
    }
    auto kwargs = std::make_shared<Dict>();
    Value caller;
    bool have_caller = false;
    for (auto& [k, v] : a.kw) {
      auto it = std::find(params.begin(), params.end(), k);
      if (it != params.end()) {
        size_t idx = static_cast<size_t>(it - params.begin());
        if (idx < a.pos.size())
          type_error("macro '" + name + "' got multiple values for argument '" + k + "'");
        frame->vars[k] = v;
      } else if (k == "caller" && wants_caller) {
        caller = v;
        have_caller = true;
      } else if (wants_kwargs) {
        kwargs->set(Value::string(k), v);
      } else {
        type_error("macro '" + name + "' takes no keyword argument '" + k + "'");
      }
    }
    size_t first_default = nparams - node->defaults.size();
    for (size_t i = 0; i < nparams; ++i) {
      if (frame->vars.count(params[i]) != 0) continue;
      if (i >= first_default)
        frame->vars[params[i]] = in.eval(*node->defaults[i - first_default], frame);
      else
        frame->vars[params[i]] = Value::undefined("parameter '" + params[i] + "' was not provided");
    }
    if (wants_varargs) frame->vars["varargs"] = in.make_list(std::move(extra), SeqKind::Tuple);
    if (wants_kwargs) {
      std::vector<Value> vals;
      for (const auto& kv : kwargs->items) vals.push_back(kv.second);
      kwargs->depth = make_depth(vals);
      frame->vars["kwargs"] = Value::dict(kwargs);
    }
    if (wants_caller)
      frame->vars["caller"] = have_caller ? caller : Value::undefined("No caller defined");
    std::string out;
    if (in.exec(node->body, frame, out) != Flow::Normal)
      type_error("'break' or 'continue' outside a loop");
    return Value::string(std::move(out));
  });
  macro.func_obj().is_macro = true;
  return macro;
}

// ---------------------------------------------------------------- expressions

Value Interp::eval_compare(const Expr& e, const FramePtr& f) {
  Value left = eval(*e.args[0], f);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.args[i + 1], f);
    const std::string& op = e.ops[i];
    bool r;
    if (op == "==") {
      r = equal(left, right);
    } else if (op == "!=") {
      r = !equal(left, right);
    } else if (op == "in") {
      r = contains(right, left);
    } else if (op == "notin") {
      r = !contains(right, left);
    } else {
      int c = compare(left, right);
      if (c == 2)
        r = false;
      else if (op == "<")
        r = c < 0;
      else if (op == "<=")
        r = c <= 0;
      else if (op == ">")
        r = c > 0;
      else
        r = c >= 0;
    }
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interp::eval(const Expr& e, const FramePtr& f) {
  DepthScope d(*this);
  line_ = e.line;
  switch (e.kind) {
    case ExprKind::Const:
      return e.value;
    case ExprKind::Name: {
      if (const Value* v = f->lookup(e.name)) return *v;
      return Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::NSRef:
      type_error("namespace reference used as a value");
    case ExprKind::Getattr: {
      Value obj = eval(*e.target, f);
      line_ = e.line;
      return getattr(obj, e.name);
    }
    case ExprKind::Getitem: {
      Value obj = eval(*e.target, f);
      const Expr& k = *e.args[0];
      if (k.kind == ExprKind::Slice) {
        // jinja2 compiles slices to a plain Python subscript (no sandbox getitem fallback), so
        // every failure is an error rather than an undefined value.
        py::SliceSpec spec;
        std::optional<int64_t>* parts[3] = {&spec.start, &spec.stop, &spec.step};
        std::vector<Value> bounds;
        for (int i = 0; i < 3; ++i) {
          if (!k.args[static_cast<size_t>(i)]) continue;
          Value v = eval(*k.args[static_cast<size_t>(i)], f);
          if (v.is_none()) continue;
          bounds.push_back(v);
          if (v.is_integral()) *parts[i] = v.as_int();
        }
        line_ = e.line;
        require_defined(obj);
        bool seq = obj.is_string() || (obj.is_list() && (obj.list_obj().kind == SeqKind::List ||
                                                         obj.list_obj().kind == SeqKind::Tuple));
        bool folded = is_literal(e.target.get()) && is_literal(k.args[0].get()) &&
                      is_literal(k.args[1].get()) && is_literal(k.args[2].get());
        bool bad_bounds = false;
        for (const auto& b : bounds) bad_bounds = bad_bounds || !b.is_integral();
        if (folded && (!seq || bad_bounds))
          return Value::undefined("'" + type_name(obj) + "' object cannot be sliced");
        if (!seq) type_error("'" + type_name(obj) + "' object is not subscriptable");
        for (const auto& b : bounds) {
          require_defined(b);
          if (!b.is_integral())
            type_error("slice indices must be integers or None or have an __index__ method");
        }
        if (obj.is_string()) {
          std::u32string cs = py::decode(obj.str());
          std::u32string out;
          for (int64_t i : py::slice_indices(spec, static_cast<int64_t>(cs.size())))
            out.push_back(cs[static_cast<size_t>(i)]);
          return Value::string(py::encode(out));
        }
        const auto& items = obj.list_obj().items;
        std::vector<Value> out;
        for (int64_t i : py::slice_indices(spec, static_cast<int64_t>(items.size())))
          out.push_back(items[static_cast<size_t>(i)]);
        return Value::list(std::move(out), obj.list_obj().kind);
      }
      Value key = eval(k, f);
      line_ = e.line;
      return getitem(obj, key);
    }
    case ExprKind::Slice:
      // A slice inside a tuple subscript (x[a:b, c]): Python's getitem fails on such a key, which
      // the sandbox turns into undefined. Evaluate the bounds for their errors only.
      for (const auto& a : e.args)
        if (a) eval(*a, f);
      return Value::undefined("slice objects are not valid keys");
    case ExprKind::Tuple:
    case ExprKind::List: {
      std::vector<Value> items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a, f));
      return Value::list(std::move(items),
                         e.kind == ExprKind::Tuple ? SeqKind::Tuple : SeqKind::List);
    }
    case ExprKind::Dict: {
      auto dict = std::make_shared<Dict>();
      std::vector<Value> vals;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value k = eval(*e.args[i], f);
        Value v = eval(*e.args[i + 1], f);
        if (k.is_undefined() || k.is_list() || k.is_dict() || k.kind() == Kind::Namespace) {
          if (k.is_list() && k.list_obj().kind == SeqKind::Tuple) {
            // tuples are hashable
          } else {
            require_defined(k);
            type_error("unhashable type: '" + type_name(k) + "'");
          }
        }
        vals.push_back(v);
        dict->set(std::move(k), std::move(v));
      }
      dict->depth = make_depth(vals);
      return Value::dict(std::move(dict));
    }
    case ExprKind::BinOp: {
      Value a = eval(*e.args[0], f);
      Value b = eval(*e.args[1], f);
      line_ = e.line;
      return binary_op(*this, e.name, a, b);
    }
    case ExprKind::Concat: {
      std::string s;
      for (const auto& a : e.args) {
        s += to_str(eval(*a, f));
        check_string_size(s.size());
      }
      return Value::string(std::move(s));
    }
    case ExprKind::Compare:
      return eval_compare(e, f);
    case ExprKind::And: {
      Value a = eval(*e.args[0], f);
      return truthy(a) ? eval(*e.args[1], f) : a;
    }
    case ExprKind::Or: {
      Value a = eval(*e.args[0], f);
      return truthy(a) ? a : eval(*e.args[1], f);
    }
    case ExprKind::Not:
      return Value::boolean(!truthy(eval(*e.args[0], f)));
    case ExprKind::Neg:
      return unary_minus(eval(*e.args[0], f));
    case ExprKind::Pos:
      return unary_plus(eval(*e.args[0], f));
    case ExprKind::CondExpr: {
      if (truthy(eval(*e.args[0], f))) return eval(*e.args[1], f);
      if (e.args[2]) return eval(*e.args[2], f);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
    case ExprKind::Call:
      return eval_call(e, f);
    case ExprKind::Filter: {
      Value input = e.target ? eval(*e.target, f) : Value();
      CallArgs a = eval_args(e, f);
      line_ = e.line;
      return apply_filter(e.name, input, a);
    }
    case ExprKind::Test: {
      Value input = eval(*e.target, f);
      CallArgs a = eval_args(e, f);
      line_ = e.line;
      return Value::boolean(apply_test(e.name, input, a));
    }
  }
  return Value();
}

Value Interp::apply_filter(const std::string& name, const Value& input, CallArgs& args) {
  step();
  return call_filter(*this, name, input, args);
}

bool Interp::apply_test(const std::string& name, const Value& input, CallArgs& args) {
  step();
  return call_test(*this, name, input, args);
}

// ---------------------------------------------------------------- statements

void Interp::assign(const Expr& target, const Value& v, const FramePtr& f) {
  if (target.kind == ExprKind::Name) {
    f->vars[target.name] = v;
    return;
  }
  if (target.kind == ExprKind::Tuple) {
    std::vector<Value> items = iterate(v);
    if (items.size() != target.args.size()) {
      type_error(
          items.size() < target.args.size()
              ? "not enough values to unpack (expected " + std::to_string(target.args.size()) +
                    ", got " + std::to_string(items.size()) + ")"
              : "too many values to unpack (expected " + std::to_string(target.args.size()) + ")");
    }
    for (size_t i = 0; i < items.size(); ++i) assign(*target.args[i], items[i], f);
    return;
  }
  if (target.kind == ExprKind::NSRef) {
    const Value* ns = f->lookup(target.name);
    if (ns == nullptr || ns->kind() != Kind::Namespace)
      fail(ErrorKind::Type, "cannot assign attribute on non-namespace object");
    Namespace& n = ns->ns_obj();
    uint32_t d = depth_of(v) + 1;
    if (d > kMaxValueDepth) fail(ErrorKind::Limit, "values nested too deeply");
    n.depth = std::max(n.depth, d);
    n.attrs->set(target.value, v);
    return;
  }
  type_error("invalid assignment target");
}

Flow Interp::exec(const std::vector<StmtPtr>& body, const FramePtr& f, std::string& out) {
  DepthScope d(*this);
  for (const auto& s : body) {
    Flow fl = exec_stmt(*s, f, out);
    if (fl != Flow::Normal) return fl;
  }
  return Flow::Normal;
}

void Interp::run_loop(const Stmt& s, const FramePtr& f, std::string& out, const Value& iterable,
                      int64_t depth0) {
  std::vector<Value> items = iterate(iterable);
  if (s.test) {
    std::vector<Value> kept;
    for (auto& v : items) {
      step();
      auto tf = child(f);
      assign(*s.target, v, tf);
      if (truthy(eval(*s.test, tf))) kept.push_back(std::move(v));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    if (!s.else_body.empty()) exec(s.else_body, child(f), out);
    return;
  }
  auto loop = std::make_shared<LoopObj>();
  loop->items = &items;
  loop->length = static_cast<int64_t>(items.size());
  loop->depth0 = depth0;
  if (s.recursive) {
    const Stmt* node = &s;
    std::weak_ptr<Frame> scope = f;
    loop->recurse = [node, scope, depth0](Interp& in, CallArgs& a) -> Value {
      if (a.pos.size() != 1 || !a.kw.empty()) type_error("loop() takes exactly one argument");
      FramePtr parent = scope.lock();
      if (!parent) type_error("recursive loop called after its scope ended");
      std::string sub;
      in.run_loop(*node, parent, sub, a.pos[0], depth0 + 1);
      return Value::string(std::move(sub));
    };
  }
  Value loop_value = Value::object(Kind::Loop, loop);
  for (size_t i = 0; i < items.size(); ++i) {
    step();
    loop->index0 = static_cast<int64_t>(i);
    auto it = child(f);
    assign(*s.target, items[i], it);
    it->vars["loop"] = loop_value;
    Flow fl = exec(s.body, it, out);
    if (fl == Flow::Break) break;
  }
  loop->items = nullptr;
}

Flow Interp::exec_for(const Stmt& s, const FramePtr& f, std::string& out) {
  Value iterable = eval(*s.expr, f);
  run_loop(s, f, out, iterable, 0);
  return Flow::Normal;
}

Flow Interp::exec_stmt(const Stmt& s, const FramePtr& f, std::string& out) {
  step();
  line_ = s.line;
  switch (s.kind) {
    case StmtKind::Data:
      append_out(out, s.text);
      return Flow::Normal;
    case StmtKind::Print: {
      Value v = eval(*s.expr, f);
      append_out(out, to_str(v));
      return Flow::Normal;
    }
    case StmtKind::If: {
      for (const auto& [test, body] : s.branches) {
        if (truthy(eval(*test, f))) return exec(body, f, out);
      }
      return exec(s.else_body, f, out);
    }
    case StmtKind::For:
      return exec_for(s, f, out);
    case StmtKind::Set: {
      Value v = eval(*s.expr, f);
      line_ = s.line;
      assign(*s.target, v, f);
      return Flow::Normal;
    }
    case StmtKind::SetBlock: {
      std::string body;
      exec(s.body, child(f), body);
      Value v = Value::string(std::move(body));
      if (s.expr) {
        // The filter chain's innermost input is the block's text.
        std::vector<const Expr*> chain;
        for (const Expr* x = s.expr.get(); x != nullptr; x = x->target.get()) chain.push_back(x);
        for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
          CallArgs a = eval_args(**it, f);
          v = apply_filter((*it)->name, v, a);
        }
      }
      assign(*s.target, v, f);
      return Flow::Normal;
    }
    case StmtKind::Macro: {
      f->vars[s.text] = make_macro(s, f, false);
      return Flow::Normal;
    }
    case StmtKind::CallBlock: {
      const Expr& call_expr = *s.expr;
      Value fn = eval(*call_expr.target, f);
      CallArgs a = eval_args(call_expr, f);
      a.kw.emplace_back("caller", make_macro(s, f, true));
      append_out(out, to_str(call(fn, a)));
      return Flow::Normal;
    }
    case StmtKind::FilterBlock: {
      std::string body;
      exec(s.body, child(f), body);
      Value v = Value::string(std::move(body));
      std::vector<const Expr*> chain;
      for (const Expr* x = s.expr.get(); x != nullptr; x = x->target.get()) chain.push_back(x);
      for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        CallArgs a = eval_args(**it, f);
        v = apply_filter((*it)->name, v, a);
      }
      append_out(out, to_str(v));
      return Flow::Normal;
    }
    case StmtKind::With: {
      auto w = child(f);
      for (const auto& [target, value] : s.assignments) assign(*target, eval(*value, f), w);
      return exec(s.body, w, out);
    }
    case StmtKind::Scope: {
      if (s.expr) eval(*s.expr, f);
      std::string body;
      Flow fl = exec(s.body, child(f), body);
      append_out(out, body);
      return fl;
    }
    case StmtKind::Break:
      return Flow::Break;
    case StmtKind::Continue:
      return Flow::Continue;
  }
  return Flow::Normal;
}

}  // namespace ringlm::jinja
