#include "tokenizer/jinja/pyjson.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja/errors.h"
#include "tokenizer/jinja/pystr.h"

namespace ringlm::jinja {

namespace {

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& o) : o_(o) {
    item_sep_ = o.item_separator ? *o.item_separator : (o.indent ? "," : ", ");
  }

  std::string run(const Value& v) {
    value(v, 0);
    return std::move(out_);
  }

 private:
  void put(const std::string& s) {
    out_ += s;
    if (out_.size() > o_.max_bytes) fail(ErrorKind::Limit, "tojson output too large");
  }

  void string(const std::string& s) {
    std::string r = "\"";
    char buf[16];
    for (char32_t c : py::decode(s)) {
      switch (c) {
        case '"':
          r += "\\\"";
          break;
        case '\\':
          r += "\\\\";
          break;
        case '\n':
          r += "\\n";
          break;
        case '\r':
          r += "\\r";
          break;
        case '\t':
          r += "\\t";
          break;
        case '\b':
          r += "\\b";
          break;
        case '\f':
          r += "\\f";
          break;
        default:
          if (c < 0x20) {
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
            r += buf;
          } else if (o_.ensure_ascii && c > 0x7e) {
            if (c >= 0x10000) {
              char32_t v = c - 0x10000;
              std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x",
                            static_cast<unsigned>(0xd800 | (v >> 10)),
                            static_cast<unsigned>(0xdc00 | (v & 0x3ff)));
            } else {
              std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
            }
            r += buf;
          } else {
            py::append_utf8(r, c);
          }
      }
    }
    r += "\"";
    put(r);
  }

  static std::string float_text(double d) {
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
    return py::float_repr(d);
  }

  void newline_indent(int level) {
    std::string s = "\n";
    for (int i = 0; i < level; ++i) s += *o_.indent;
    put(s);
  }

  // Dict keys as json.dumps coerces them.
  std::string key_text(const Value& k) {
    switch (k.kind()) {
      case Kind::String:
        return k.str();
      case Kind::Bool:
        return k.as_bool() ? "true" : "false";
      case Kind::None:
        return "null";
      case Kind::Int:
        return std::to_string(k.as_int());
      case Kind::Float:
        return float_text(k.as_double());
      default:
        type_error("keys must be str, int, float, bool or None, not " + type_name(k));
    }
  }

  void value(const Value& v, int level) {
    switch (v.kind()) {
      case Kind::None:
        put("null");
        return;
      case Kind::Bool:
        put(v.as_bool() ? "true" : "false");
        return;
      case Kind::Int:
        put(std::to_string(v.as_int()));
        return;
      case Kind::Float:
        put(float_text(v.as_double()));
        return;
      case Kind::String:
        string(v.str());
        return;
      case Kind::List: {
        const List& l = v.list_obj();
        if (l.kind != SeqKind::List && l.kind != SeqKind::Tuple)
          type_error("Object of type " + type_name(v) + " is not JSON serializable");
        if (l.items.empty()) {
          put("[]");
          return;
        }
        put("[");
        if (o_.indent) newline_indent(level + 1);
        for (size_t i = 0; i < l.items.size(); ++i) {
          if (i > 0) {
            put(item_sep_);
            if (o_.indent) newline_indent(level + 1);
          }
          value(l.items[i], level + 1);
        }
        if (o_.indent) newline_indent(level);
        put("]");
        return;
      }
      case Kind::Dict: {
        const Dict& d = v.dict_obj();
        if (d.items.empty()) {
          put("{}");
          return;
        }
        std::vector<const std::pair<Value, Value>*> items;
        for (const auto& kv : d.items) items.push_back(&kv);
        if (o_.sort_keys) {
          std::stable_sort(items.begin(), items.end(), [](const auto* a, const auto* b) {
            return compare(a->first, b->first) < 0;
          });
        }
        put("{");
        if (o_.indent) newline_indent(level + 1);
        bool first = true;
        for (const auto* kv : items) {
          std::string k = key_text(kv->first);
          if (!first) {
            put(item_sep_);
            if (o_.indent) newline_indent(level + 1);
          }
          first = false;
          string(k);
          put(o_.key_separator);
          value(kv->second, level + 1);
        }
        if (o_.indent) newline_indent(level);
        put("}");
        return;
      }
      default:
        type_error("Object of type " + type_name(v) + " is not JSON serializable");
    }
  }

  const JsonDumpOptions& o_;
  std::string item_sep_;
  std::string out_;
};

}  // namespace

std::string json_dumps(const Value& v, const JsonDumpOptions& opt) {
  return Dumper(opt).run(v);
}

}  // namespace ringlm::jinja
