// Runtime values of the Jinja interpreter, with Python's data model as jinja2 sees it: None, bool,
// int, float, str, list/tuple, dict (insertion ordered, shared by reference like Python objects),
// callables, namespaces, loop objects and jinja2's default Undefined.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringlm::jinja {

class Interp;
class Value;

enum class Kind : uint8_t {
  Undefined,
  None,
  Bool,
  Int,
  Float,
  String,
  List,
  Dict,
  Func,
  Namespace,
  Loop,
};

// Flavours of sequence: Python lists, tuples, one-shot generators (what jinja2's select/map/...
// filters return: always truthy, no len(), consumed by iteration) and dict views.
enum class SeqKind : uint8_t { List, Tuple, Generator, Keys, Values, Items };

struct Object {
  virtual ~Object() = default;
  // Nesting depth of containers (1 + deepest child), bounded so that printing, comparing and
  // destroying values never recurses without limit.
  uint32_t depth = 1;
};

constexpr uint32_t kMaxValueDepth = 200;

// Destructors are out of line: Value is incomplete here and the vtable needs them.
struct List : Object {
  ~List() override;
  std::vector<Value> items;
  SeqKind kind = SeqKind::List;
  size_t cursor = 0;  // generators: items before the cursor were consumed
  // Generators from jinja2's generator filters run lazily: errors surface only when consumed.
  std::function<std::vector<Value>()> producer;
};
// Runs a lazy generator's producer once (no-op otherwise).
void materialize(List& l);

struct Dict : Object {
  Dict() = default;
  Dict(const Dict&) = default;
  ~Dict() override;
  std::vector<std::pair<Value, Value>> items;
  std::unordered_map<std::string, size_t> str_index;  // positions of string keys

  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(Value key, Value value);
};

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};
using NativeFn = std::function<Value(Interp&, CallArgs&)>;

struct Func : Object {
  std::string name;
  NativeFn fn;
  bool is_macro = false;  // printed as <Macro 'name'>
};

struct Namespace : Object {
  std::shared_ptr<Dict> attrs = std::make_shared<Dict>();
};

struct LoopObj : Object {
  ~LoopObj() override;
  int64_t index0 = 0;
  int64_t length = 0;
  int64_t depth0 = 0;
  std::vector<Value>* items = nullptr;  // the iterated items (owned by the running loop)
  bool have_changed = false;
  std::vector<Value> last_changed;
  NativeFn recurse;  // set for `recursive` loops
};

struct UndefinedInfo : Object {
  std::string message;  // what jinja2's UndefinedError would say
  bool unsafe = false;  // raised as SecurityError instead (sandbox-blocked attribute)
};

class Value {
 public:
  Value() = default;  // Undefined without a hint
  static Value undefined(std::string message, bool unsafe = false);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  static Value list(std::vector<Value> items, SeqKind kind = SeqKind::List);
  static Value tuple(std::vector<Value> items) { return list(std::move(items), SeqKind::Tuple); }
  static Value dict(std::shared_ptr<Dict> d);
  static Value dict() { return dict(std::make_shared<Dict>()); }
  static Value func(std::string name, NativeFn fn);
  static Value object(Kind kind, std::shared_ptr<Object> o);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_int() const { return kind_ == Kind::Int; }  // bool is not int here; see is_integral
  bool is_integral() const { return kind_ == Kind::Int || kind_ == Kind::Bool; }
  bool is_number() const { return is_integral() || kind_ == Kind::Float; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::Bool ? (b_ ? 1 : 0) : i_; }  // integral kinds
  double as_double() const { return kind_ == Kind::Float ? f_ : static_cast<double>(as_int()); }
  const std::string& str() const { return *s_; }
  List& list_obj() const { return static_cast<List&>(*o_); }
  Dict& dict_obj() const { return static_cast<Dict&>(*o_); }
  Func& func_obj() const { return static_cast<Func&>(*o_); }
  Namespace& ns_obj() const { return static_cast<Namespace&>(*o_); }
  LoopObj& loop_obj() const { return static_cast<LoopObj&>(*o_); }
  const UndefinedInfo* undefined_info() const {
    return static_cast<const UndefinedInfo*>(o_.get());
  }
  const Object* identity() const { return o_.get(); }
  std::shared_ptr<Dict> dict_ptr() const { return std::static_pointer_cast<Dict>(o_); }

 private:
  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<Object> o_;
};

// Container depth of v (0 for scalars); make_depth() throws a Limit fault past kMaxValueDepth.
uint32_t depth_of(const Value& v);
uint32_t make_depth(const std::vector<Value>& children);

// Python's type(x).__name__ for messages.
std::string type_name(const Value& v);
// Throws UndefinedError (or SecurityError) if v is Undefined: any operation but print/iter/bool.
void require_defined(const Value& v);

bool truthy(const Value& v);
std::string to_str(const Value& v);  // str(v)
std::string repr(const Value& v);    // repr(v)
bool equal(const Value& a, const Value& b);
// Python ordering; throws TypeError for unorderable pairs. Returns <0, 0, >0.
int compare(const Value& a, const Value& b);
// len(v); throws TypeError for values without a length.
int64_t length(const Value& v);
// list(iter(v)): strings yield characters, dicts keys, Undefined nothing; consumes generators.
std::vector<Value> iterate(const Value& v);
bool contains(const Value& container, const Value& item);  // `item in container`

// JSON (the chat request) -> values; objects keep their key order.
Value from_json(const nlohmann::ordered_json& j);

}  // namespace ringlm::jinja
