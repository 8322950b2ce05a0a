// jinja2's builtin filters (3.1 semantics) plus transformers' `tojson` override.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja/errors.h"
#include "tokenizer/jinja/interp.h"
#include "tokenizer/jinja/pyjson.h"
#include "tokenizer/jinja/pystr.h"

namespace ringlm::jinja {

namespace {

Value gen(Interp& in, std::vector<Value> items) {
  return in.make_list(std::move(items), SeqKind::Generator);
}

// A generator whose items are computed when first consumed, like a Python generator function.
Value lazy(Interp& in, std::function<std::vector<Value>()> produce) {
  Value g = in.make_list({}, SeqKind::Generator);
  Interp* ip = &in;
  g.list_obj().producer = [ip, produce = std::move(produce)]() {
    std::vector<Value> items = produce();
    if (items.size() > ip->limits().max_items) fail(ErrorKind::Limit, "generator too long");
    return items;
  };
  return g;
}

int64_t int_arg(const std::optional<Value>& v, int64_t dflt, const char* what) {
  if (!v) return dflt;
  require_defined(*v);
  if (!v->is_integral()) type_error(std::string(what) + " must be an integer");
  return v->as_int();
}

bool bool_arg(const std::optional<Value>& v, bool dflt) {
  return v ? truthy(*v) : dflt;
}

// sorted(reverse=...) wants an integer, not any truthy value.
bool reverse_arg(const std::optional<Value>& v) {
  if (!v) return false;
  require_defined(*v);
  if (!v->is_integral())
    type_error("'" + type_name(*v) + "' object cannot be interpreted as an integer");
  return v->as_int() != 0;
}

std::optional<std::string> opt_str(const std::optional<Value>& v) {
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) type_error("expected a string argument, got " + type_name(*v));
  return v->str();
}

Value ignore_case(const Value& v) {
  return v.is_string() ? Value::string(py::lower(v.str())) : v;
}

// make_attrgetter: "a.b.0" looks up each part with getitem (digit parts as integers).
std::vector<Value> attr_parts(const Value& attribute) {
  std::vector<Value> parts;
  if (attribute.is_none()) return parts;
  if (!attribute.is_string()) return {attribute};
  for (const auto& p : py::split(attribute.str(), std::string("."), -1)) {
    bool digits =
        !p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
    auto n = digits ? py::parse_int(p, 10) : std::nullopt;
    parts.push_back(n ? Value::integer(*n) : Value::string(p));
  }
  return parts;
}

Value get_path(Interp& in, Value item, const std::vector<Value>& parts, const Value* dflt) {
  for (const auto& p : parts) {
    item = in.getitem(item, p);
    if (dflt != nullptr && !dflt->is_none() && item.is_undefined()) item = *dflt;
  }
  return item;
}

// Stable sort by Python ordering of keys (TypeError on unorderable keys).
void sort_by_key(std::vector<std::pair<Value, Value>>& kv, bool reverse) {
  std::stable_sort(kv.begin(), kv.end(), [reverse](const auto& a, const auto& b) {
    return reverse ? compare(b.first, a.first) < 0 : compare(a.first, b.first) < 0;
  });
  (void)reverse;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

// Python round(x, ndigits) for floats: correctly rounded, ties to even on exact binary ties.
double py_round(double x, int64_t nd) {
  if (!std::isfinite(x) || nd > 300) return x;
  if (nd >= 0) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(nd), x);
    return std::strtod(buf, nullptr);
  }
  if (nd < -308) return std::copysign(0.0, x);
  double p = std::pow(10.0, static_cast<double>(-nd));
  return std::nearbyint(x / p) * p;
}

Value select_or_reject(Interp& in, const Value& value, CallArgs& a, bool select, bool lookup_attr) {
  std::vector<Value> out;
  if (!truthy(value)) return gen(in, {});
  size_t off = 0;
  std::vector<Value> parts;
  if (lookup_attr) {
    if (a.pos.empty()) type_error("Missing parameter for attribute name");
    parts = attr_parts(a.pos[0]);
    off = 1;
  }
  std::optional<std::string> test;
  CallArgs targs;
  if (a.pos.size() > off) {
    if (!a.pos[off].is_string()) type_error("test name must be a string");
    test = a.pos[off].str();
    targs.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(off + 1), a.pos.end());
    targs.kw = a.kw;
  }
  for (auto& item : iterate(value)) {
    in.step();
    Value x = lookup_attr ? get_path(in, item, parts, nullptr) : item;
    bool r = test ? in.apply_test(*test, x, targs) : truthy(x);
    if (r == select) out.push_back(std::move(item));
  }
  return gen(in, std::move(out));
}

Value do_map(Interp& in, const Value& value, CallArgs& a) {
  if (!truthy(value)) return gen(in, {});
  std::vector<Value> out;
  if (a.pos.empty()) {
    std::optional<Value> attribute, dflt;
    for (const auto& [k, v] : a.kw) {
      if (k == "attribute")
        attribute = v;
      else if (k == "default")
        dflt = v;
      else
        type_error("Unexpected keyword argument '" + k + "'");
    }
    if (!attribute) type_error("map requires a filter argument");
    auto parts = attr_parts(*attribute);
    Value none = Value::none();
    for (const auto& item : iterate(value)) {
      in.step();
      out.push_back(get_path(in, item, parts, dflt ? &*dflt : &none));
    }
    return gen(in, std::move(out));
  }
  if (!a.pos[0].is_string()) type_error("map filter name must be a string");
  std::string name = a.pos[0].str();
  CallArgs fargs;
  fargs.pos.assign(a.pos.begin() + 1, a.pos.end());
  fargs.kw = a.kw;
  for (const auto& item : iterate(value)) {
    CallArgs copy = fargs;
    out.push_back(in.apply_filter(name, item, copy));
  }
  return gen(in, std::move(out));
}

// sort / unique / min / max key: the attribute path, lower-cased unless case_sensitive.
Value sort_key(Interp& in, const Value& item, const std::vector<std::vector<Value>>& multi,
               bool case_sensitive) {
  auto post = [&](Value v) { return case_sensitive ? v : ignore_case(v); };
  if (multi.empty()) return post(item);
  if (multi.size() == 1) return post(get_path(in, item, multi[0], nullptr));
  std::vector<Value> keys;
  for (const auto& parts : multi) keys.push_back(post(get_path(in, item, parts, nullptr)));
  return Value::list(std::move(keys));
}

std::vector<std::vector<Value>> multi_parts(const std::optional<Value>& attribute, bool multi) {
  std::vector<std::vector<Value>> out;
  if (!attribute || attribute->is_none()) return out;
  if (multi && attribute->is_string()) {
    for (const auto& piece : py::split(attribute->str(), std::string(","), -1))
      out.push_back(attr_parts(Value::string(piece)));
  } else {
    out.push_back(attr_parts(*attribute));
  }
  return out;
}

Value min_max(Interp& in, const Value& value, CallArgs& a, bool want_max, const char* fname) {
  auto b = bind_args(a, {"case_sensitive", "attribute"}, fname);
  std::vector<Value> items = iterate(value);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  auto parts = multi_parts(b[1], false);
  bool cs = bool_arg(b[0], false);
  size_t best = 0;
  Value best_key = sort_key(in, items[0], parts, cs);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = sort_key(in, items[i], parts, cs);
    int c = compare(k, best_key);
    if (want_max ? c == 1 : c == -1) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}

std::string center(const std::string& s, int64_t width) {
  auto len = static_cast<int64_t>(py::length(s));
  if (width <= len) return s;
  int64_t marg = width - len;
  int64_t left = marg / 2 + (marg & width & 1);
  return std::string(static_cast<size_t>(left), ' ') + s +
         std::string(static_cast<size_t>(marg - left), ' ');
}

std::string jinja_title(const std::string& s) {
  // Words start after runs of [-\s({\[<]; each word is item[0].upper() + item[1:].lower().
  std::u32string cs = py::decode(s);
  std::string out;
  auto is_sep = [](char32_t c) {
    return py::is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
  };
  size_t i = 0;
  while (i < cs.size()) {
    size_t j = i;
    bool sep = is_sep(cs[i]);
    while (j < cs.size() && is_sep(cs[j]) == sep) ++j;
    std::u32string_view item(cs.data() + i, j - i);
    if (sep) {
      out += py::encode(item);
    } else {
      out += py::upper(py::encode(item.substr(0, 1)));
      out += py::lower(py::encode(item.substr(1)));
    }
    i = j;
  }
  return out;
}

std::string indent(const std::string& text, const Value& width, bool first, bool blank) {
  std::string ind =
      width.is_string()
          ? width.str()
          : std::string(static_cast<size_t>(std::max<int64_t>(0, width.as_int())), ' ');
  std::string s = text + "\n";
  std::vector<std::string> lines = py::splitlines(s, false);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : ind + lines[i]);
  }
  if (first) rv = ind + rv;
  return rv;
}

Value tojson(Interp& in, const Value& value, CallArgs& a) {
  auto b = bind_args(a, {"ensure_ascii", "indent", "separators", "sort_keys"}, "tojson");
  JsonDumpOptions o;
  o.ensure_ascii = bool_arg(b[0], false);
  if (b[1] && !b[1]->is_none()) {
    if (b[1]->is_string())
      o.indent = b[1]->str();
    else if (b[1]->is_integral())
      o.indent =
          std::string(static_cast<size_t>(std::clamp<int64_t>(b[1]->as_int(), 0, 1 << 16)), ' ');
    else
      type_error("indent must be an int or a string");
  }
  if (b[2] && !b[2]->is_none()) {
    std::vector<Value> seps = iterate(*b[2]);
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string())
      type_error("separators must be a pair of strings");
    o.item_separator = seps[0].str();
    o.key_separator = seps[1].str();
  }
  o.sort_keys = bool_arg(b[3], false);
  o.max_bytes = in.limits().max_string_bytes;
  return Value::string(json_dumps(value, o));
}

Value to_int(const Value& v, const Value& dflt, int64_t base) {
  require_defined(v);
  if (v.is_string()) {
    if (auto n = py::parse_int(v.str(), static_cast<int>(base))) return Value::integer(*n);
    if (auto f = py::parse_float(v.str())) {
      if (std::isnan(*f)) return dflt;
      if (std::isinf(*f) || std::fabs(*f) >= 9.2e18)
        type_error("OverflowError: cannot convert float to integer");
      return Value::integer(static_cast<int64_t>(*f));
    }
    return dflt;
  }
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.kind() == Kind::Float) {
    double f = v.as_double();
    if (std::isnan(f)) return dflt;
    if (std::isinf(f) || std::fabs(f) >= 9.2e18)
      type_error("OverflowError: cannot convert float to integer");
    return Value::integer(static_cast<int64_t>(f));
  }
  return dflt;
}

std::vector<Value> unique_items(Interp& in, const Value& v,
                                const std::vector<std::optional<Value>>& b) {
  auto parts = multi_parts(b[1], false);
  bool cs = bool_arg(b[0], false);
  std::vector<Value> seen, out;
  for (auto& item : iterate(v)) {
    in.step();
    Value k = sort_key(in, item, parts, cs);
    if (k.is_dict() || (k.is_list() && k.list_obj().kind == SeqKind::List))
      type_error("unhashable type: '" + type_name(k) + "'");
    bool dup = false;
    for (const auto& s : seen)
      if (equal(s, k)) dup = true;
    if (!dup) {
      seen.push_back(k);
      out.push_back(item);
    }
  }
  return out;
}

std::vector<Value> batch_or_slice(Interp& in, const Value& v,
                                  const std::vector<std::optional<Value>>& b, bool batch) {
  int64_t n = int_arg(b[0], 0, batch ? "linecount" : "slices");
  std::vector<Value> items = iterate(v);
  std::vector<Value> out;
  bool fill = b[1] && !b[1]->is_none();
  if (batch) {
    std::vector<Value> tmp;
    for (auto& item : items) {
      if (static_cast<int64_t>(tmp.size()) == n) {
        out.push_back(Value::list(std::move(tmp)));
        tmp.clear();
      }
      tmp.push_back(item);
    }
    if (!tmp.empty()) {
      if (fill)
        while (static_cast<int64_t>(tmp.size()) < n) tmp.push_back(*b[1]);
      out.push_back(Value::list(std::move(tmp)));
    }
  } else {
    if (n <= 0) type_error("ZeroDivisionError: integer division or modulo by zero");
    if (n > static_cast<int64_t>(in.limits().max_items)) fail(ErrorKind::Limit, "too many slices");
    auto len = static_cast<int64_t>(items.size());
    int64_t per = len / n, extra = len % n, offset = 0;
    for (int64_t k = 0; k < n; ++k) {
      int64_t start = offset + k * per;
      if (k < extra) ++offset;
      int64_t end = offset + (k + 1) * per;
      std::vector<Value> tmp(items.begin() + start, items.begin() + end);
      if (fill && k >= extra) tmp.push_back(*b[1]);
      out.push_back(Value::list(std::move(tmp)));
    }
  }
  return out;
}

}  // namespace

Value call_filter(Interp& in, const std::string& name, const Value& v, CallArgs& a) {
  auto args = [&](std::vector<const char*> names) { return bind_args(a, names, name); };
  if (name == "length" || name == "count") {
    args({});
    return Value::integer(length(v));
  }
  if (name == "string") {
    args({});
    return Value::string(to_str(v));
  }
  if (name == "safe") {
    args({});
    return Value::string(to_str(v));
  }
  if (name == "e" || name == "escape" || name == "forceescape") {
    args({});
    return Value::string(html_escape(to_str(v)));
  }
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
    args({});
    std::string s = to_str(v);
    if (name == "upper") return Value::string(py::upper(s));
    if (name == "lower") return Value::string(py::lower(s));
    if (name == "capitalize") return Value::string(py::capitalize(s));
    return Value::string(jinja_title(s));
  }
  if (name == "trim") {
    auto b = args({"chars"});
    return Value::string(py::strip(to_str(v), opt_str(b[0]), true, true));
  }
  if (name == "replace") {
    auto b = args({"old", "new", "count"});
    if (!b[0] || !b[1]) type_error("replace() missing arguments");
    int64_t count = b[2] && !b[2]->is_none() ? int_arg(b[2], -1, "count") : -1;
    return in.make_string(py::replace(to_str(v), to_str(*b[0]), to_str(*b[1]), count));
  }
  if (name == "default" || name == "d") {
    auto b = args({"default_value", "boolean"});
    if (v.is_undefined() || (bool_arg(b[1], false) && !truthy(v)))
      return b[0] ? *b[0] : Value::string("");
    return v;
  }
  if (name == "join") {
    auto b = args({"d", "attribute"});
    std::string sep = b[0] ? to_str(*b[0]) : "";
    std::vector<Value> items = iterate(v);
    std::vector<Value> parts = b[1] && !b[1]->is_none() ? attr_parts(*b[1]) : std::vector<Value>{};
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += sep;
      out += to_str(parts.empty() ? items[i] : get_path(in, items[i], parts, nullptr));
      in.check_string_size(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "first") {
    args({});
    if (v.is_list() && v.list_obj().kind == SeqKind::Generator) {
      List& l = v.list_obj();
      materialize(l);
      if (l.cursor < l.items.size()) return l.items[l.cursor++];
      return Value::undefined("No first item, sequence was empty.");
    }
    std::vector<Value> items = iterate(v);
    if (items.empty()) return Value::undefined("No first item, sequence was empty.");
    return items[0];
  }
  if (name == "last") {
    args({});
    if (v.is_list() && v.list_obj().kind == SeqKind::Generator)
      type_error("'generator' object is not reversible");
    std::vector<Value> items = iterate(v);
    if (items.empty()) return Value::undefined("No last item, sequence was empty.");
    return items.back();
  }
  if (name == "list") {
    args({});
    return in.make_list(iterate(v));
  }
  if (name == "items") {
    args({});
    return lazy(in, [v]() {
      std::vector<Value> out;
      if (v.is_undefined()) return out;
      if (!v.is_dict()) type_error("Can only get item pairs from a mapping.");
      for (const auto& [k, val] : v.dict_obj().items) out.push_back(Value::tuple({k, val}));
      return out;
    });
  }
  if (name == "dictsort") {
    auto b = args({"case_sensitive", "by", "reverse"});
    require_defined(v);
    if (!v.is_dict()) type_error("'" + type_name(v) + "' object has no attribute 'items'");
    std::string by = b[1] ? to_str(*b[1]) : "key";
    if (by != "key" && by != "value")
      type_error("You can only sort by either \"key\" or \"value\"");
    bool cs = bool_arg(b[0], false);
    std::vector<std::pair<Value, Value>> kv;
    for (const auto& [k, val] : v.dict_obj().items) {
      Value key = by == "key" ? k : val;
      kv.emplace_back(cs ? key : ignore_case(key), Value::tuple({k, val}));
    }
    sort_by_key(kv, reverse_arg(b[2]));
    std::vector<Value> out;
    for (auto& p : kv) out.push_back(p.second);
    return Value::list(std::move(out));
  }
  if (name == "sort") {
    auto b = args({"reverse", "case_sensitive", "attribute"});
    auto parts = multi_parts(b[2], true);
    bool cs = bool_arg(b[1], false);
    std::vector<std::pair<Value, Value>> kv;
    for (auto& item : iterate(v)) kv.emplace_back(sort_key(in, item, parts, cs), item);
    sort_by_key(kv, reverse_arg(b[0]));
    std::vector<Value> out;
    for (auto& p : kv) out.push_back(p.second);
    return Value::list(std::move(out));
  }
  if (name == "unique") {
    auto b = args({"case_sensitive", "attribute"});
    Interp* ip = &in;
    return lazy(in, [ip, b, v]() { return unique_items(*ip, v, b); });
  }
  if (name == "min") return min_max(in, v, a, false, "min");
  if (name == "max") return min_max(in, v, a, true, "max");
  if (name == "sum") {
    auto b = args({"attribute", "start"});
    Value acc = b[1] ? *b[1] : Value::integer(0);
    auto parts = b[0] && !b[0]->is_none() ? attr_parts(*b[0]) : std::vector<Value>{};
    if (acc.is_string()) type_error("sum() can't sum strings [use ''.join(seq) instead]");
    for (auto& item : iterate(v)) {
      in.step();
      acc = binary_op(in, "+", acc, parts.empty() ? item : get_path(in, item, parts, nullptr));
    }
    return acc;
  }
  if (name == "map" || name == "select" || name == "reject" || name == "selectattr" ||
      name == "rejectattr") {
    Interp* ip = &in;
    return lazy(in, [ip, name, v, a]() mutable {
      Value g = name == "map"          ? do_map(*ip, v, a)
                : name == "select"     ? select_or_reject(*ip, v, a, true, false)
                : name == "reject"     ? select_or_reject(*ip, v, a, false, false)
                : name == "selectattr" ? select_or_reject(*ip, v, a, true, true)
                                       : select_or_reject(*ip, v, a, false, true);
      return std::move(g.list_obj().items);
    });
  }
  if (name == "reverse") {
    args({});
    if (v.is_string()) {
      std::u32string cs = py::decode(v.str());
      std::reverse(cs.begin(), cs.end());
      return Value::string(py::encode(cs));
    }
    bool is_gen = v.is_list() && v.list_obj().kind == SeqKind::Generator;
    std::vector<Value> items = iterate(v);
    std::reverse(items.begin(), items.end());
    return is_gen ? in.make_list(std::move(items)) : gen(in, std::move(items));
  }
  if (name == "tojson") return tojson(in, v, a);
  if (name == "int") {
    auto b = args({"default", "base"});
    return to_int(v, b[0] ? *b[0] : Value::integer(0), int_arg(b[1], 10, "base"));
  }
  if (name == "float") {
    auto b = args({"default"});
    Value dflt = b[0] ? *b[0] : Value::number(0.0);
    require_defined(v);
    if (v.is_number()) return Value::number(v.as_double());
    if (v.is_string()) {
      if (auto f = py::parse_float(v.str())) return Value::number(*f);
    }
    return dflt;
  }
  if (name == "abs") {
    args({});
    require_defined(v);
    if (v.kind() == Kind::Float) return Value::number(std::fabs(v.as_double()));
    if (v.is_integral()) {
      if (v.as_int() == INT64_MIN) fail(ErrorKind::Limit, "integer overflow");
      return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
    }
    type_error("bad operand type for abs(): '" + type_name(v) + "'");
  }
  if (name == "round") {
    auto b = args({"precision", "method"});
    int64_t prec = int_arg(b[0], 0, "precision");
    std::string method = b[1] ? to_str(*b[1]) : "common";
    if (method != "common" && method != "ceil" && method != "floor")
      type_error("method must be common, ceil or floor");
    require_defined(v);
    if (!v.is_number()) type_error("type " + type_name(v) + " doesn't define __round__ method");
    if (method == "common") {
      if (v.is_integral()) {
        if (prec >= 0) return Value::integer(v.as_int());
        return Value::integer(
            static_cast<int64_t>(py_round(static_cast<double>(v.as_int()), prec)));
      }
      return Value::number(py_round(v.as_double(), prec));
    }
    double scale = std::pow(10.0, static_cast<double>(prec));
    double x = v.as_double() * scale;
    x = method == "ceil" ? std::ceil(x) : std::floor(x);
    return Value::number(x / scale);
  }
  if (name == "indent") {
    auto b = args({"width", "first", "blank"});
    Value width = b[0] ? *b[0] : Value::integer(4);
    if (!width.is_string() && !width.is_integral()) type_error("indent width must be int or str");
    return in.make_string(indent(to_str(v), width, bool_arg(b[1], false), bool_arg(b[2], false)));
  }
  if (name == "center") {
    auto b = args({"width"});
    return in.make_string(
        center(to_str(v), std::min<int64_t>(int_arg(b[0], 80, "width"), 1 << 24)));
  }
  if (name == "wordcount") {
    args({});
    int64_t n = 0;
    bool in_word = false;
    for (char32_t c : py::decode(to_str(v))) {
      bool w = py::is_word(c);
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value::integer(n);
  }
  if (name == "truncate") {
    auto b = args({"length", "killwords", "end", "leeway"});
    std::string s = to_str(v);
    int64_t len = int_arg(b[0], 255, "length");
    std::string end = b[2] ? to_str(*b[2]) : "...";
    int64_t leeway = b[3] && !b[3]->is_none() ? int_arg(b[3], 5, "leeway") : 5;
    auto end_len = static_cast<int64_t>(py::length(end));
    if (len < end_len) type_error("expected length >= " + std::to_string(end_len));
    if (leeway < 0) type_error("expected leeway >= 0");
    std::u32string cs = py::decode(s);
    if (static_cast<int64_t>(cs.size()) <= len + leeway) return Value::string(s);
    std::string head =
        py::encode(std::u32string_view(cs).substr(0, static_cast<size_t>(len - end_len)));
    if (bool_arg(b[1], false)) return Value::string(head + end);
    auto pieces = py::rsplit(head, std::string(" "), 1);
    return Value::string(pieces[0] + end);
  }
  if (name == "batch" || name == "slice") {
    auto b = args({name == "batch" ? "linecount" : "slices", "fill_with"});
    Interp* ip = &in;
    return lazy(in, [ip, b, v, name]() { return batch_or_slice(*ip, v, b, name == "batch"); });
  }
  if (name == "groupby") {
    auto b = args({"attribute", "default", "case_sensitive"});
    if (!b[0]) type_error("groupby() missing required argument 'attribute'");
    auto parts = attr_parts(*b[0]);
    bool cs = bool_arg(b[2], false);
    std::vector<std::pair<Value, Value>> kv;
    for (auto& item : iterate(v)) {
      Value k = get_path(in, item, parts, b[1] ? &*b[1] : nullptr);
      kv.emplace_back(cs ? k : ignore_case(k), item);
    }
    sort_by_key(kv, false);
    std::vector<Value> out;
    size_t i = 0;
    while (i < kv.size()) {
      size_t j = i;
      std::vector<Value> group;
      while (j < kv.size() && equal(kv[j].first, kv[i].first)) group.push_back(kv[j++].second);
      Value grouper = cs ? kv[i].first : get_path(in, group[0], parts, b[1] ? &*b[1] : nullptr);
      out.push_back(Value::tuple({grouper, Value::list(std::move(group))}));
      i = j;
    }
    return Value::list(std::move(out));
  }
  if (name == "attr") {
    auto b = args({"name"});
    if (!b[0] || !b[0]->is_string()) type_error("attr() needs a string name");
    require_defined(v);
    if (v.is_dict() && !get_method(in, v, b[0]->str()))
      return Value::undefined("no attribute " + b[0]->str());
    return in.getattr(v, b[0]->str());
  }
  if (name == "pprint") {
    args({});
    return Value::string(repr(v));
  }
  if (name == "format") {
    // soft_str(value) % (kwargs or args)
    Value fargs;
    if (!a.kw.empty()) {
      auto d = std::make_shared<Dict>();
      for (const auto& [k, x] : a.kw) d->set(Value::string(k), x);
      fargs = Value::dict(d);
    } else {
      fargs = Value::tuple(a.pos);
    }
    return in.make_string(percent_format(in, to_str(v), fargs));
  }
  if (name == "striptags" || name == "random" || name == "filesizeformat" || name == "urlencode" ||
      name == "urlize" || name == "wordwrap" || name == "xmlattr") {
    type_error("filter '" + name + "' is not supported by ringlm's template engine");
  }
  type_error("No filter named '" + name + "'.");
}

}  // namespace ringlm::jinja
