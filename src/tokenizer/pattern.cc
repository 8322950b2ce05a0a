#include "tokenizer/pattern.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace ringlm::tok {

namespace {

// Oniguruma's Unicode \s (the White_Space property) and \w (Letter, Mark, Nd, Pc).
constexpr const char* kSpaceItems =
    "\\t-\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}"
    "\\x{202f}\\x{205f}\\x{3000}";
constexpr const char* kWordItems = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";

// One JIT stack per thread, large enough for lookahead-heavy patterns on long whitespace runs.
struct JitResources {
  pcre2_match_data* md = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* mctx = nullptr;
  JitResources() {
    md = pcre2_match_data_create(1, nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    mctx = pcre2_match_context_create(nullptr);
    if (mctx != nullptr && stack != nullptr) pcre2_jit_stack_assign(mctx, nullptr, stack);
    // Bound backtracking per match (pathological patterns in a file -> error, not a hang).
    if (mctx != nullptr) pcre2_set_match_limit(mctx, 20'000'000);
  }
  ~JitResources() {
    pcre2_match_context_free(mctx);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(md);
  }
};

JitResources& jit_resources() {
  thread_local JitResources r;
  return r;
}

}  // namespace

std::string onig_compat_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 32);
  int class_depth = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      ++i;
      if (e == 's' || e == 'w') {
        const char* items = e == 's' ? kSpaceItems : kWordItems;
        if (class_depth > 0) {
          out += items;
        } else {
          out += '[';
          out += items;
          out += ']';
        }
        continue;
      }
      if ((e == 'S' || e == 'W') && class_depth == 0) {
        out += "[^";
        out += e == 'S' ? kSpaceItems : kWordItems;
        out += ']';
        continue;
      }
      out += '\\';
      out += e;
      continue;
    }
    if (c == '[') {
      if (class_depth > 0 && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX class [:alpha:]
        const size_t close = p.find(":]", i + 2);
        if (close != std::string_view::npos) {
          out.append(p.substr(i, close + 2 - i));
          i = close + 1;
          continue;
        }
      }
      ++class_depth;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (c == ']' && class_depth > 0) --class_depth;
    out += c;
  }
  return out;
}

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() { pcre2_code_free(code); }
};

Regex::Regex(std::string_view pattern, const std::string& where) : impl_(std::make_unique<Impl>()) {
  RINGLM_USER_CHECK(is_valid_utf8(pattern), where, ": regex pattern is not valid UTF-8");
  const std::string p = onig_compat_pattern(pattern);
  int err = 0;
  PCRE2_SIZE off = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &off, nullptr);
  if (impl_->code == nullptr) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof(buf));
    RINGLM_USER_CHECK(false, where, ": invalid regex '", std::string(pattern),
                      "': ", reinterpret_cast<const char*>(buf), " at offset ", off);
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;

void Regex::find_all(std::string_view s, std::vector<Range>& out) const {
  JitResources& r = jit_resources();
  RINGLM_CHECK(r.md != nullptr && r.mctx != nullptr, "PCRE2 match data allocation failed");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t start = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (start <= s.size()) {
    const int rc =
        impl_->jit
            ? pcre2_jit_match(impl_->code, subject, s.size(), start, 0, r.md, r.mctx)
            : pcre2_match(impl_->code, subject, s.size(), start, PCRE2_NO_UTF_CHECK, r.md, r.mctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(rc, buf, sizeof(buf));
      RINGLM_USER_CHECK(false, "regex match failed: ", reinterpret_cast<const char*>(buf));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(r.md);
    const size_t b = ov[0], e = ov[1];
    if (b == e && have_last && last_end == e) {
      // Oniguruma's iterator: no empty match right after the previous match; step one character.
      if (start >= s.size()) break;
      start += utf8_len(static_cast<unsigned char>(s[start]));
      continue;
    }
    out.push_back({b, e});
    have_last = true;
    last_end = e;
    start = e;
  }
}

void find_matches(const Pattern& p, std::string_view s, bool invert,
                  std::vector<std::pair<Range, bool>>& out) {
  out.clear();
  if (s.empty()) {
    out.push_back({{0, 0}, invert});
    return;
  }
  if (p.predicate) {
    size_t last = 0, i = 0;
    while (i < s.size()) {
      const size_t b = i;
      const char32_t c = next_cp(s, i);
      if (p.predicate(c)) {
        if (last < b) out.push_back({{last, b}, invert});
        out.push_back({{b, i}, !invert});
        last = i;
      }
    }
    if (last < s.size()) out.push_back({{last, s.size()}, invert});
    return;
  }
  std::vector<Range> matches;
  if (p.is_literal) {
    if (p.literal.empty()) {
      out.push_back({{0, s.size()}, invert});
      return;
    }
    size_t pos = 0;
    while ((pos = s.find(p.literal, pos)) != std::string_view::npos) {
      matches.push_back({pos, pos + p.literal.size()});
      pos += p.literal.size();
    }
  } else {
    RINGLM_CHECK(p.regex != nullptr, "pattern without regex");
    p.regex->find_all(s, matches);
  }
  size_t prev = 0;
  for (const Range& m : matches) {
    if (prev != m.begin) out.push_back({{prev, m.begin}, invert});
    out.push_back({m, !invert});
    prev = m.end;
  }
  if (prev != s.size()) out.push_back({{prev, s.size()}, invert});
}

void split_ranges(const Pattern& p, std::string_view s, SplitBehavior behavior, bool invert,
                  std::vector<Range>& out) {
  out.clear();
  thread_local std::vector<std::pair<Range, bool>> m;
  find_matches(p, s, invert, m);
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const auto& [r, is_match] : m) out.push_back(r);
      break;
    case SplitBehavior::Removed:
      for (const auto& [r, is_match] : m)
        if (!is_match) out.push_back(r);
      break;
    case SplitBehavior::Contiguous: {
      bool prev_match = false;
      for (const auto& [r, is_match] : m) {
        if (is_match == prev_match && !out.empty()) {
          out.back().end = r.end;
        } else {
          out.push_back(r);
        }
        prev_match = is_match;
      }
      break;
    }
    case SplitBehavior::MergedWithPrevious: {
      bool prev_match = false;
      for (const auto& [r, is_match] : m) {
        if (is_match && !prev_match && !out.empty()) {
          out.back().end = r.end;
        } else {
          out.push_back(r);
        }
        prev_match = is_match;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      bool prev_match = false;
      for (size_t k = m.size(); k-- > 0;) {
        const auto& [r, is_match] = m[k];
        if (is_match && !prev_match && !out.empty()) {
          out.back().begin = r.begin;
        } else {
          out.push_back(r);
        }
        prev_match = is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
    }
  }
  std::erase_if(out, [](const Range& r) { return r.begin == r.end; });
}

std::string replace_all(const Pattern& p, std::string_view s, std::string_view content) {
  thread_local std::vector<std::pair<Range, bool>> m;
  find_matches(p, s, false, m);
  std::string out;
  out.reserve(s.size());
  for (const auto& [r, is_match] : m) {
    if (is_match) {
      out.append(content);
    } else {
      out.append(s.substr(r.begin, r.end - r.begin));
    }
  }
  return out;
}

}  // namespace ringlm::tok
