// Compile-time check of filter and test names, as jinja2 does when it compiles a template.
#include "tokenizer/jinja/builtin_names.h"
#include "tokenizer/jinja/errors.h"
#include "tokenizer/jinja/parser.h"

namespace ringlm::jinja {

namespace {

// jinja2 resolves filter and test names when compiling, except inside `if` statements and
// conditional expressions ("soft" frames), where a missing one fails only if reached.
void check_names(const Expr* e, bool soft) {
  if (e == nullptr) return;
  if (e->kind == ExprKind::CondExpr) soft = true;
  if (!soft && e->kind == ExprKind::Filter && !is_builtin_filter(e->name))
    throw TemplateError(ErrorKind::Syntax, e->line, "No filter named '" + e->name + "'.");
  if (!soft && e->kind == ExprKind::Test && !is_builtin_test(e->name))
    throw TemplateError(ErrorKind::Syntax, e->line, "No test named '" + e->name + "'.");
  check_names(e->target.get(), soft);
  check_names(e->dyn_args.get(), soft);
  check_names(e->dyn_kwargs.get(), soft);
  for (const auto& a : e->args) check_names(a.get(), soft);
  for (const auto& kv : e->kwargs) check_names(kv.second.get(), soft);
}

void check_body(const std::vector<StmtPtr>& body, bool soft) {
  for (const auto& s : body) {
    switch (s->kind) {
      case StmtKind::If:
        for (const auto& [test, branch] : s->branches) {
          check_names(test.get(), true);
          check_body(branch, true);
        }
        check_body(s->else_body, true);
        break;
      case StmtKind::For:
        check_names(s->expr.get(), soft);
        check_names(s->test.get(), false);
        check_body(s->body, false);
        check_body(s->else_body, false);
        break;
      case StmtKind::Print:
      case StmtKind::Set:
        check_names(s->expr.get(), soft);
        break;
      case StmtKind::With:
        for (const auto& kv : s->assignments) check_names(kv.second.get(), soft);
        check_body(s->body, false);
        break;
      default:
        check_names(s->expr.get(), soft);
        for (const auto& d : s->defaults) check_names(d.get(), false);
        check_body(s->body, false);
        break;
    }
  }
}

}  // namespace

void check_filter_and_test_names(const std::vector<StmtPtr>& body) {
  check_body(body, false);
}

}  // namespace ringlm::jinja
