// Python `str` semantics over UTF-8 std::string: the pieces of CPython's string behaviour that chat
// templates observe (whitespace, strip/split, case mapping, repr, float repr, literal unescaping).
// Strings are UTF-8; indices and lengths are in code points, as in Python.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ringlm::jinja::py {

// UTF-8 <-> code points. decode() requires valid UTF-8 (validated at the boundary).
bool valid_utf8(std::string_view s);
std::u32string decode(std::string_view s);
void append_utf8(std::string& out, char32_t c);
std::string encode(std::u32string_view s);
size_t length(std::string_view s);  // code points
bool is_ascii(std::string_view s);

// str.isspace() for one code point (Unicode White_Space as CPython defines it).
bool is_space(char32_t c);
// str.isalnum() / '_' (the regex \w class), str.isdigit(), str.isalpha() approximations via libc's
// C.UTF-8 tables; exact for ASCII.
bool is_word(char32_t c);
bool is_alpha(char32_t c);
bool is_digit(char32_t c);
bool is_upper(char32_t c);
bool is_lower(char32_t c);
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);
std::string title(std::string_view s);  // str.title()
bool isupper(std::string_view s);       // str.isupper()
bool islower(std::string_view s);       // str.islower()

// strip/lstrip/rstrip: chars == nullopt strips whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);
// str.split(sep=None, maxsplit=-1) and str.rsplit; throws on an empty separator.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
int64_t count(std::string_view s, std::string_view sub);
// str.find / str.rfind, -1 when absent; result in code points.
int64_t find(std::string_view s, std::string_view sub, bool reverse);

// repr() of a str and of a float; str() of a float is the same as its repr.
std::string repr(std::string_view s);
std::string float_repr(double d);

// int(x) / float(x) of a string with Python's accepted syntax; nullopt when Python raises
// ValueError.
std::optional<int64_t> parse_int(std::string_view s, int base);
std::optional<double> parse_float(std::string_view s);

// Decodes a Jinja string literal body the way jinja2's lexer does (Python 'unicode-escape' after
// backslash-replacing non-ASCII). Returns nullopt with `error` set on a malformed escape.
std::optional<std::string> unescape_literal(std::string_view body, std::string* error);

// Python slice arithmetic: slice(start, stop, step).indices(len) then the selected indices.
struct SliceSpec {
  std::optional<int64_t> start, stop, step;
};
std::vector<int64_t> slice_indices(const SliceSpec& s, int64_t len);  // throws on step == 0

}  // namespace ringlm::jinja::py
