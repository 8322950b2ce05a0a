// Python operators, jinja2's tests, and the globals a chat template sees (jinja2's defaults plus
// transformers' raise_exception and strftime_now).
#include <cmath>
#include <ctime>

#include "tokenizer/jinja/builtin_names.h"
#include "tokenizer/jinja/errors.h"
#include "tokenizer/jinja/interp.h"
#include "tokenizer/jinja/pystr.h"

namespace ringlm::jinja {

std::vector<std::optional<Value>> bind_args(const CallArgs& args,
                                            const std::vector<const char*>& names,
                                            const std::string& fname) {
  std::vector<std::optional<Value>> out(names.size());
  if (args.pos.size() > names.size())
    type_error(fname + "() takes at most " + std::to_string(names.size()) + " arguments (" +
               std::to_string(args.pos.size()) + " given)");
  for (size_t i = 0; i < args.pos.size(); ++i) out[i] = args.pos[i];
  for (const auto& [k, v] : args.kw) {
    size_t i = 0;
    while (i < names.size() && k != names[i]) ++i;
    if (i == names.size()) type_error(fname + "() got an unexpected keyword argument '" + k + "'");
    if (out[i]) type_error(fname + "() got multiple values for argument '" + k + "'");
    out[i] = v;
  }
  return out;
}

// ---------------------------------------------------------------- operators

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  type_error("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" +
             type_name(b) + "'");
}

void check_overflow(bool overflow) {
  if (overflow) fail(ErrorKind::Limit, "integer overflow (ringlm integers are 64-bit)");
}

double py_fmod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((b < 0) != (m < 0))) m += b;
  if (m == 0) m = std::copysign(0.0, b);
  return m;
}

Value repeat(Interp& in, const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.str();
    if (!s.empty())
      in.check_string_size(s.size() * static_cast<size_t>(std::min<int64_t>(n, INT32_MAX)));
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value::string(std::move(out));
  }
  const List& l = seq.list_obj();
  if (!l.items.empty() &&
      static_cast<size_t>(std::min<int64_t>(n, INT32_MAX)) * l.items.size() > in.limits().max_items)
    fail(ErrorKind::Limit, "list too long");
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), l.items.begin(), l.items.end());
  return Value::list(std::move(out), l.kind);
}

bool is_plain_seq(const Value& v) {
  return v.is_list() && (v.list_obj().kind == SeqKind::List || v.list_obj().kind == SeqKind::Tuple);
}

}  // namespace

Value binary_op(Interp& in, const std::string& op, const Value& a, const Value& b) {
  require_defined(a);
  // str.__mod__ formats an Undefined argument without touching it.
  if (op == "%" && a.is_string()) return in.make_string(percent_format(in, a.str(), b));
  require_defined(b);
  bool ints = a.is_integral() && b.is_integral();
  bool nums = a.is_number() && b.is_number();
  int64_t r = 0;
  if (op == "+") {
    if (ints) {
      check_overflow(__builtin_add_overflow(a.as_int(), b.as_int(), &r));
      return Value::integer(r);
    }
    if (nums) return Value::number(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) return in.make_string(a.str() + b.str());
    if (is_plain_seq(a) && is_plain_seq(b) && a.list_obj().kind == b.list_obj().kind) {
      std::vector<Value> items = a.list_obj().items;
      items.insert(items.end(), b.list_obj().items.begin(), b.list_obj().items.end());
      return in.make_list(std::move(items), a.list_obj().kind);
    }
    if (a.is_string() || b.is_string()) {
      const Value& other = a.is_string() ? b : a;
      type_error(a.is_string()
                     ? "can only concatenate str (not \"" + type_name(other) + "\") to str"
                     : "unsupported operand type(s) for +: '" + type_name(a) + "' and 'str'");
    }
    unsupported(op, a, b);
  }
  if (op == "-") {
    if (ints) {
      check_overflow(__builtin_sub_overflow(a.as_int(), b.as_int(), &r));
      return Value::integer(r);
    }
    if (nums) return Value::number(a.as_double() - b.as_double());
    unsupported(op, a, b);
  }
  if (op == "*") {
    if (ints) {
      check_overflow(__builtin_mul_overflow(a.as_int(), b.as_int(), &r));
      return Value::integer(r);
    }
    if (nums) return Value::number(a.as_double() * b.as_double());
    if ((a.is_string() || is_plain_seq(a)) && b.is_integral()) return repeat(in, a, b.as_int());
    if ((b.is_string() || is_plain_seq(b)) && a.is_integral()) return repeat(in, b, a.as_int());
    unsupported(op, a, b);
  }
  if (op == "/") {
    if (!nums) unsupported(op, a, b);
    if (b.as_double() == 0) type_error("ZeroDivisionError: division by zero");
    return Value::number(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (!nums) unsupported(op, a, b);
    if (b.as_double() == 0) type_error("ZeroDivisionError: integer division or modulo by zero");
    if (ints) {
      int64_t x = a.as_int(), y = b.as_int();
      if (x == INT64_MIN && y == -1) fail(ErrorKind::Limit, "integer overflow");
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return Value::integer(q);
    }
    double x = a.as_double(), y = b.as_double();
    return Value::number(std::floor((x - py_fmod(x, y)) / y + 0.0));
  }
  if (op == "%") {
    if (a.is_string()) return in.make_string(percent_format(in, a.str(), b));
    if (!nums) unsupported(op, a, b);
    if (b.as_double() == 0) type_error("ZeroDivisionError: integer division or modulo by zero");
    if (ints) {
      int64_t x = a.as_int(), y = b.as_int();
      if (y == -1) return Value::integer(0);
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::integer(m);
    }
    return Value::number(py_fmod(a.as_double(), b.as_double()));
  }
  if (op == "**") {
    if (!nums) unsupported(op, a, b);
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), acc = 1;
      while (e > 0) {
        if (e & 1) {
          check_overflow(__builtin_mul_overflow(acc, base, &r));
          acc = r;
        }
        e >>= 1;
        if (e > 0) {
          check_overflow(__builtin_mul_overflow(base, base, &r));
          base = r;
        }
      }
      return Value::integer(acc);
    }
    if (a.as_double() == 0 && b.as_double() < 0)
      type_error("ZeroDivisionError: 0.0 cannot be raised to a negative power");
    double res = std::pow(a.as_double(), b.as_double());
    if (std::isnan(res) && !std::isnan(a.as_double()) && !std::isnan(b.as_double()))
      type_error("ValueError: math domain error (complex result)");
    if (std::isinf(res) && std::isfinite(a.as_double()) && std::isfinite(b.as_double()))
      type_error("OverflowError: numerical result out of range");
    return Value::number(res);
  }
  type_error("unknown operator " + op);
}

Value unary_minus(const Value& v) {
  require_defined(v);
  if (v.kind() == Kind::Float) return Value::number(-v.as_double());
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) fail(ErrorKind::Limit, "integer overflow");
    return Value::integer(-v.as_int());
  }
  type_error("bad operand type for unary -: '" + type_name(v) + "'");
}

Value unary_plus(const Value& v) {
  require_defined(v);
  if (v.kind() == Kind::Float) return v;
  if (v.is_integral()) return Value::integer(v.as_int());
  type_error("bad operand type for unary +: '" + type_name(v) + "'");
}

// ---------------------------------------------------------------- tests

namespace {

Value arg0(const CallArgs& a, const std::string& test) {
  auto b = bind_args(a, {"other"}, test);
  if (!b[0]) type_error(test + "() missing required argument");
  return *b[0];
}

bool ordered(const Value& a, const Value& b, bool (*pred)(int)) {
  int c = compare(a, b);
  return c != 2 && pred(c);
}

int64_t int_mod(const Value& v, int64_t m) {
  require_defined(v);
  if (!v.is_number())
    type_error("unsupported operand type(s) for %: '" + type_name(v) + "' and 'int'");
  if (v.kind() == Kind::Float) return std::fmod(v.as_double(), static_cast<double>(m)) == 0 ? 0 : 1;
  int64_t r = v.as_int() % m;
  return r < 0 ? r + m : r;
}

}  // namespace

bool call_test(Interp& in, const std::string& name, const Value& v, CallArgs& a) {
  (void)in;
  static const char* const kUnary[] = {"defined", "undefined", "none",     "boolean",  "true",
                                       "false",   "integer",   "float",    "number",   "string",
                                       "mapping", "callable",  "sequence", "iterable", "escaped",
                                       "lower",   "upper",     "odd",      "even"};
  for (const char* u : kUnary)
    if (name == u) bind_args(a, {}, name);
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind() == Kind::Bool;
  if (name == "true") return v.kind() == Kind::Bool && v.as_bool();
  if (name == "false") return v.kind() == Kind::Bool && !v.as_bool();
  if (name == "integer") return v.kind() == Kind::Int;
  if (name == "float") return v.kind() == Kind::Float;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "callable")
    return v.kind() == Kind::Func || (v.kind() == Kind::Loop && v.loop_obj().recurse);
  if (name == "sequence") {
    return v.is_string() || v.is_dict() ||
           (v.is_list() && v.list_obj().kind != SeqKind::Generator &&
            v.list_obj().kind != SeqKind::Keys && v.list_obj().kind != SeqKind::Values &&
            v.list_obj().kind != SeqKind::Items);
  }
  if (name == "iterable") return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (name == "escaped") return false;
  if (name == "lower") return py::islower(to_str(v));
  if (name == "upper") return py::isupper(to_str(v));
  if (name == "odd") return int_mod(v, 2) == 1;
  if (name == "even") return int_mod(v, 2) == 0;
  if (name == "divisibleby") {
    Value n = arg0(a, name);
    require_defined(v);
    require_defined(n);
    if (!v.is_number() || !n.is_number()) type_error("unsupported operand type(s) for %");
    if (n.as_double() == 0) type_error("ZeroDivisionError: integer division or modulo by zero");
    if (v.is_integral() && n.is_integral()) return n.as_int() == -1 || v.as_int() % n.as_int() == 0;
    return std::fmod(v.as_double(), n.as_double()) == 0;
  }
  if (name == "sameas") {
    Value o = arg0(a, name);
    if (v.kind() != o.kind()) return false;
    switch (v.kind()) {
      case Kind::None:
      case Kind::Undefined:
        return v.kind() == Kind::None;
      case Kind::Bool:
        return v.as_bool() == o.as_bool();
      case Kind::Int:
        return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
      case Kind::List:
      case Kind::Dict:
      case Kind::Func:
      case Kind::Namespace:
      case Kind::Loop:
        return v.identity() == o.identity();
      default:
        return false;
    }
  }
  if (name == "in") return contains(arg0(a, name), v);
  if (name == "==" || name == "eq" || name == "equalto") return equal(v, arg0(a, name));
  if (name == "!=" || name == "ne") return !equal(v, arg0(a, name));
  if (name == ">" || name == "gt" || name == "greaterthan")
    return ordered(v, arg0(a, name), [](int c) { return c > 0; });
  if (name == ">=" || name == "ge") return ordered(v, arg0(a, name), [](int c) { return c >= 0; });
  if (name == "<" || name == "lt" || name == "lessthan")
    return ordered(v, arg0(a, name), [](int c) { return c < 0; });
  if (name == "<=" || name == "le") return ordered(v, arg0(a, name), [](int c) { return c <= 0; });
  if (name == "filter" || name == "test") {
    auto b = bind_args(a, {}, name);
    if (!v.is_string()) return false;
    return name == "filter" ? is_builtin_filter(v.str()) : is_builtin_test(v.str());
  }
  type_error("No test named '" + name + "'.");
}

// ---------------------------------------------------------------- globals

namespace {

Value make_range(Interp& in, CallArgs& a) {
  if (!a.kw.empty()) type_error("range() takes no keyword arguments");
  if (a.pos.empty() || a.pos.size() > 3) type_error("range expected 1 to 3 arguments");
  for (const auto& v : a.pos) {
    require_defined(v);
    if (!v.is_integral())
      type_error("'" + type_name(v) + "' object cannot be interpreted as an integer");
  }
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = a.pos[0].as_int();
  } else {
    start = a.pos[0].as_int();
    stop = a.pos[1].as_int();
    if (a.pos.size() == 3) step = a.pos[2].as_int();
  }
  if (step == 0) type_error("ValueError: range() arg 3 must not be zero");
  std::vector<Value> out;
  // The sandbox refuses ranges longer than MAX_RANGE (100000).
  long double count =
      step > 0 ? (static_cast<long double>(stop) - start) / step
               : (static_cast<long double>(start) - stop) / -static_cast<long double>(step);
  if (count > 100000)
    type_error(
        "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  if (step > 0)
    for (int64_t i = start; i < stop; i += step) out.push_back(Value::integer(i));
  else
    for (int64_t i = start; i > stop; i += step) out.push_back(Value::integer(i));
  (void)in;
  return Value::list(std::move(out));
}

// dict(*args, **kwargs) with Python's semantics for a mapping or an iterable of pairs.
std::shared_ptr<Dict> build_dict(CallArgs& a, const std::string& fname) {
  if (a.pos.size() > 1) type_error(fname + " expected at most 1 argument");
  auto d = std::make_shared<Dict>();
  if (!a.pos.empty()) {
    const Value& src = a.pos[0];
    require_defined(src);
    if (src.is_dict()) {
      for (const auto& [k, v] : src.dict_obj().items) d->set(k, v);
    } else {
      for (const auto& pair : iterate(src)) {
        std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2) type_error("dictionary update sequence element has wrong length");
        if (kv[0].is_list() && kv[0].list_obj().kind != SeqKind::Tuple)
          type_error("unhashable type: 'list'");
        if (kv[0].is_dict()) type_error("unhashable type: 'dict'");
        d->set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : a.kw) d->set(Value::string(k), v);
  std::vector<Value> vals;
  for (const auto& kv : d->items) vals.push_back(kv.second);
  d->depth = make_depth(vals);
  return d;
}

}  // namespace

std::vector<std::pair<std::string, Value>> make_globals(Interp& in) {
  (void)in;
  std::vector<std::pair<std::string, Value>> g;
  g.emplace_back("range", Value::func("range", make_range));
  g.emplace_back("dict", Value::func("dict", [](Interp&, CallArgs& a) {
                   return Value::dict(build_dict(a, "dict"));
                 }));
  g.emplace_back("namespace", Value::func("namespace", [](Interp& ip, CallArgs& a) {
                   auto ns = std::make_shared<Namespace>();
                   ns->attrs = build_dict(a, "namespace");
                   ns->depth = ns->attrs->depth;
                   ip.register_namespace(ns);
                   return Value::object(Kind::Namespace, ns);
                 }));
  g.emplace_back("joiner", Value::func("joiner", [](Interp&, CallArgs& a) {
                   auto b = bind_args(a, {"sep"}, "joiner");
                   std::string sep = b[0] ? to_str(*b[0]) : ", ";
                   auto used = std::make_shared<bool>(false);
                   return Value::func("joiner", [sep, used](Interp&, CallArgs&) {
                     if (!*used) {
                       *used = true;
                       return Value::string("");
                     }
                     return Value::string(sep);
                   });
                 }));
  g.emplace_back(
      "raise_exception", Value::func("raise_exception", [](Interp&, CallArgs& a) -> Value {
        auto b = bind_args(a, {"message"}, "raise_exception");
        if (!b[0])
          type_error("raise_exception() missing 1 required positional argument: 'message'");
        fail(ErrorKind::Raised, to_str(*b[0]));
      }));
  g.emplace_back("strftime_now", Value::func("strftime_now", [](Interp& ip, CallArgs& a) {
                   auto b = bind_args(a, {"format"}, "strftime_now");
                   if (!b[0] || !b[0]->is_string())
                     type_error("strftime_now() needs a format string");
                   std::time_t t = std::chrono::system_clock::to_time_t(ip.now());
                   std::tm tm{};
                   localtime_r(&t, &tm);
                   const std::string& fmt = b[0]->str();
                   if (fmt.empty()) return Value::string("");
                   std::string buf(fmt.size() * 8 + 64, '\0');
                   size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
                   if (n == 0 && fmt.size() > 256) type_error("strftime format too long");
                   buf.resize(n);
                   return Value::string(buf);
                 }));
  return g;
}

}  // namespace ringlm::jinja
