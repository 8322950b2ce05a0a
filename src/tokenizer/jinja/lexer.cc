#include "tokenizer/jinja/lexer.h"

#include <cmath>
#include <cstdlib>

#include "tokenizer/jinja/errors.h"
#include "tokenizer/jinja/pystr.h"

namespace ringlm::jinja {

namespace {

// Newlines normalized to \n and one trailing newline dropped (keep_trailing_newline=False).
std::string normalize(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out.push_back(src[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : s_(normalize(src)) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) root();
    push(Tok::Eof, "", line_);
    return std::move(out_);
  }

 private:
  [[noreturn]] void error(const std::string& msg) {
    throw TemplateError(ErrorKind::Syntax, line_, msg);
  }

  // Decodes the code point at i; sets *len to its byte length.
  char32_t cp_at(size_t i, size_t* len) const {
    auto c = static_cast<unsigned char>(s_[i]);
    if (c < 0x80) {
      *len = 1;
      return c;
    }
    size_t n = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
    if (i + n > s_.size()) n = s_.size() - i;
    *len = n;
    return py::decode(std::string_view(s_).substr(i, n))[0];
  }

  bool space_at(size_t i, size_t* len) const { return py::is_space(cp_at(i, len)); }

  // End of a run of \s* starting at i.
  size_t skip_spaces(size_t i) const {
    size_t len;
    while (i < s_.size() && space_at(i, &len)) i += len;
    return i;
  }

  void push(Tok t, std::string text, int line) {
    Token tok;
    tok.type = t;
    tok.text = std::move(text);
    tok.line = line;
    out_.push_back(std::move(tok));
  }

  void advance_to(size_t p) {
    for (size_t i = pos_; i < p; ++i)
      if (s_[i] == '\n') ++line_;
    pos_ = p;
  }

  // Applies '-' / lstrip_blocks to the text before a tag and emits it as data.
  void emit_text(std::string_view text, char sign, bool is_variable) {
    std::string t(text);
    if (sign == '-') {
      t = py::strip(t, std::nullopt, false, true);
    } else if (sign != '+' && !is_variable) {
      size_t nl = t.rfind('\n');
      size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting_) {
        bool all_ws = l_pos < t.size();
        size_t len;
        for (size_t i = l_pos; i < t.size() && all_ws; i += len) {
          all_ws = py::is_space(py::decode(std::string_view(t).substr(i, 4))[0]);
          len = 1;
          auto c = static_cast<unsigned char>(t[i]);
          if (c >= 0x80) len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
        }
        if (all_ws) t.resize(l_pos);
      }
    }
    if (!t.empty()) push(Tok::Data, std::move(t), line_);
  }

  void root() {
    size_t p = pos_;
    size_t tag = std::string::npos;
    while ((p = s_.find('{', p)) != std::string::npos) {
      if (p + 1 < s_.size() && (s_[p + 1] == '{' || s_[p + 1] == '%' || s_[p + 1] == '#')) {
        tag = p;
        break;
      }
      ++p;
    }
    if (tag == std::string::npos) {
      push(Tok::Data, s_.substr(pos_), line_);
      advance_to(s_.size());
      return;
    }
    char kind = s_[tag + 1];
    char sign = tag + 2 < s_.size() && (s_[tag + 2] == '-' || s_[tag + 2] == '+') ? s_[tag + 2] : 0;
    size_t after = tag + 2 + (sign ? 1 : 0);
    std::string_view text = std::string_view(s_).substr(pos_, tag - pos_);
    if (kind == '%') {
      size_t raw_end = match_raw_begin(after);
      if (raw_end != std::string::npos) {
        emit_text(text, sign, false);
        advance_to(raw_end);
        line_starting_ = s_[raw_end - 1] == '\n';
        raw_body();
        return;
      }
    }
    emit_text(text, sign, kind == '{');
    advance_to(after);
    line_starting_ = false;
    if (kind == '#') {
      comment();
    } else {
      int line = line_;
      push(kind == '%' ? Tok::BlockBegin : Tok::VarBegin, "", line);
      inside_tag(kind == '%');
    }
  }

  // `\s*raw\s*(-%}\s*|%})` after "{%[-+]"; returns the end of the match or npos.
  size_t match_raw_begin(size_t i) const {
    i = skip_spaces(i);
    if (s_.compare(i, 3, "raw") != 0) return std::string::npos;
    i = skip_spaces(i + 3);
    if (s_.compare(i, 3, "-%}") == 0) return skip_spaces(i + 3);
    if (s_.compare(i, 2, "%}") == 0) return i + 2;
    return std::string::npos;
  }

  void raw_body() {
    size_t p = pos_;
    while ((p = s_.find("{%", p)) != std::string::npos) {
      char sign = p + 2 < s_.size() && (s_[p + 2] == '-' || s_[p + 2] == '+') ? s_[p + 2] : 0;
      size_t i = skip_spaces(p + 2 + (sign ? 1 : 0));
      if (s_.compare(i, 6, "endraw") == 0) {
        i = skip_spaces(i + 6);
        size_t end = std::string::npos;
        if (s_.compare(i, 3, "+%}") == 0) {
          end = i + 3;
        } else if (s_.compare(i, 3, "-%}") == 0) {
          end = skip_spaces(i + 3);
        } else if (s_.compare(i, 2, "%}") == 0) {
          end = i + 2;
          if (end < s_.size() && s_[end] == '\n') ++end;
        }
        if (end != std::string::npos) {
          emit_text(std::string_view(s_).substr(pos_, p - pos_), sign, false);
          advance_to(end);
          line_starting_ = s_[end - 1] == '\n';
          return;
        }
      }
      p += 2;
    }
    error("Missing end of raw directive");
  }

  void comment() {
    size_t q = s_.find("#}", pos_);
    if (q == std::string::npos) error("Missing end of comment tag");
    size_t end;
    if (q > pos_ && s_[q - 1] == '-') {
      end = skip_spaces(q + 2);
    } else if (q > pos_ && s_[q - 1] == '+') {
      end = q + 2;
    } else {
      end = q + 2;
      if (end < s_.size() && s_[end] == '\n') ++end;
    }
    advance_to(end);
    line_starting_ = s_[end - 1] == '\n';
  }

  // Matches the end delimiter at pos_; returns its end or npos.
  size_t match_end(bool block) const {
    if (block) {
      if (s_.compare(pos_, 3, "+%}") == 0) return pos_ + 3;
      if (s_.compare(pos_, 3, "-%}") == 0) return skip_spaces(pos_ + 3);
      if (s_.compare(pos_, 2, "%}") == 0) {
        size_t e = pos_ + 2;
        if (e < s_.size() && s_[e] == '\n') ++e;
        return e;
      }
      return std::string::npos;
    }
    if (s_.compare(pos_, 3, "-}}") == 0) return skip_spaces(pos_ + 3);
    if (s_.compare(pos_, 2, "}}") == 0) return pos_ + 2;
    return std::string::npos;
  }

  static bool digit(char c) { return c >= '0' && c <= '9'; }

  // (\d+_)*\d+ at i; returns end or npos.
  size_t digits_us(size_t i) const {
    if (i >= s_.size() || !digit(s_[i])) return std::string::npos;
    while (true) {
      while (i < s_.size() && digit(s_[i])) ++i;
      if (i + 1 < s_.size() && s_[i] == '_' && digit(s_[i + 1])) {
        ++i;
        continue;
      }
      return i;
    }
  }

  // float_re at pos_: returns end or npos.
  size_t match_float() const {
    if (pos_ > 0 && s_[pos_ - 1] == '.') return std::string::npos;
    size_t i = digits_us(pos_);
    if (i == std::string::npos) return i;
    auto exponent = [&](size_t j) -> size_t {
      if (j < s_.size() && (s_[j] == 'e' || s_[j] == 'E')) {
        ++j;
        if (j < s_.size() && (s_[j] == '+' || s_[j] == '-')) ++j;
        return digits_us(j);
      }
      return std::string::npos;
    };
    // Alternative 1: optional fraction then a required exponent.
    size_t frac_end = std::string::npos;
    if (i < s_.size() && s_[i] == '.') frac_end = digits_us(i + 1);
    if (frac_end != std::string::npos) {
      size_t e = exponent(frac_end);
      if (e != std::string::npos) return e;
    }
    size_t e = exponent(i);
    if (e != std::string::npos) return e;
    // Alternative 2: a required fraction.
    return frac_end;
  }

  // integer_re at pos_: returns end or npos; *base receives the radix.
  size_t match_int(int* base) const {
    size_t i = pos_;
    if (i + 1 < s_.size() && s_[i] == '0') {
      char b = static_cast<char>(s_[i + 1] | 0x20);
      int radix = b == 'b' ? 2 : b == 'o' ? 8 : b == 'x' ? 16 : 0;
      if (radix != 0) {
        auto ok = [&](char c) {
          if (radix == 2) return c == '0' || c == '1';
          if (radix == 8) return c >= '0' && c <= '7';
          return digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
        };
        size_t j = i + 2;
        size_t last = std::string::npos;
        while (true) {
          if (j < s_.size() && s_[j] == '_' && j + 1 < s_.size() && ok(s_[j + 1])) ++j;
          if (j < s_.size() && ok(s_[j])) {
            ++j;
            last = j;
          } else {
            break;
          }
        }
        if (last != std::string::npos) {
          *base = radix;
          return last;
        }
      }
    }
    *base = 10;
    if (i < s_.size() && s_[i] >= '1' && s_[i] <= '9') {
      ++i;
      while (true) {
        if (i < s_.size() && s_[i] == '_' && i + 1 < s_.size() && digit(s_[i + 1])) ++i;
        if (i < s_.size() && digit(s_[i]))
          ++i;
        else
          return i;
      }
    }
    if (i < s_.size() && s_[i] == '0') {
      ++i;
      while (true) {
        if (i < s_.size() && s_[i] == '_' && i + 1 < s_.size() && s_[i + 1] == '0') ++i;
        if (i < s_.size() && s_[i] == '0')
          ++i;
        else
          return i;
      }
    }
    return std::string::npos;
  }

  void inside_tag(bool block) {
    std::vector<char> balance;
    while (true) {
      if (pos_ >= s_.size()) return;  // the parser reports the missing end
      if (balance.empty()) {
        size_t end = match_end(block);
        if (end != std::string::npos) {
          push(block ? Tok::BlockEnd : Tok::VarEnd, "", line_);
          advance_to(end);
          line_starting_ = s_[end - 1] == '\n';
          return;
        }
      }
      size_t len;
      if (space_at(pos_, &len)) {
        advance_to(skip_spaces(pos_));
        continue;
      }
      size_t end = match_float();
      if (end != std::string::npos) {
        std::string text;
        for (size_t i = pos_; i < end; ++i)
          if (s_[i] != '_') text.push_back(s_[i]);
        Token t;
        t.type = Tok::Float;
        t.fval = std::strtod(text.c_str(), nullptr);
        t.text = text;
        t.line = line_;
        out_.push_back(std::move(t));
        advance_to(end);
        continue;
      }
      int base = 10;
      end = match_int(&base);
      if (end != std::string::npos) {
        std::string text;
        for (size_t i = pos_ + (base == 10 ? 0 : 2); i < end; ++i)
          if (s_[i] != '_') text.push_back(s_[i]);
        auto v = py::parse_int(text, base);
        if (!v) error("integer literal too large: " + s_.substr(pos_, end - pos_));
        Token t;
        t.type = Tok::Int;
        t.ival = *v;
        t.text = text;
        t.line = line_;
        out_.push_back(std::move(t));
        advance_to(end);
        continue;
      }
      char32_t c = cp_at(pos_, &len);
      if (py::is_word(c)) {
        size_t i = pos_;
        while (i < s_.size()) {
          size_t l;
          if (!py::is_word(cp_at(i, &l))) break;
          i += l;
        }
        std::string name = s_.substr(pos_, i - pos_);
        if (py::is_digit(c) || !py::is_ascii(name)) {
          // jinja2 rejects names that are not Python identifiers; we accept ASCII only.
          error("Invalid character in identifier");
        }
        push(Tok::Name, std::move(name), line_);
        advance_to(i);
        continue;
      }
      if (c == '\'' || c == '"') {
        size_t i = pos_ + 1;
        while (i < s_.size() && s_[i] != static_cast<char>(c)) i += s_[i] == '\\' ? 2 : 1;
        if (i >= s_.size())
          error("unexpected char " + py::repr(std::string(1, static_cast<char>(c))));
        std::string err;
        auto body = py::unescape_literal(std::string_view(s_).substr(pos_ + 1, i - pos_ - 1), &err);
        if (!body) error(err);
        push(Tok::String, std::move(*body), line_);
        advance_to(i + 1);
        continue;
      }
      static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                         "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                         "==", ">",  "<",  "=",  ".",  ":",  "|", ",", ";"};
      const char* op = nullptr;
      for (const char* o : kOps) {
        size_t n = std::char_traits<char>::length(o);
        if (s_.compare(pos_, n, o) == 0) {
          op = o;
          break;
        }
      }
      if (op == nullptr) {
        error("unexpected char " + py::repr(s_.substr(pos_, len)) + " at " + std::to_string(pos_));
      }
      std::string o(op);
      if (o == "{") balance.push_back('}');
      if (o == "(") balance.push_back(')');
      if (o == "[") balance.push_back(']');
      if (o == "}" || o == ")" || o == "]") {
        if (balance.empty()) error("unexpected '" + o + "'");
        char want = balance.back();
        balance.pop_back();
        if (want != o[0]) error("unexpected '" + o + "', expected '" + std::string(1, want) + "'");
      }
      push(Tok::Op, o, line_);
      advance_to(pos_ + o.size());
    }
  }

  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  return Lexer(source).run();
}

}  // namespace ringlm::jinja
