#include "tokenizer/jinja/pystr.h"

#include <locale.h>
#include <wctype.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tokenizer/jinja/errors.h"

namespace ringlm::jinja::py {

namespace {

// libc's C.UTF-8 character tables, for the non-ASCII part of case mapping and classes.
locale_t utf8_locale() {
  static locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  return loc;
}

bool in_set(char32_t c, std::u32string_view set) {
  return set.find(c) != std::u32string_view::npos;
}

}  // namespace

bool valid_utf8(std::string_view s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    char32_t cp;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += len;
  }
  return true;
}

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0, n = s.size();
  while (i < n) {
    auto c = static_cast<unsigned char>(s[i]);
    char32_t cp;
    size_t len;
    if (c < 0x80) {
      cp = c;
      len = 1;
    } else if ((c & 0xe0) == 0xc0) {
      cp = c & 0x1f;
      len = 2;
    } else if ((c & 0xf0) == 0xe0) {
      cp = c & 0x0f;
      len = 3;
    } else {
      cp = c & 0x07;
      len = 4;
    }
    for (size_t k = 1; k < len && i + k < n; ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out.push_back(cp);
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  }
}

std::string encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (char ch : s)
    if ((static_cast<unsigned char>(ch) & 0xc0) != 0x80) ++n;
  return n;
}

bool is_ascii(std::string_view s) {
  for (char ch : s)
    if (static_cast<unsigned char>(ch) >= 0x80) return false;
  return true;
}

bool is_space(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20);
  return c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 ||
         c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

bool is_alpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  locale_t l = utf8_locale();
  return l != nullptr && iswalpha_l(static_cast<wint_t>(c), l);
}

bool is_digit(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  locale_t l = utf8_locale();
  return l != nullptr && iswdigit_l(static_cast<wint_t>(c), l);
}

bool is_word(char32_t c) {
  return c == '_' || is_alpha(c) || is_digit(c);
}

bool is_upper(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z';
  locale_t l = utf8_locale();
  return l != nullptr && iswupper_l(static_cast<wint_t>(c), l);
}

bool is_lower(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z';
  locale_t l = utf8_locale();
  return l != nullptr && iswlower_l(static_cast<wint_t>(c), l);
}

char32_t to_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  locale_t l = utf8_locale();
  return l != nullptr ? static_cast<char32_t>(towupper_l(static_cast<wint_t>(c), l)) : c;
}

char32_t to_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  locale_t l = utf8_locale();
  return l != nullptr ? static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), l)) : c;
}

namespace {
// Full (one-to-many) upper-case mappings CPython applies that libc's simple mapping lacks.
void append_upper(std::string& out, char32_t c) {
  if (c == 0xdf) {  // sharp s
    out += "SS";
    return;
  }
  append_utf8(out, to_upper(c));
}
}  // namespace

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (is_ascii(s)) {
    for (char ch : s) out.push_back((ch >= 'a' && ch <= 'z') ? static_cast<char>(ch - 32) : ch);
    return out;
  }
  for (char32_t c : decode(s)) append_upper(out, c);
  return out;
}

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (is_ascii(s)) {
    for (char ch : s) out.push_back((ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch + 32) : ch);
    return out;
  }
  for (char32_t c : decode(s)) append_utf8(out, to_lower(c));
  return out;
}

std::string capitalize(std::string_view s) {
  std::u32string cs = decode(s);
  std::string out;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (i == 0)
      append_upper(out, cs[i]);
    else
      append_utf8(out, to_lower(cs[i]));
  }
  return out;
}

std::string title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : decode(s)) {
    bool cased = is_upper(c) || is_lower(c);
    if (cased) {
      if (prev_cased)
        append_utf8(out, to_lower(c));
      else
        append_upper(out, c);
    } else {
      append_utf8(out, c);
    }
    prev_cased = cased;
  }
  return out;
}

bool isupper(std::string_view s) {
  bool any = false;
  for (char32_t c : decode(s)) {
    if (is_lower(c)) return false;
    if (is_upper(c)) any = true;
  }
  return any;
}

bool islower(std::string_view s) {
  bool any = false;
  for (char32_t c : decode(s)) {
    if (is_upper(c)) return false;
    if (is_lower(c)) any = true;
  }
  return any;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  std::u32string cs = decode(s);
  std::u32string set = chars ? decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) { return chars ? in_set(c, set) : is_space(c); };
  size_t b = 0, e = cs.size();
  if (left)
    while (b < e && strip_it(cs[b])) ++b;
  if (right)
    while (e > b && strip_it(cs[e - 1])) --e;
  return encode(std::u32string_view(cs).substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit) {
  std::vector<std::string> out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    if (sep->empty()) type_error("ValueError: empty separator");
    size_t pos = 0;
    int64_t n = 0;
    while (n < maxsplit) {
      size_t hit = s.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
      ++n;
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  std::u32string cs = decode(s);
  size_t i = 0, n = cs.size();
  int64_t splits = 0;
  while (i < n) {
    while (i < n && is_space(cs[i])) ++i;
    if (i >= n) break;
    if (splits >= maxsplit) {
      size_t e = n;
      while (e > i && is_space(cs[e - 1])) --e;
      out.push_back(encode(std::u32string_view(cs).substr(i, e - i)));
      return out;
    }
    size_t j = i;
    while (j < n && !is_space(cs[j])) ++j;
    out.push_back(encode(std::u32string_view(cs).substr(i, j - i)));
    ++splits;
    i = j;
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit) {
  if (maxsplit < 0) return split(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) type_error("ValueError: empty separator");
    size_t end = s.size();
    int64_t n = 0;
    while (n < maxsplit) {
      if (end < sep->size()) break;
      size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
      ++n;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    std::u32string cs = decode(s);
    size_t e = cs.size();
    int64_t splits = 0;
    while (e > 0) {
      while (e > 0 && is_space(cs[e - 1])) --e;
      if (e == 0) break;
      if (splits >= maxsplit) {
        size_t b = 0;
        while (b < e && is_space(cs[b])) ++b;
        out.push_back(encode(std::u32string_view(cs).substr(b, e - b)));
        break;
      }
      size_t b = e;
      while (b > 0 && !is_space(cs[b - 1])) --b;
      out.push_back(encode(std::u32string_view(cs).substr(b, e - b)));
      ++splits;
      e = b;
    }
  }
  return {out.rbegin(), out.rend()};
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::u32string cs = decode(s);
  std::vector<std::string> out;
  size_t i = 0, start = 0, n = cs.size();
  auto is_break = [](char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d ||
           c == 0x1e || c == 0x85 || c == 0x2028 || c == 0x2029;
  };
  while (i < n) {
    if (is_break(cs[i])) {
      size_t eol = i;
      ++i;
      if (cs[eol] == '\r' && i < n && cs[i] == '\n') ++i;
      out.push_back(encode(std::u32string_view(cs).substr(start, (keepends ? i : eol) - start)));
      start = i;
    } else {
      ++i;
    }
  }
  if (start < n) out.push_back(encode(std::u32string_view(cs).substr(start)));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl,
                    int64_t count_limit) {
  if (count_limit < 0) count_limit = INT64_MAX;
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement before every code point and at the end.
    std::u32string cs = decode(s);
    int64_t n = 0;
    for (char32_t c : cs) {
      if (n < count_limit) {
        out += repl;
        ++n;
      }
      append_utf8(out, c);
    }
    if (n < count_limit) out += repl;
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (n < count_limit) {
    size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(repl);
    pos = hit + old.size();
    ++n;
  }
  out.append(s.substr(pos));
  return out;
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(length(s)) + 1;
  int64_t n = 0;
  size_t pos = 0;
  while ((pos = s.find(sub, pos)) != std::string_view::npos) {
    ++n;
    pos += sub.size();
  }
  return n;
}

int64_t find(std::string_view s, std::string_view sub, bool reverse) {
  size_t hit = reverse ? s.rfind(sub) : s.find(sub);
  if (hit == std::string_view::npos) return -1;
  return static_cast<int64_t>(length(s.substr(0, hit)));
}

namespace {
// str.isprintable() for a non-ASCII code point: false for separators (Zs/Zl/Zp), controls,
// format characters, surrogates and private use. Unassigned code points are treated as printable.
bool printable(char32_t c) {
  if (c < 0xa0) return c >= 0x20 && c < 0x7f;
  if (is_space(c) || c == 0xad) return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x61c || c == 0x6dd || c == 0x70f || c == 0x8e2 ||
      c == 0x180e)
    return false;
  if ((c >= 0x200b && c <= 0x200f) || (c >= 0x202a && c <= 0x202e) ||
      (c >= 0x2060 && c <= 0x2064) || (c >= 0x2066 && c <= 0x206f))
    return false;
  if (c == 0xfeff || (c >= 0xfff9 && c <= 0xfffb)) return false;
  if (c >= 0xd800 && c <= 0xf8ff) return false;  // surrogates + private use
  if (c >= 0xf0000) return false;                // supplementary private use
  if (c == 0xe0001 || (c >= 0xe0020 && c <= 0xe007f)) return false;
  if (c == 0xfffe || c == 0xffff) return false;
  return true;
}
}  // namespace

std::string repr(std::string_view s) {
  char quote = '\'';
  if (s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos) quote = '"';
  std::string out;
  out.push_back(quote);
  char buf[16];
  for (char32_t c : decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else if (c < 0x7f || printable(c)) {
      append_utf8(out, c);
    } else if (c <= 0xff) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else if (c <= 0xffff) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then CPython's 'r' layout: fixed for -4 < exponent <= 16.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  int exp = std::atoi(sci.c_str() + epos + 1);
  std::string digits;
  for (char ch : mant)
    if (ch != '.') digits.push_back(ch);
  int decpt = exp + 1;
  int nd = static_cast<int>(digits.size());
  std::string out = neg ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (nd > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  } else if (decpt <= 0) {
    out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  } else if (decpt >= nd) {
    out += digits + std::string(static_cast<size_t>(decpt - nd), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(decpt)) + "." +
           digits.substr(static_cast<size_t>(decpt));
  }
  return out;
}

std::optional<int64_t> parse_int(std::string_view s, int base) {
  std::string t = strip(s, std::nullopt, true, true);
  if (!is_ascii(t)) return std::nullopt;
  size_t i = 0;
  bool neg = false;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
  // A radix prefix is allowed when it matches the base; base 0 picks the base from it.
  if (i + 1 < t.size() && t[i] == '0') {
    char p = static_cast<char>(t[i + 1] | 0x20);
    int prefixed = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefixed != 0 && (base == 0 || base == prefixed)) {
      base = prefixed;
      i += 2;
      if (i < t.size() && t[i] == '_') ++i;
    }
  }
  if (base == 0) {
    // Decimal with base 0: no leading zeros except for zero itself.
    base = 10;
    if (i + 1 < t.size() && t[i] == '0') {
      for (size_t k = i; k < t.size(); ++k)
        if (t[k] != '0' && t[k] != '_') return std::nullopt;
    }
  }
  if (base < 2 || base > 36) return std::nullopt;
  std::string digits;
  bool prev_us = true;  // an underscore may not lead, trail or repeat
  for (; i < t.size(); ++i) {
    char ch = t[i];
    if (ch == '_') {
      if (prev_us) return std::nullopt;
      prev_us = true;
      continue;
    }
    prev_us = false;
    digits.push_back(ch);
  }
  if (digits.empty() || prev_us) return std::nullopt;
  int64_t v = 0;
  auto res = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
  if (res.ec != std::errc() || res.ptr != digits.data() + digits.size()) return std::nullopt;
  return neg ? -v : v;
}

std::optional<double> parse_float(std::string_view s) {
  std::string t = strip(s, std::nullopt, true, true);
  if (t.empty() || !is_ascii(t)) return std::nullopt;
  std::string lowered = lower(t);
  std::string body = lowered;
  bool neg = false;
  if (body[0] == '+' || body[0] == '-') {
    neg = body[0] == '-';
    body.erase(0, 1);
  }
  if (body == "inf" || body == "infinity") return neg ? -HUGE_VAL : HUGE_VAL;
  if (body == "nan") return neg ? -NAN : NAN;
  for (char ch : body)
    if (!((ch >= '0' && ch <= '9') || ch == '.' || ch == 'e' || ch == '+' || ch == '-' ||
          ch == '_'))
      return std::nullopt;
  std::string clean;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '_') {
      // Underscores only between digits.
      if (i == 0 || i + 1 >= t.size() || !std::isdigit(static_cast<unsigned char>(t[i - 1])) ||
          !std::isdigit(static_cast<unsigned char>(t[i + 1])))
        return std::nullopt;
      continue;
    }
    clean.push_back(t[i]);
  }
  char* end = nullptr;
  double v = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return v;
}

std::optional<std::string> unescape_literal(std::string_view body, std::string* error) {
  std::string out;
  std::u32string cs = decode(body);
  // jinja2 backslash-replaces non-ASCII first: a backslash before a non-ASCII character escapes
  // the backslash of the replacement, leaving "\xe9"-style text.
  std::u32string src;
  for (char32_t c : cs) {
    if (c < 0x80) {
      src.push_back(c);
      continue;
    }
    char buf[16];
    if (c <= 0xff)
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
    else if (c <= 0xffff)
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
    else
      std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
    for (char* p = buf; *p; ++p) src.push_back(static_cast<char32_t>(*p));
  }
  auto hexval = [](char32_t c) -> int {
    if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
    return -1;
  };
  size_t i = 0, n = src.size();
  while (i < n) {
    char32_t c = src[i];
    if (c != '\\') {
      append_utf8(out, c);
      ++i;
      continue;
    }
    if (i + 1 >= n) {
      *error = "\\ at end of string";
      return std::nullopt;
    }
    char32_t e = src[i + 1];
    i += 2;
    switch (e) {
      case '\n':
        break;  // line continuation
      case '\\':
        out.push_back('\\');
        break;
      case '\'':
        out.push_back('\'');
        break;
      case '"':
        out.push_back('"');
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case 'x':
      case 'u':
      case 'U': {
        size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        char32_t v = 0;
        for (size_t k = 0; k < digits; ++k) {
          int h = i + k < n ? hexval(src[i + k]) : -1;
          if (h < 0) {
            *error = "truncated \\" + std::string(1, static_cast<char>(e)) + " escape";
            return std::nullopt;
          }
          v = (v << 4) | static_cast<char32_t>(h);
        }
        i += digits;
        if (v > 0x10ffff) {
          *error = "illegal Unicode character";
          return std::nullopt;
        }
        if (v >= 0xd800 && v <= 0xdfff) {
          *error = "surrogate code point in string literal is not supported";
          return std::nullopt;
        }
        append_utf8(out, v);
        break;
      }
      case 'N':
        *error = "\\N{...} escapes are not supported";
        return std::nullopt;
      default:
        if (e >= '0' && e <= '7') {
          char32_t v = e - '0';
          for (int k = 0; k < 2 && i < n && src[i] >= '0' && src[i] <= '7'; ++k, ++i)
            v = v * 8 + (src[i] - '0');
          append_utf8(out, v);
        } else {
          out.push_back('\\');  // unknown escapes are kept verbatim
          append_utf8(out, e);
        }
    }
  }
  return out;
}

std::vector<int64_t> slice_indices(const SliceSpec& s, int64_t len) {
  int64_t step = s.step.value_or(1);
  if (step == 0) type_error("ValueError: slice step cannot be zero");
  int64_t start, stop;
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt, int64_t lo, int64_t hi) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < lo) x = lo;
    } else if (x > hi) {
      x = hi;
    }
    return x;
  };
  if (step > 0) {
    start = clamp(s.start, 0, 0, len);
    stop = clamp(s.stop, len, 0, len);
  } else {
    start = clamp(s.start, len - 1, -1, len - 1);
    stop = clamp(s.stop, -1, -1, len - 1);
  }
  std::vector<int64_t> out;
  // Count first so that a huge step cannot overflow the running index.
  if (step > 0 && start < stop) {
    int64_t count = (stop - start - 1) / step + 1;
    for (int64_t k = 0; k < count; ++k) out.push_back(start + k * step);
  } else if (step < 0 && start > stop) {
    int64_t mag = step == INT64_MIN ? INT64_MAX : -step;
    int64_t count = (start - stop - 1) / mag + 1;
    for (int64_t k = 0; k < count; ++k) out.push_back(start - k * mag);
  }
  return out;
}

}  // namespace ringlm::jinja::py
