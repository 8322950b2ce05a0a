// UTF-8 and Unicode helpers for the tokenizer: decoding, invalid-byte replacement, the character
// classes Hugging Face tokenizers uses (Rust's char predicates), and normalization forms via ICU.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ringlm::tok {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes the UTF-8 sequence at s[i] (must be valid UTF-8); advances i.
inline char32_t next_cp(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  if (b0 < 0xE0) {
    const char32_t c = ((b0 & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
    i += 2;
    return c;
  }
  if (b0 < 0xF0) {
    const char32_t c = ((b0 & 0x0Fu) << 12) |
                       ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 6) |
                       (static_cast<unsigned char>(s[i + 2]) & 0x3Fu);
    i += 3;
    return c;
  }
  const char32_t c = ((b0 & 0x07u) << 18) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 12) |
                     ((static_cast<unsigned char>(s[i + 2]) & 0x3Fu) << 6) |
                     (static_cast<unsigned char>(s[i + 3]) & 0x3Fu);
  i += 4;
  return c;
}

// Length in bytes of the UTF-8 sequence starting with lead byte b (1 for invalid leads).
inline size_t utf8_len(unsigned char b) {
  if (b < 0xC0) return 1;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  return 4;
}

void append_utf8(std::string& out, char32_t cp);

// Length of the valid UTF-8 sequence at s[i], or 0 if s[i..] starts with an invalid sequence.
// On 0, *invalid_len receives the length of the maximal subpart to replace by one U+FFFD
// (Unicode "substitution of maximal subparts", as Python's errors='replace' and Rust's lossy).
size_t valid_seq_len(std::string_view s, size_t i, size_t* invalid_len);

bool is_valid_utf8(std::string_view s);

// Copy of s with each maximal invalid subpart replaced by U+FFFD.
std::string to_valid_utf8(std::string_view s);

// Number of leading bytes of s that form complete UTF-8 characters, treating an incomplete but
// possibly-valid sequence at the very end as pending (used by streaming decoders).
size_t complete_utf8_prefix(std::string_view s);

// Character classes with the semantics of Rust's char methods (used by HF tokenizers).
bool is_whitespace(char32_t c);    // White_Space property (char::is_whitespace)
bool is_numeric(char32_t c);       // general category Nd, Nl or No (char::is_numeric)
bool is_alphanumeric(char32_t c);  // Alphabetic or numeric (char::is_alphanumeric)
bool is_punctuation(char32_t c);   // ASCII punctuation or general category P*
bool is_word_char(char32_t c);     // regex \w: Alphabetic, M, Nd, Pc, Join_Control

enum class NormForm { NFC, NFD, NFKC, NFKD };
std::string normalize_unicode(std::string_view s, NormForm form);  // s must be valid UTF-8
std::string to_lower(std::string_view s);                          // per-char full lowercase

}  // namespace ringlm::tok
