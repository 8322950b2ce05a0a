// The tree-walking interpreter: scopes, expression evaluation, statement execution, and the
// builtin filters/tests/methods/globals (in builtins_*.cc). One Interp renders one template once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/value.h"

namespace ringlm::jinja {

// Bounds that keep any template (including hostile ones) from exhausting the machine.
struct RenderLimits {
  size_t max_string_bytes = 64u << 20;  // any single string, including the output
  size_t max_items = 4u << 20;          // elements of any one list
  int max_depth = 400;                  // nested evaluation (macro recursion included)
  int64_t max_steps = 50'000'000;       // statements + loop iterations + filter applications
};

// A variable scope: each loop iteration, macro call and block body gets one.
struct Frame {
  std::shared_ptr<Frame> parent;
  std::unordered_map<std::string, Value> vars;

  const Value* lookup(const std::string& name) const {
    for (const Frame* f = this; f != nullptr; f = f->parent.get()) {
      auto it = f->vars.find(name);
      if (it != f->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using FramePtr = std::shared_ptr<Frame>;

enum class Flow { Normal, Break, Continue };

class Interp {
 public:
  Interp(const RenderLimits& limits, std::chrono::system_clock::time_point now);
  ~Interp();

  // Renders `body` with the given top-level variables (plus the globals).
  std::string render(const std::vector<StmtPtr>& body,
                     const std::vector<std::pair<std::string, Value>>& context);

  Value eval(const Expr& e, const FramePtr& f);
  Flow exec(const std::vector<StmtPtr>& body, const FramePtr& f, std::string& out);
  Value call(const Value& fn, CallArgs& args);

  // Attribute and item access with jinja2's sandboxed fallbacks.
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);

  Value apply_filter(const std::string& name, const Value& input, CallArgs& args);
  bool apply_test(const std::string& name, const Value& input, CallArgs& args);

  // Size-checked constructors for values built at runtime.
  Value make_string(std::string s);
  Value make_list(std::vector<Value> items, SeqKind kind = SeqKind::List);
  void check_string_size(size_t n) const;
  void step();  // counts work against max_steps

  const RenderLimits& limits() const { return limits_; }
  std::chrono::system_clock::time_point now() const { return now_; }
  int line() const { return line_; }
  void register_namespace(const std::shared_ptr<Namespace>& ns) { namespaces_.push_back(ns); }

 private:
  friend struct DepthScope;
  Value eval_call(const Expr& e, const FramePtr& f);
  CallArgs eval_args(const Expr& e, const FramePtr& f);
  Value eval_compare(const Expr& e, const FramePtr& f);
  Value make_macro(const Stmt& s, const FramePtr& f, bool is_caller);
  Flow exec_stmt(const Stmt& s, const FramePtr& f, std::string& out);
  Flow exec_for(const Stmt& s, const FramePtr& f, std::string& out);
  void run_loop(const Stmt& s, const FramePtr& f, std::string& out, const Value& iterable,
                int64_t depth0);
  void assign(const Expr& target, const Value& v, const FramePtr& f);
  void append_out(std::string& out, const std::string& s) const;

  RenderLimits limits_;
  std::chrono::system_clock::time_point now_;
  int depth_ = 0;
  int64_t steps_ = 0;
  int line_ = 1;
  std::vector<std::shared_ptr<Namespace>> namespaces_;  // cleared after rendering (cycles)
};

// RAII nesting counter for recursion-limited entry points.
struct DepthScope {
  Interp& in;
  explicit DepthScope(Interp& i);
  ~DepthScope() { --in.depth_; }
};

// ---- builtins (builtins_*.cc) ----
// Binds positional/keyword arguments to parameter names; throws TypeError on surplus or unknown.
std::vector<std::optional<Value>> bind_args(const CallArgs& args,
                                            const std::vector<const char*>& names,
                                            const std::string& fname);
Value call_filter(Interp& in, const std::string& name, const Value& input, CallArgs& args);
bool call_test(Interp& in, const std::string& name, const Value& input, CallArgs& args);
// A bound method of a str/dict/list, or nullopt when `name` is not a method of that type.
// Sandbox-blocked mutators come back as an unsafe Undefined.
std::optional<Value> get_method(Interp& in, const Value& obj, const std::string& name);
std::vector<std::pair<std::string, Value>> make_globals(Interp& in);

// Python's printf-style `fmt % args`.
std::string percent_format(Interp& in, const std::string& fmt, const Value& args);

// Python operators.
Value binary_op(Interp& in, const std::string& op, const Value& a, const Value& b);
Value unary_minus(const Value& v);
Value unary_plus(const Value& v);

}  // namespace ringlm::jinja
