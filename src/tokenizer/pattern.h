// Patterns and splitting with Hugging Face tokenizers' semantics: a pattern (regex, literal string
// or character predicate) cuts a string into matched / unmatched ranges that cover it, and a split
// behavior (Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous) turns those into
// pieces. Regexes are PCRE2 (UTF + UCP, JIT) with Oniguruma's meaning of \s and \w (HF uses
// Oniguruma); empty matches follow Oniguruma's iterator (none right after the previous match).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ringlm::tok {

struct Range {
  size_t begin = 0, end = 0;
};

class Regex {
 public:
  // Throws ringlm::Error with `where` and PCRE2's message if the pattern does not compile.
  Regex(std::string_view pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // All non-overlapping matches in s (valid UTF-8), in order.
  void find_all(std::string_view s, std::vector<Range>& out) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// A split pattern. Exactly one of regex / literal / predicate is used.
struct Pattern {
  std::shared_ptr<const Regex> regex;
  std::string literal;
  std::function<bool(char32_t)> predicate;
  bool is_literal = false;
};

// Ranges covering s, each flagged as match (true) or not; `invert` swaps the flags.
void find_matches(const Pattern& p, std::string_view s, bool invert,
                  std::vector<std::pair<Range, bool>>& out);

// Pieces (as ranges of s) after applying behavior; empty pieces are dropped.
void split_ranges(const Pattern& p, std::string_view s, SplitBehavior behavior, bool invert,
                  std::vector<Range>& out);

// s with every match of p replaced by `content`.
std::string replace_all(const Pattern& p, std::string_view s, std::string_view content);

// Rewrites \s, \S, \w, \W into explicit classes with Oniguruma's Unicode meaning (exposed for
// tests).
std::string onig_compat_pattern(std::string_view pattern);

}  // namespace ringlm::tok
