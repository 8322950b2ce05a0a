// Methods of str, dict and list reachable from templates (`s.strip()`, `d.items()`, ...), with
// ImmutableSandboxedEnvironment's rule that mutating methods of dict and list are blocked.
#include <algorithm>

#include "tokenizer/jinja/errors.h"
#include "tokenizer/jinja/interp.h"
#include "tokenizer/jinja/pystr.h"

namespace ringlm::jinja {

namespace {

std::optional<std::string> opt_chars(const std::optional<Value>& v, const char* fname) {
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) type_error(std::string(fname) + " arg must be None or str");
  return v->str();
}

std::string req_str(const std::optional<Value>& v, const char* fname) {
  if (!v) type_error(std::string(fname) + "() missing a required argument");
  require_defined(*v);
  if (!v->is_string())
    type_error(std::string(fname) + "() argument must be str, not " + type_name(*v));
  return v->str();
}

int64_t opt_int(const std::optional<Value>& v, int64_t dflt) {
  if (!v || v->is_none()) return dflt;
  require_defined(*v);
  if (!v->is_integral())
    type_error("'" + type_name(*v) + "' object cannot be interpreted as an integer");
  return v->as_int();
}

Value str_list(Interp& in, const std::vector<std::string>& parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (const auto& p : parts) out.push_back(Value::string(p));
  return in.make_list(std::move(out));
}

// startswith/endswith with a str or a tuple of str, optional start/end in code points.
bool affix(const std::string& s, const std::optional<Value>& what,
           const std::optional<Value>& start, const std::optional<Value>& end, bool prefix,
           const char* fname) {
  if (!what) type_error(std::string(fname) + "() takes at least 1 argument (0 given)");
  std::string sub = s;
  if ((start && !start->is_none()) || (end && !end->is_none())) {
    std::u32string cs = py::decode(s);
    py::SliceSpec spec;
    if (start && !start->is_none()) spec.start = opt_int(start, 0);
    if (end && !end->is_none()) spec.stop = opt_int(end, 0);
    auto n = static_cast<int64_t>(cs.size());
    auto idx = py::slice_indices(spec, n);
    // Python: start beyond the length never matches, even an empty affix.
    int64_t st = spec.start.value_or(0);
    if (st < 0) st = std::max<int64_t>(0, st + n);
    if (st > n) return false;
    std::u32string part;
    for (int64_t i : idx) part.push_back(cs[static_cast<size_t>(i)]);
    sub = py::encode(part);
  }
  auto test = [&](const std::string& x) {
    if (x.size() > sub.size()) return false;
    return prefix ? sub.compare(0, x.size(), x) == 0
                  : sub.compare(sub.size() - x.size(), x.size(), x) == 0;
  };
  require_defined(*what);
  if (what->is_string()) return test(what->str());
  if (what->is_list() && what->list_obj().kind == SeqKind::Tuple) {
    for (const auto& x : what->list_obj().items) {
      if (!x.is_string())
        type_error("tuple for " + std::string(fname) + " must only contain str, not " +
                   type_name(x));
      if (test(x.str())) return true;
    }
    return false;
  }
  type_error(std::string(fname) + " first arg must be str or a tuple of str, not " +
             type_name(*what));
}

// str.format with positional/keyword fields and !r/!s conversions; format specs are refused.
std::string str_format(Interp& in, const std::string& fmt, CallArgs& a) {
  std::string out;
  size_t auto_idx = 0;
  size_t i = 0;
  while (i < fmt.size()) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        i += 2;
        continue;
      }
      type_error("ValueError: Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      i += 2;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos)
      type_error("ValueError: Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close + 1;
    char conv = 0;
    size_t colon = field.find(':');
    if (colon != std::string::npos) {
      if (colon + 1 < field.size()) type_error("format specs in str.format are not supported");
      field.resize(colon);
    }
    size_t bang = field.find('!');
    if (bang != std::string::npos) {
      if (bang + 2 != field.size()) type_error("ValueError: invalid conversion in format string");
      conv = field[bang + 1];
      field.resize(bang);
    }
    size_t name_end = field.find_first_of(".[");
    std::string first = field.substr(0, name_end);
    Value v;
    if (first.empty()) {
      if (auto_idx >= a.pos.size()) type_error("IndexError: Replacement index out of range");
      v = a.pos[auto_idx++];
    } else if (std::all_of(first.begin(), first.end(),
                           [](char ch) { return ch >= '0' && ch <= '9'; })) {
      auto n = py::parse_int(first, 10);
      if (!n || *n >= static_cast<int64_t>(a.pos.size()))
        type_error("IndexError: Replacement index out of range");
      v = a.pos[static_cast<size_t>(*n)];
    } else {
      bool found = false;
      for (const auto& [k, val] : a.kw)
        if (k == first) {
          v = val;
          found = true;
        }
      if (!found) type_error("KeyError: '" + first + "'");
    }
    size_t p = name_end == std::string::npos ? field.size() : name_end;
    while (p < field.size()) {
      if (field[p] == '.') {
        size_t q = field.find_first_of(".[", p + 1);
        if (q == std::string::npos) q = field.size();
        v = in.getattr(v, field.substr(p + 1, q - p - 1));
        p = q;
      } else {
        size_t q = field.find(']', p);
        if (q == std::string::npos) type_error("ValueError: Missing ']' in format string");
        std::string key = field.substr(p + 1, q - p - 1);
        auto n = py::parse_int(key, 10);
        v = in.getitem(v, n && !key.empty() && key[0] != '+' && key[0] != '-' ? Value::integer(*n)
                                                                              : Value::string(key));
        p = q + 1;
      }
    }
    if (conv == 'r')
      out += repr(v);
    else if (conv == 's' || conv == 0)
      out += to_str(v);
    else
      type_error("ValueError: Unknown conversion specifier");
    in.check_string_size(out.size());
  }
  return out;
}

}  // namespace

std::string percent_format(Interp& in, const std::string& fmt, const Value& args) {
  // Python's printf-style formatting: a tuple supplies positional arguments, a dict named ones,
  // anything else is the single argument.
  std::vector<Value> pos;
  const Dict* mapping = nullptr;
  bool tuple_args = args.is_list() && args.list_obj().kind == SeqKind::Tuple;
  if (tuple_args)
    pos = args.list_obj().items;
  else if (args.is_dict())
    mapping = &args.dict_obj();
  else
    pos.push_back(args);
  size_t next = 0;
  bool used_mapping = false;
  std::string out;
  auto take = [&]() -> Value {
    if (next >= pos.size()) type_error("not enough arguments for format string");
    return pos[next++];
  };
  size_t i = 0;
  while (i < fmt.size()) {
    char c = fmt[i++];
    if (c != '%') {
      out += c;
      continue;
    }
    if (i >= fmt.size()) type_error("ValueError: incomplete format");
    const size_t spec_start = i;
    Value v;
    bool have_v = false;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos) type_error("ValueError: incomplete format key");
      if (mapping == nullptr) type_error("format requires a mapping");
      const Value* found = mapping->find(fmt.substr(i + 1, close - i - 1));
      if (found == nullptr) type_error("KeyError: '" + fmt.substr(i + 1, close - i - 1) + "'");
      v = *found;
      have_v = true;
      used_mapping = true;
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string("-+ #0").find(fmt[i]) != std::string::npos)
      flags += fmt[i++];
    auto number = [&]() -> int64_t {
      if (i < fmt.size() && fmt[i] == '*') {
        ++i;
        Value w = take();
        if (!w.is_integral()) type_error("* wants int");
        return std::clamp<int64_t>(w.as_int(), -4096, 4096);
      }
      int64_t n = 0;
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9')
        n = std::min<int64_t>(n * 10 + (fmt[i++] - '0'), 4096);
      return n;
    };
    int64_t width = number();
    int64_t prec = -1;
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      prec = number();
    }
    while (i < fmt.size() && (fmt[i] == 'l' || fmt[i] == 'h' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) type_error("ValueError: incomplete format");
    char conv = fmt[i++];
    if (conv == '%') {
      // Only a bare "%%" is a literal percent sign.
      if (i - 1 != spec_start) type_error("ValueError: unsupported format character '%'");
      out += '%';
      continue;
    }
    if (!have_v) v = take();
    std::string piece;
    if (conv == 's' || conv == 'r' || conv == 'a') {
      piece = conv == 's' ? to_str(v) : repr(v);
      if (prec >= 0) piece = py::encode(py::decode(piece).substr(0, static_cast<size_t>(prec)));
    } else if (std::string("diouxXeEfFgGc").find(conv) != std::string::npos) {
      require_defined(v);
      if (conv == 'c') {
        if (v.is_string() && py::length(v.str()) == 1) {
          piece = v.str();
        } else if (v.is_integral() && v.as_int() >= 0 && v.as_int() <= 0x10ffff) {
          py::append_utf8(piece, static_cast<char32_t>(v.as_int()));
        } else {
          type_error("%c requires int or char");
        }
      } else {
        if (!v.is_number())
          type_error("%" + std::string(1, conv) + " format: a real number is required, not " +
                     type_name(v));
        const int64_t spec_width = width;
        std::string spec = "%" + flags + (width > 0 ? std::to_string(width) : "");
        if (width < 0) spec = "%-" + flags + std::to_string(-width);
        width = 0;  // snprintf pads numeric conversions itself
        if (prec >= 0) spec += "." + std::to_string(prec);
        char buf[512];
        if (std::string("diouxX").find(conv) != std::string::npos) {
          if ((conv == 'o' || conv == 'x' || conv == 'X') && v.kind() == Kind::Float)
            type_error("%" + std::string(1, conv) + " format: an integer is required, not float");
          // Integers by hand: Python prints negative octal/hex with a sign and '#' as 0o/0x.
          int64_t n = v.kind() == Kind::Float ? static_cast<int64_t>(v.as_double()) : v.as_int();
          bool neg = n < 0;
          auto mag = neg ? static_cast<unsigned long long>(0) - static_cast<unsigned long long>(n)
                         : static_cast<unsigned long long>(n);
          const char* fmt_digits = conv == 'o'   ? "%llo"
                                   : conv == 'x' ? "%llx"
                                   : conv == 'X' ? "%llX"
                                                 : "%llu";
          std::snprintf(buf, sizeof buf, fmt_digits, mag);
          std::string digits = buf;
          if (prec > static_cast<int64_t>(digits.size()))
            digits.insert(0, static_cast<size_t>(prec - static_cast<int64_t>(digits.size())), '0');
          std::string sign = neg                                    ? "-"
                             : flags.find('+') != std::string::npos ? "+"
                             : flags.find(' ') != std::string::npos ? " "
                                                                    : "";
          std::string prefix;
          if (flags.find('#') != std::string::npos)
            prefix = conv == 'o' ? "0o" : conv == 'x' ? "0x" : conv == 'X' ? "0X" : "";
          int64_t w = spec_width;
          bool left = flags.find('-') != std::string::npos || w < 0;
          if (w < 0) w = -w;
          auto used = static_cast<int64_t>(sign.size() + prefix.size() + digits.size());
          if (!left && flags.find('0') != std::string::npos && w > used)
            digits.insert(0, static_cast<size_t>(w - used), '0');
          piece = sign + prefix + digits;
          width = left ? -w : w;
        } else {
          spec += conv;
          std::snprintf(buf, sizeof buf, spec.c_str(), v.as_double());
          piece = buf;
        }
      }
    } else {
      type_error(std::string("ValueError: unsupported format character '") + conv + "'");
    }
    auto len = static_cast<int64_t>(py::length(piece));
    bool left = flags.find('-') != std::string::npos || width < 0;
    if (width < 0) width = -width;
    if (width > len) {
      std::string pad(static_cast<size_t>(width - len), ' ');
      piece = left ? piece + pad : pad + piece;
    }
    out += piece;
    in.check_string_size(out.size());
  }
  // CPython treats any non-tuple, non-str argument with __getitem__ as a mapping here.
  bool mapping_like = args.is_undefined() || args.is_dict() ||
                      (args.is_list() && args.list_obj().kind != SeqKind::Generator &&
                       args.list_obj().kind != SeqKind::Tuple);
  if (!used_mapping && !mapping_like && next < pos.size())
    type_error("not all arguments converted during string formatting");
  return out;
}

namespace {

Value string_method(Interp& in, const std::string& s, const std::string& name, CallArgs& a) {
  auto args = [&](std::vector<const char*> names) { return bind_args(a, names, name); };
  if (name == "upper") return (args({}), Value::string(py::upper(s)));
  if (name == "lower" || name == "casefold") return (args({}), Value::string(py::lower(s)));
  if (name == "title") return (args({}), Value::string(py::title(s)));
  if (name == "capitalize") return (args({}), Value::string(py::capitalize(s)));
  if (name == "swapcase") {
    args({});
    std::string out;
    for (char32_t c : py::decode(s))
      py::append_utf8(out, py::is_upper(c)   ? py::to_lower(c)
                           : py::is_lower(c) ? py::to_upper(c)
                                             : c);
    return Value::string(out);
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    auto b = args({"chars"});
    return Value::string(
        py::strip(s, opt_chars(b[0], name.c_str()), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    auto b = args({"sep", "maxsplit"});
    auto sep = opt_chars(b[0], name.c_str());
    int64_t maxsplit = opt_int(b[1], -1);
    return str_list(in,
                    name == "split" ? py::split(s, sep, maxsplit) : py::rsplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    auto b = args({"keepends"});
    return str_list(in, py::splitlines(s, b[0] && truthy(*b[0])));
  }
  if (name == "startswith" || name == "endswith") {
    auto b = args({"prefix", "start", "end"});
    return Value::boolean(affix(s, b[0], b[1], b[2], name == "startswith", name.c_str()));
  }
  if (name == "replace") {
    auto b = args({"old", "new", "count"});
    return in.make_string(
        py::replace(s, req_str(b[0], "replace"), req_str(b[1], "replace"), opt_int(b[2], -1)));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    auto b = args({"sub"});
    std::string sub = req_str(b[0], name.c_str());
    if (name == "count") return Value::integer(py::count(s, sub));
    int64_t r = py::find(s, sub, name[0] == 'r');
    if (r < 0 && (name == "index" || name == "rindex"))
      type_error("ValueError: substring not found");
    return Value::integer(r);
  }
  if (name == "join") {
    auto b = args({"iterable"});
    if (!b[0]) type_error("join() takes exactly one argument (0 given)");
    std::string out;
    std::vector<Value> items = iterate(*b[0]);
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string())
        type_error("sequence item " + std::to_string(i) + ": expected str instance, " +
                   type_name(items[i]) + " found");
      if (i > 0) out += s;
      out += items[i].str();
      in.check_string_size(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "format") return in.make_string(str_format(in, s, a));
  if (name == "removeprefix" || name == "removesuffix") {
    auto b = args({"affix"});
    std::string x = req_str(b[0], name.c_str());
    if (name == "removeprefix" && s.compare(0, x.size(), x) == 0)
      return Value::string(s.substr(x.size()));
    if (name == "removesuffix" && !x.empty() && s.size() >= x.size() &&
        s.compare(s.size() - x.size(), x.size(), x) == 0)
      return Value::string(s.substr(0, s.size() - x.size()));
    return Value::string(s);
  }
  if (name == "partition" || name == "rpartition") {
    auto b = args({"sep"});
    std::string sep = req_str(b[0], name.c_str());
    if (sep.empty()) type_error("ValueError: empty separator");
    size_t hit = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (hit == std::string::npos)
      return name == "partition"
                 ? Value::tuple({Value::string(s), Value::string(""), Value::string("")})
                 : Value::tuple({Value::string(""), Value::string(""), Value::string(s)});
    return Value::tuple({Value::string(s.substr(0, hit)), Value::string(sep),
                         Value::string(s.substr(hit + sep.size()))});
  }
  if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill") {
    auto b = name == "zfill" ? args({"width"}) : args({"width", "fillchar"});
    if (!b[0]) type_error("str." + name + "() takes at least 1 argument (0 given)");
    int64_t width = std::min<int64_t>(opt_int(b[0], 0), 1 << 24);
    std::string fill = name == "zfill"        ? "0"
                       : b.size() > 1 && b[1] ? req_str(b[1], name.c_str())
                                              : " ";
    if (py::length(fill) != 1) type_error("The fill character must be exactly one character long");
    auto len = static_cast<int64_t>(py::length(s));
    if (width <= len) return Value::string(s);
    int64_t marg = width - len;
    int64_t left = name == "ljust"                      ? 0
                   : name == "rjust" || name == "zfill" ? marg
                                                        : marg / 2 + (marg & width & 1);
    auto rep = [&](int64_t n) {
      std::string r;
      for (int64_t i = 0; i < n; ++i) r += fill;
      return r;
    };
    if (name == "zfill" && !s.empty() && (s[0] == '-' || s[0] == '+'))
      return Value::string(s.substr(0, 1) + rep(marg) + s.substr(1));
    return Value::string(rep(left) + s + rep(marg - left));
  }
  auto all_of = [&](bool (*pred)(char32_t)) {
    args({});
    std::u32string cs = py::decode(s);
    return Value::boolean(!cs.empty() && std::all_of(cs.begin(), cs.end(), pred));
  };
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") return all_of(py::is_digit);
  if (name == "isalpha") return all_of(py::is_alpha);
  if (name == "isalnum")
    return all_of([](char32_t c) { return py::is_alpha(c) || py::is_digit(c); });
  if (name == "isspace") return all_of(py::is_space);
  if (name == "isupper") return (args({}), Value::boolean(py::isupper(s)));
  if (name == "islower") return (args({}), Value::boolean(py::islower(s)));
  if (name == "isascii") return (args({}), Value::boolean(py::is_ascii(s)));
  type_error("'str' object has no attribute '" + name + "'");
}

bool is_str_method(const std::string& n) {
  static const char* const kNames[] = {
      "upper",      "lower",      "casefold",  "title",   "capitalize",   "swapcase",
      "strip",      "lstrip",     "rstrip",    "split",   "rsplit",       "splitlines",
      "startswith", "endswith",   "replace",   "find",    "rfind",        "index",
      "rindex",     "count",      "join",      "format",  "removeprefix", "removesuffix",
      "partition",  "rpartition", "center",    "ljust",   "rjust",        "zfill",
      "isdigit",    "isdecimal",  "isnumeric", "isalpha", "isalnum",      "isspace",
      "isupper",    "islower",    "isascii"};
  return std::find_if(std::begin(kNames), std::end(kNames),
                      [&](const char* x) { return n == x; }) != std::end(kNames);
}

Value unsafe(const Value& obj, const std::string& name) {
  return Value::undefined(
      "access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.", true);
}

}  // namespace

std::optional<Value> get_method(Interp& in, const Value& obj, const std::string& name) {
  (void)in;
  if (obj.is_string()) {
    if (!is_str_method(name)) return std::nullopt;
    std::string s = obj.str();
    return Value::func(
        name, [s, name](Interp& ip, CallArgs& a) { return string_method(ip, s, name, a); });
  }
  if (obj.is_dict()) {
    if (name == "clear" || name == "pop" || name == "popitem" || name == "setdefault" ||
        name == "update")
      return unsafe(obj, name);
    if (name != "items" && name != "keys" && name != "values" && name != "get" && name != "copy")
      return std::nullopt;
    std::shared_ptr<Dict> d = obj.dict_ptr();
    return Value::func(name, [d, name](Interp& ip, CallArgs& a) -> Value {
      if (name == "get") {
        auto b = bind_args(a, {"key", "default"}, "get");
        if (!b[0]) type_error("get expected at least 1 argument, got 0");
        if (b[0]->is_list() && b[0]->list_obj().kind != SeqKind::Tuple)
          type_error("unhashable type: 'list'");
        if (b[0]->is_dict()) type_error("unhashable type: 'dict'");
        const Value* v = d->find(*b[0]);
        return v != nullptr ? *v : (b[1] ? *b[1] : Value::none());
      }
      bind_args(a, {}, name);
      if (name == "copy") {
        auto c = std::make_shared<Dict>(*d);
        return Value::dict(std::move(c));
      }
      std::vector<Value> out;
      out.reserve(d->items.size());
      for (const auto& [k, v] : d->items) {
        if (name == "items")
          out.push_back(Value::tuple({k, v}));
        else
          out.push_back(name == "keys" ? k : v);
      }
      return ip.make_list(std::move(out), name == "items"  ? SeqKind::Items
                                          : name == "keys" ? SeqKind::Keys
                                                           : SeqKind::Values);
    });
  }
  if (obj.is_list()) {
    SeqKind kind = obj.list_obj().kind;
    if (kind != SeqKind::List && kind != SeqKind::Tuple) return std::nullopt;
    bool is_list = kind == SeqKind::List;
    if (is_list && (name == "append" || name == "extend" || name == "insert" || name == "remove" ||
                    name == "reverse" || name == "sort"))
      return unsafe(obj, name);
    if (name != "index" && name != "count" &&
        !(is_list && (name == "copy" || name == "pop" || name == "clear")))
      return std::nullopt;
    Value self = obj;
    return Value::func(name, [self, name](Interp& ip, CallArgs& a) -> Value {
      List& l = self.list_obj();
      if (name == "index" || name == "count") {
        auto b = bind_args(a, {"value"}, name);
        if (!b[0]) type_error(name + "() takes exactly one argument (0 given)");
        int64_t n = 0;
        for (size_t i = 0; i < l.items.size(); ++i) {
          if (equal(l.items[i], *b[0])) {
            if (name == "index") return Value::integer(static_cast<int64_t>(i));
            ++n;
          }
        }
        if (name == "index") type_error("ValueError: " + repr(*b[0]) + " is not in list");
        return Value::integer(n);
      }
      if (name == "copy") return (bind_args(a, {}, name), ip.make_list(l.items));
      if (name == "clear") {
        bind_args(a, {}, name);
        l.items.clear();
        return Value::none();
      }
      auto b = bind_args(a, {"index"}, "pop");
      if (l.items.empty()) type_error("IndexError: pop from empty list");
      int64_t i = opt_int(b[0], -1);
      auto n = static_cast<int64_t>(l.items.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) type_error("IndexError: pop index out of range");
      Value v = l.items[static_cast<size_t>(i)];
      l.items.erase(l.items.begin() + i);
      return v;
    });
  }
  return std::nullopt;
}

}  // namespace ringlm::jinja
