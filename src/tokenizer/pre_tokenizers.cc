#include "tokenizer/pre_tokenizers.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace ringlm::tok {

namespace {

constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// Applies fn(piece, out) to every non-token piece, keeping order; drops empty results.
template <typename Fn>
void for_each_piece(std::vector<Piece>& pieces, Fn&& fn) {
  std::vector<Piece> out;
  out.reserve(pieces.size() * 2);
  for (Piece& p : pieces) {
    if (p.id >= 0) {
      out.push_back(std::move(p));
      continue;
    }
    const size_t first = out.size();
    fn(p, out);
    size_t w = first;
    for (size_t r = first; r < out.size(); ++r) {
      if (out[r].text.empty()) continue;
      if (w != r) out[w] = std::move(out[r]);
      ++w;
    }
    out.resize(w);
  }
  pieces = std::move(out);
}

void split_into(const Piece& p, const Pattern& pat, SplitBehavior b, bool invert,
                std::vector<Piece>& out) {
  thread_local std::vector<Range> ranges;
  split_ranges(pat, p.text, b, invert, ranges);
  for (const Range& r : ranges) {
    out.push_back({p.text.substr(r.begin, r.end - r.begin), -1, p.at_start && r.begin == 0});
  }
}

class ByteLevelPre final : public PreTokenizer {
 public:
  ByteLevelPre(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    if (use_regex) {
      pattern_.regex = std::make_shared<Regex>(kGpt2Pattern, "ByteLevel");
    }
  }
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    const auto& table = byte_level_table();
    for_each_piece(pieces, [&](Piece& p, std::vector<Piece>& out) {
      if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) p.text.insert(0, " ");
      const size_t first = out.size();
      if (pattern_.regex) {
        split_into(p, pattern_, SplitBehavior::Isolated, false, out);
      } else {
        out.push_back(std::move(p));
      }
      for (size_t k = first; k < out.size(); ++k) {
        std::string mapped;
        mapped.reserve(out[k].text.size() * 2);
        for (char c : out[k].text) mapped += table.byte_to_utf8[static_cast<unsigned char>(c)];
        out[k].text = std::move(mapped);
      }
    });
  }

 private:
  bool add_prefix_space_;
  Pattern pattern_;
};

class SplitPre final : public PreTokenizer {
 public:
  SplitPre(Pattern p, SplitBehavior b, bool invert)
      : pattern_(std::move(p)), behavior_(b), invert_(invert) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for_each_piece(pieces, [&](Piece& p, std::vector<Piece>& out) {
      split_into(p, pattern_, behavior_, invert_, out);
    });
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

enum class PrependScheme { First, Always, Never };

class MetaspacePre final : public PreTokenizer {
 public:
  MetaspacePre(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {
    split_pattern_.literal = replacement_;
    split_pattern_.is_literal = true;
    space_.literal = " ";
    space_.is_literal = true;
  }
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for_each_piece(pieces, [&](Piece& p, std::vector<Piece>& out) {
      p.text = replace_all(space_, p.text, replacement_);
      const bool starts = p.text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts &&
          (scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && p.at_start))) {
        p.text.insert(0, replacement_);
      }
      if (split_) {
        split_into(p, split_pattern_, SplitBehavior::MergedWithNext, false, out);
      } else {
        out.push_back(std::move(p));
      }
    });
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
  Pattern split_pattern_, space_;
};

class PredicatePre final : public PreTokenizer {
 public:
  PredicatePre(std::function<bool(char32_t)> pred, SplitBehavior b) : behavior_(b) {
    pattern_.predicate = std::move(pred);
  }
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for_each_piece(pieces, [&](Piece& p, std::vector<Piece>& out) {
      split_into(p, pattern_, behavior_, false, out);
    });
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
};

class WhitespacePre final : public PreTokenizer {
 public:
  WhitespacePre() { pattern_.regex = std::make_shared<Regex>("\\w+|[^\\w\\s]+", "Whitespace"); }
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for_each_piece(pieces, [&](Piece& p, std::vector<Piece>& out) {
      split_into(p, pattern_, SplitBehavior::Removed, true, out);
    });
  }

 private:
  Pattern pattern_;
};

class SequencePre final : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> v) : items_(std::move(v)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (const auto& p : items_) p->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> items_;
};

std::string single_char(const std::string& s, const std::string& where) {
  RINGLM_USER_CHECK(
      !s.empty() && is_valid_utf8(s) && utf8_len(static_cast<unsigned char>(s[0])) == s.size(),
      where, ": expected a single character, got '", s, "'");
  return s;
}

}  // namespace

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, where);
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPre>(get_bool_or(j, "add_prefix_space", true, where),
                                          get_bool_or(j, "use_regex", true, where));
  }
  if (type == "Split") {
    const json& beh = field(j, "behavior", where);
    return std::make_unique<SplitPre>(parse_pattern(field(j, "pattern", where), where + ".pattern"),
                                      parse_behavior(beh, where + ".behavior"),
                                      get_bool_or(j, "invert", false, where));
  }
  if (type == "Metaspace") {
    const std::string rep =
        single_char(get_string_or(j, "replacement", "\xE2\x96\x81", where), where + ".replacement");
    PrependScheme scheme = PrependScheme::Always;
    if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null()) {
      const std::string s = get_string(j, "prepend_scheme", where);
      if (s == "first") {
        scheme = PrependScheme::First;
      } else if (s == "always") {
        scheme = PrependScheme::Always;
      } else if (s == "never") {
        scheme = PrependScheme::Never;
      } else {
        RINGLM_USER_CHECK(false, where, ".prepend_scheme: unknown value '", s, "'");
      }
    } else if (!get_bool_or(j, "add_prefix_space", true, where)) {
      scheme = PrependScheme::Never;
    }
    return std::make_unique<MetaspacePre>(rep, scheme, get_bool_or(j, "split", true, where));
  }
  if (type == "Digits") {
    const bool individual = get_bool_or(j, "individual_digits", false, where);
    return std::make_unique<PredicatePre>(
        is_numeric, individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous);
  }
  if (type == "Punctuation") {
    SplitBehavior b = SplitBehavior::Isolated;
    if (j.contains("behavior")) b = parse_behavior(j["behavior"], where + ".behavior");
    return std::make_unique<PredicatePre>(is_punctuation, b);
  }
  if (type == "Whitespace") return std::make_unique<WhitespacePre>();
  if (type == "WhitespaceSplit") {
    return std::make_unique<PredicatePre>(is_whitespace, SplitBehavior::Removed);
  }
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> v;
    v.push_back(std::make_unique<PredicatePre>(is_whitespace, SplitBehavior::Removed));
    v.push_back(std::make_unique<PredicatePre>(is_punctuation, SplitBehavior::Isolated));
    return std::make_unique<SequencePre>(std::move(v));
  }
  if (type == "Sequence") {
    const json& items = field(j, "pretokenizers", where);
    RINGLM_USER_CHECK(items.is_array(), where, ".pretokenizers: expected an array");
    std::vector<std::unique_ptr<PreTokenizer>> v;
    for (size_t i = 0; i < items.size(); ++i) {
      auto p = parse_pre_tokenizer(items[i], where + ".pretokenizers[" + std::to_string(i) + "]");
      if (p) v.push_back(std::move(p));
    }
    return std::make_unique<SequencePre>(std::move(v));
  }
  RINGLM_USER_CHECK(false, where, ": unsupported pre_tokenizer type '", type, "'");
  return nullptr;
}

}  // namespace ringlm::tok
