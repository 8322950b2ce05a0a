// Syntax tree of a parsed template: the node set of jinja2's parser that chat templates use.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace ringlm::jinja {

enum class ExprKind : uint8_t {
  Const,     // value
  Name,      // name
  NSRef,     // name.attr as an assignment target (`set ns.x = ...`)
  Getattr,   // target.name
  Getitem,   // target[args[0]]
  Slice,     // args: start, stop, step (each may be null)
  Tuple,     // args
  List,      // args
  Dict,      // args: key, value, key, value, ...
  BinOp,     // name is the operator: + - * / // % **
  Concat,    // args joined with ~
  Compare,   // args[0] ops[i] args[i+1] ...
  And,       // args[0] and args[1]
  Or,        // args[0] or args[1]
  Not,       // not args[0]
  Neg,       // -args[0]
  Pos,       // +args[0]
  CondExpr,  // args: test, then, else (else may be null)
  Call,      // target(args..., kwargs...)
  Filter,    // target|name(args...); target is null in filter blocks
  Test,      // target is name(args...)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::Const;
  int line = 1;
  Value value;
  std::string name;
  ExprPtr target;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr dyn_args;    // *args
  ExprPtr dyn_kwargs;  // **kwargs
  std::vector<std::string> ops;
};

enum class StmtKind : uint8_t {
  Data,         // text
  Print,        // {{ expr }}
  If,           // branches (if / elif: test, body), else_body
  For,          // target in expr [if test], body, else_body, recursive
  Set,          // target = expr
  SetBlock,     // {% set target [| filter] %}body{% endset %}; filter in expr (may be null)
  Macro,        // name(params=defaults) body
  CallBlock,    // {% call(params) expr %}body{% endcall %}
  FilterBlock,  // {% filter expr %}body{% endfilter %}
  With,         // with targets = values: body
  Scope,        // a body in its own scope (generation, autoescape, block)
  Break,
  Continue,
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;

struct Stmt {
  StmtKind kind = StmtKind::Data;
  int line = 1;
  std::string text;  // Data text; Macro name
  ExprPtr expr;
  ExprPtr target;
  ExprPtr test;
  bool recursive = false;
  std::vector<StmtPtr> body;
  std::vector<StmtPtr> else_body;
  std::vector<std::string> params;                                 // Macro / CallBlock
  std::vector<ExprPtr> defaults;                                   // for the last params
  std::vector<std::pair<ExprPtr, ExprPtr>> assignments;            // With: target, value
  std::vector<std::pair<ExprPtr, std::vector<StmtPtr>>> branches;  // If
};

}  // namespace ringlm::jinja
