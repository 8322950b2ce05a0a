#include "tokenizer/unicode.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <vector>

#include "core/error.h"

namespace ringlm::tok {

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t valid_seq_len(std::string_view s, size_t i, size_t* invalid_len) {
  const size_t n = s.size();
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = b(i);
  if (b0 < 0x80) return 1;
  // Expected length and the allowed range of the second byte (Unicode Table 3-7).
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 == 0xE0) {
    len = 3, lo = 0xA0;
  } else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) {
    len = 3;
  } else if (b0 == 0xED) {
    len = 3, hi = 0x9F;
  } else if (b0 == 0xF0) {
    len = 4, lo = 0x90;
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    len = 4;
  } else if (b0 == 0xF4) {
    len = 4, hi = 0x8F;
  } else {
    if (invalid_len != nullptr) *invalid_len = 1;
    return 0;
  }
  size_t k = 1;
  for (; k < len; ++k) {
    if (i + k >= n) break;
    const unsigned char c = b(i + k);
    const bool ok = (k == 1) ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) break;
  }
  if (k == len) return len;
  if (invalid_len != nullptr) *invalid_len = k;
  return 0;
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t l = valid_seq_len(s, i, nullptr);
    if (l == 0) return false;
    i += l;
  }
  return true;
}

std::string to_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t bad = 0;
    const size_t l = valid_seq_len(s, i, &bad);
    if (l > 0) {
      out.append(s.substr(i, l));
      i += l;
    } else {
      append_utf8(out, kReplacementChar);
      i += bad;
    }
  }
  return out;
}

size_t complete_utf8_prefix(std::string_view s) {
  // Walk back over at most 3 trailing bytes to find an incomplete (but so far valid) sequence.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t start = n - back;
    const auto b0 = static_cast<unsigned char>(s[start]);
    if (b0 < 0x80) return n;
    if (b0 >= 0xC0) {
      size_t bad = 0;
      if (valid_seq_len(s, start, &bad) == 0 && start + bad == n && utf8_len(b0) > back)
        return start;
      return n;
    }
  }
  return n;
}

bool is_whitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const auto gc = u_charType(static_cast<UChar32>(c));
  return gc == U_DECIMAL_DIGIT_NUMBER || gc == U_LETTER_NUMBER || gc == U_OTHER_NUMBER;
}

bool is_alphanumeric(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_ALPHABETIC) || is_numeric(c);
}

bool is_punctuation(char32_t c) {
  if (c < 0x80)
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
  return u_ispunct(static_cast<UChar32>(c)) != 0;
}

bool is_word_char(char32_t c) {
  if (c < 0x80)
    return c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
  const auto u = static_cast<UChar32>(c);
  const auto mask = U_GET_GC_MASK(u);
  return u_hasBinaryProperty(u, UCHAR_ALPHABETIC) ||
         (mask & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) ||
         u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL);
}

namespace {

std::u16string to_u16(std::string_view s) {
  std::u16string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const char32_t c = next_cp(s, i);
    if (c < 0x10000) {
      out.push_back(static_cast<char16_t>(c));
    } else {
      out.push_back(static_cast<char16_t>(0xD800 + ((c - 0x10000) >> 10)));
      out.push_back(static_cast<char16_t>(0xDC00 + ((c - 0x10000) & 0x3FF)));
    }
  }
  return out;
}

std::string from_u16(const char16_t* p, size_t n) {
  std::string out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    char32_t c = p[i];
    if (c >= 0xD800 && c < 0xDC00 && i + 1 < n) {
      c = 0x10000 + ((c - 0xD800) << 10) + (p[i + 1] - 0xDC00u);
      ++i;
    }
    append_utf8(out, c);
  }
  return out;
}

}  // namespace

std::string normalize_unicode(std::string_view s, NormForm form) {
  bool ascii = true;
  for (char ch : s) ascii = ascii && static_cast<unsigned char>(ch) < 0x80;
  if (ascii) return std::string(s);  // every normalization form leaves ASCII unchanged
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* norm = nullptr;
  switch (form) {
    case NormForm::NFC:
      norm = unorm2_getNFCInstance(&err);
      break;
    case NormForm::NFD:
      norm = unorm2_getNFDInstance(&err);
      break;
    case NormForm::NFKC:
      norm = unorm2_getNFKCInstance(&err);
      break;
    case NormForm::NFKD:
      norm = unorm2_getNFKDInstance(&err);
      break;
  }
  RINGLM_CHECK(U_SUCCESS(err), "ICU normalizer unavailable: ", u_errorName(err));
  const std::u16string in = to_u16(s);
  std::vector<UChar> out(in.size() * 4 + 16);
  for (int attempt = 0; attempt < 2; ++attempt) {
    err = U_ZERO_ERROR;
    const int32_t n = unorm2_normalize(norm, reinterpret_cast<const UChar*>(in.data()),
                                       static_cast<int32_t>(in.size()), out.data(),
                                       static_cast<int32_t>(out.size()), &err);
    if (err == U_BUFFER_OVERFLOW_ERROR) {
      out.resize(static_cast<size_t>(n) + 16);
      continue;
    }
    RINGLM_CHECK(U_SUCCESS(err), "ICU normalization failed: ", u_errorName(err));
    return from_u16(reinterpret_cast<const char16_t*>(out.data()), static_cast<size_t>(n));
  }
  RINGLM_FAIL("ICU normalization failed: buffer size");
}

std::string to_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const char32_t c = next_cp(s, i);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
    } else if (c == 0x130) {
      out += "i\xCC\x87";  // the one code point whose full lowercase mapping has two characters
    } else {
      append_utf8(out, static_cast<char32_t>(u_tolower(static_cast<UChar32>(c))));
    }
  }
  return out;
}

}  // namespace ringlm::tok
