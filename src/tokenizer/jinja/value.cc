#include "tokenizer/jinja/value.h"

#include <cmath>
#include <limits>
#include <unordered_set>

#include "tokenizer/jinja/errors.h"
#include "tokenizer/jinja/pystr.h"

namespace ringlm::jinja {

List::~List() = default;
Dict::~Dict() = default;
LoopObj::~LoopObj() = default;

const Value* Dict::find(const std::string& key) const {
  auto it = str_index.find(key);
  return it == str_index.end() ? nullptr : &items[it->second].second;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(key.str());
  for (const auto& [k, v] : items)
    if (!k.is_string() && equal(k, key)) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  if (key.is_string()) {
    auto it = str_index.find(key.str());
    if (it != str_index.end()) {
      items[it->second].second = std::move(value);
      return;
    }
    str_index.emplace(key.str(), items.size());
  } else {
    for (auto& [k, v] : items)
      if (!k.is_string() && equal(k, key)) {
        v = std::move(value);
        return;
      }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::undefined(std::string message, bool unsafe) {
  Value v;
  auto info = std::make_shared<UndefinedInfo>();
  info->message = std::move(message);
  info->unsafe = unsafe;
  v.o_ = std::move(info);
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}

Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = d;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::String;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::list(std::vector<Value> items, SeqKind kind) {
  auto l = std::make_shared<List>();
  l->depth = make_depth(items);
  l->items = std::move(items);
  l->kind = kind;
  return object(Kind::List, std::move(l));
}

Value Value::dict(std::shared_ptr<Dict> d) {
  return object(Kind::Dict, std::move(d));
}

Value Value::func(std::string name, NativeFn fn) {
  auto f = std::make_shared<Func>();
  f->name = std::move(name);
  f->fn = std::move(fn);
  return object(Kind::Func, std::move(f));
}

Value Value::object(Kind kind, std::shared_ptr<Object> o) {
  Value v;
  v.kind_ = kind;
  v.o_ = std::move(o);
  return v;
}

void materialize(List& l) {
  if (!l.producer) return;
  auto produce = std::move(l.producer);
  l.producer = nullptr;
  l.items = produce();
  l.depth = make_depth(l.items);
}

uint32_t depth_of(const Value& v) {
  switch (v.kind()) {
    case Kind::List:
    case Kind::Dict:
    case Kind::Namespace:
      return v.identity()->depth;
    default:
      return 0;
  }
}

uint32_t make_depth(const std::vector<Value>& children) {
  uint32_t d = 0;
  for (const auto& c : children) d = std::max(d, depth_of(c));
  if (d + 1 > kMaxValueDepth)
    fail(ErrorKind::Limit, "values nested deeper than " + std::to_string(kMaxValueDepth));
  return d + 1;
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::List:
      switch (v.list_obj().kind) {
        case SeqKind::List:
          return "list";
        case SeqKind::Tuple:
          return "tuple";
        case SeqKind::Generator:
          return "generator";
        case SeqKind::Keys:
          return "dict_keys";
        case SeqKind::Values:
          return "dict_values";
        case SeqKind::Items:
          return "dict_items";
      }
      return "list";
    case Kind::Dict:
      return "dict";
    case Kind::Func:
      return "function";
    case Kind::Namespace:
      return "Namespace";
    case Kind::Loop:
      return "LoopContext";
  }
  return "object";
}

void require_defined(const Value& v) {
  if (!v.is_undefined()) return;
  const UndefinedInfo* info = v.undefined_info();
  std::string msg =
      info != nullptr && !info->message.empty() ? info->message : "value is undefined";
  fail(info != nullptr && info->unsafe ? ErrorKind::Security : ErrorKind::Undefined, msg);
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return v.as_bool();
    case Kind::Int:
      return v.as_int() != 0;
    case Kind::Float:
      return v.as_double() != 0.0;
    case Kind::String:
      return !v.str().empty();
    case Kind::List:
      if (v.list_obj().kind == SeqKind::Generator) return true;
      return !v.list_obj().items.empty();
    case Kind::Dict:
      return !v.dict_obj().items.empty();
    default:
      return true;
  }
}

namespace {

// Objects whose repr is in progress: Python prints a re-entered container as [...] / {...}.
thread_local std::unordered_set<const Object*> repr_active;

struct ReprGuard {
  const Object* o;
  bool entered;
  explicit ReprGuard(const Object* obj) : o(obj), entered(repr_active.insert(obj).second) {}
  ~ReprGuard() {
    if (entered) repr_active.erase(o);
  }
};

void repr_seq(std::string& out, const Value& v) {
  const List& l = v.list_obj();
  ReprGuard g(&l);
  const char* open = "[";
  const char* close = "]";
  std::string prefix, suffix;
  switch (l.kind) {
    case SeqKind::Tuple:
      open = "(";
      close = ")";
      break;
    case SeqKind::Generator:
      out += "<generator object at jinja>";
      return;
    case SeqKind::Keys:
      prefix = "dict_keys(";
      suffix = ")";
      break;
    case SeqKind::Values:
      prefix = "dict_values(";
      suffix = ")";
      break;
    case SeqKind::Items:
      prefix = "dict_items(";
      suffix = ")";
      break;
    default:
      break;
  }
  if (!g.entered) {
    out += l.kind == SeqKind::Tuple ? "(...)" : "[...]";
    return;
  }
  out += prefix;
  out += open;
  for (size_t i = 0; i < l.items.size(); ++i) {
    if (i > 0) out += ", ";
    out += repr(l.items[i]);
  }
  if (l.kind == SeqKind::Tuple && l.items.size() == 1) out += ",";
  out += close;
  out += suffix;
}

void repr_dict(std::string& out, const Dict& d) {
  ReprGuard g(&d);
  if (!g.entered) {
    out += "{...}";
    return;
  }
  out += "{";
  bool first = true;
  for (const auto& [k, val] : d.items) {
    if (!first) out += ", ";
    first = false;
    out += repr(k);
    out += ": ";
    out += repr(val);
  }
  out += "}";
}

}  // namespace

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return "";
    case Kind::String:
      return v.str();
    default:
      return repr(v);
  }
}

std::string repr(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return v.as_bool() ? "True" : "False";
    case Kind::Int:
      return std::to_string(v.as_int());
    case Kind::Float:
      return py::float_repr(v.as_double());
    case Kind::String:
      return py::repr(v.str());
    case Kind::List: {
      std::string out;
      repr_seq(out, v);
      return out;
    }
    case Kind::Dict: {
      std::string out;
      repr_dict(out, v.dict_obj());
      return out;
    }
    case Kind::Func:
      if (v.func_obj().is_macro) return "<Macro '" + v.func_obj().name + "'>";
      return "<function " + v.func_obj().name + ">";
    case Kind::Namespace: {
      std::string out = "<Namespace ";
      repr_dict(out, *v.ns_obj().attrs);
      return out + ">";
    }
    case Kind::Loop: {
      const LoopObj& l = v.loop_obj();
      return "<LoopContext " + std::to_string(l.index0 + 1) + "/" + std::to_string(l.length) + ">";
    }
  }
  return "";
}

namespace {

// Exact comparison of an integer with a double, as CPython does.
int compare_int_double(int64_t i, double d) {
  if (std::isnan(d)) return 2;  // unordered
  if (d >= 9223372036854775808.0) return -1;
  if (d < -9223372036854775808.0) return 1;
  double fl = std::floor(d);
  auto di = static_cast<int64_t>(fl);
  if (i < di) return -1;
  if (i > di) return 1;
  return fl < d ? -1 : 0;
}

bool is_sequence_kind(SeqKind k) {
  return k == SeqKind::List || k == SeqKind::Tuple;
}

}  // namespace

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::Float && b.kind() == Kind::Float) return a.as_double() == b.as_double();
    if (a.kind() == Kind::Float) return compare_int_double(b.as_int(), a.as_double()) == 0;
    if (b.kind() == Kind::Float) return compare_int_double(a.as_int(), b.as_double()) == 0;
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::String:
      return a.str() == b.str();
    case Kind::List: {
      const List& x = a.list_obj();
      const List& y = b.list_obj();
      if (&x == &y) return true;
      if (x.kind != y.kind) {
        // dict_keys compare like sets; other mixes are unequal. Keys views are rare: compare as
        // lists of equal length whose items all appear in the other.
        return false;
      }
      if (x.kind == SeqKind::Generator) return false;
      if (x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i)
        if (!equal(x.items[i], y.items[i])) return false;
      return true;
    }
    case Kind::Dict: {
      const Dict& x = a.dict_obj();
      const Dict& y = b.dict_obj();
      if (&x == &y) return true;
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.find(k);
        if (other == nullptr || !equal(v, *other)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

int compare(const Value& a, const Value& b) {
  require_defined(a);
  require_defined(b);
  if (a.is_number() && b.is_number()) {
    int c;
    if (a.kind() == Kind::Float && b.kind() == Kind::Float) {
      double x = a.as_double(), y = b.as_double();
      c = x < y ? -1 : x > y ? 1 : x == y ? 0 : 2;
    } else if (a.kind() == Kind::Float) {
      c = compare_int_double(b.as_int(), a.as_double());
      if (c != 2) c = -c;
    } else if (b.kind() == Kind::Float) {
      c = compare_int_double(a.as_int(), b.as_double());
    } else {
      c = a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    }
    return c;  // 2 means unordered (NaN): every ordering test is false
  }
  if (a.is_string() && b.is_string())
    return a.str().compare(b.str()) < 0 ? -1 : a.str() == b.str() ? 0 : 1;
  if (a.is_list() && b.is_list() && a.list_obj().kind == b.list_obj().kind &&
      is_sequence_kind(a.list_obj().kind)) {
    const auto& x = a.list_obj().items;
    const auto& y = b.list_obj().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equal(x[i], y[i])) return compare(x[i], y[i]);
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  type_error("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) +
             "'");
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return 0;
    case Kind::String:
      return static_cast<int64_t>(py::length(v.str()));
    case Kind::List:
      if (v.list_obj().kind == SeqKind::Generator)
        type_error("object of type 'generator' has no len()");
      return static_cast<int64_t>(v.list_obj().items.size());
    case Kind::Dict:
      return static_cast<int64_t>(v.dict_obj().items.size());
    default:
      type_error("object of type '" + type_name(v) + "' has no len()");
  }
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return {};
    case Kind::String: {
      std::vector<Value> out;
      const std::string& s = v.str();
      size_t i = 0;
      while (i < s.size()) {
        size_t j = i + 1;
        while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xc0) == 0x80) ++j;
        out.push_back(Value::string(s.substr(i, j - i)));
        i = j;
      }
      return out;
    }
    case Kind::List: {
      List& l = v.list_obj();
      materialize(l);
      if (l.kind == SeqKind::Generator) {
        std::vector<Value> rest(l.items.begin() + static_cast<std::ptrdiff_t>(l.cursor),
                                l.items.end());
        l.cursor = l.items.size();
        return rest;
      }
      return l.items;
    }
    case Kind::Dict: {
      std::vector<Value> keys;
      keys.reserve(v.dict_obj().items.size());
      for (const auto& kv : v.dict_obj().items) keys.push_back(kv.first);
      return keys;
    }
    default:
      type_error("'" + type_name(v) + "' object is not iterable");
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::Undefined:
      return false;
    case Kind::String:
      if (!item.is_string())
        type_error("'in <string>' requires string as left operand, not " + type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Kind::Dict:
      return container.dict_obj().find(item) != nullptr;
    case Kind::List: {
      List& l = container.list_obj();
      materialize(l);
      if (l.kind == SeqKind::Generator) {
        // Consumes up to and including the match, like Python.
        while (l.cursor < l.items.size())
          if (equal(l.items[l.cursor++], item)) return true;
        return false;
      }
      for (const auto& x : l.items)
        if (equal(x, item)) return true;
      return false;
    }
    default:
      type_error("argument of type '" + type_name(container) + "' is not iterable");
  }
}

namespace {
Value from_json_at(const nlohmann::ordered_json& j, uint32_t depth) {
  if (depth > kMaxValueDepth)
    fail(ErrorKind::Limit, "JSON nested deeper than " + std::to_string(kMaxValueDepth));
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null:
      return Value::none();
    case T::boolean:
      return Value::boolean(j.get<bool>());
    case T::number_integer:
      return Value::integer(j.get<int64_t>());
    case T::number_unsigned: {
      auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        type_error("JSON integer " + std::to_string(u) + " is too large");
      return Value::integer(static_cast<int64_t>(u));
    }
    case T::number_float:
      return Value::number(j.get<double>());
    case T::string: {
      const auto& s = j.get_ref<const std::string&>();
      if (!py::valid_utf8(s)) type_error("JSON string is not valid UTF-8");
      return Value::string(s);
    }
    case T::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(from_json_at(x, depth + 1));
      return Value::list(std::move(items));
    }
    case T::object: {
      auto d = std::make_shared<Dict>();
      std::vector<Value> vals;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!py::valid_utf8(it.key())) type_error("JSON key is not valid UTF-8");
        d->set(Value::string(it.key()), from_json_at(it.value(), depth + 1));
      }
      for (const auto& kv : d->items) vals.push_back(kv.second);
      d->depth = make_depth(vals);
      return Value::dict(std::move(d));
    }
    default:
      type_error("unsupported JSON value (binary)");
  }
}
}  // namespace

Value from_json(const nlohmann::ordered_json& j) {
  return from_json_at(j, 1);
}

}  // namespace ringlm::jinja
