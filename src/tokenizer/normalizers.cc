#include "tokenizer/normalizers.h"

#include <vector>

#include "tokenizer/unicode.h"

namespace ringlm::tok {

Pattern parse_pattern(const json& j, const std::string& where) {
  RINGLM_USER_CHECK(j.is_object() && j.size() == 1, where,
                    ": expected a pattern {\"String\": ...} or {\"Regex\": ...}");
  Pattern p;
  if (j.contains("String")) {
    RINGLM_USER_CHECK(j["String"].is_string(), where, ".String: expected a string");
    p.literal = j["String"].get<std::string>();
    RINGLM_USER_CHECK(is_valid_utf8(p.literal), where, ".String: not valid UTF-8");
    p.is_literal = true;
  } else if (j.contains("Regex")) {
    RINGLM_USER_CHECK(j["Regex"].is_string(), where, ".Regex: expected a string");
    p.regex = std::make_shared<Regex>(j["Regex"].get<std::string>(), where + ".Regex");
  } else {
    RINGLM_USER_CHECK(false, where, ": unknown pattern kind '", j.begin().key(), "'");
  }
  return p;
}

SplitBehavior parse_behavior(const json& j, const std::string& where) {
  RINGLM_USER_CHECK(j.is_string(), where, ": expected a split behavior name");
  const std::string s = j.get<std::string>();
  if (s == "Removed") return SplitBehavior::Removed;
  if (s == "Isolated") return SplitBehavior::Isolated;
  if (s == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (s == "Contiguous") return SplitBehavior::Contiguous;
  RINGLM_USER_CHECK(false, where, ": unknown split behavior '", s, "'");
  return SplitBehavior::Isolated;
}

namespace {

class UnicodeNorm final : public Normalizer {
 public:
  explicit UnicodeNorm(NormForm f) : form_(f) {}
  std::string normalize(std::string_view s) const override { return normalize_unicode(s, form_); }

 private:
  NormForm form_;
};

class Lowercase final : public Normalizer {
 public:
  std::string normalize(std::string_view s) const override { return to_lower(s); }
};

class Replace final : public Normalizer {
 public:
  Replace(Pattern p, std::string content) : pattern_(std::move(p)), content_(std::move(content)) {}
  std::string normalize(std::string_view s) const override {
    return replace_all(pattern_, s, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string p) : prepend_(std::move(p)) {}
  std::string normalize(std::string_view s) const override {
    if (s.empty()) return {};
    std::string out = prepend_;
    out.append(s);
    return out;
  }

 private:
  std::string prepend_;
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string_view s) const override {
    size_t b = 0, e = s.size();
    if (left_) {
      while (b < e) {
        size_t i = b;
        if (!is_whitespace(next_cp(s, i))) break;
        b = i;
      }
    }
    if (right_) {
      while (e > b) {
        size_t start = e - 1;
        while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
        size_t i = start;
        if (!is_whitespace(next_cp(s, i))) break;
        e = start;
      }
    }
    return std::string(s.substr(b, e - b));
  }

 private:
  bool left_, right_;
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> n) : items_(std::move(n)) {}
  std::string normalize(std::string_view s) const override {
    std::string cur(s);
    for (const auto& n : items_) cur = n->normalize(cur);
    return cur;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> items_;
};

}  // namespace

std::unique_ptr<Normalizer> parse_normalizer(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, where);
  if (type == "NFC") return std::make_unique<UnicodeNorm>(NormForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNorm>(NormForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNorm>(NormForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNorm>(NormForm::NFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Replace") {
    return std::make_unique<Replace>(parse_pattern(field(j, "pattern", where), where + ".pattern"),
                                     get_string(j, "content", where));
  }
  if (type == "Prepend") return std::make_unique<Prepend>(get_string(j, "prepend", where));
  if (type == "Strip") {
    return std::make_unique<Strip>(get_bool_or(j, "strip_left", false, where),
                                   get_bool_or(j, "strip_right", false, where));
  }
  if (type == "Sequence") {
    const json& items = field(j, "normalizers", where);
    RINGLM_USER_CHECK(items.is_array(), where, ".normalizers: expected an array");
    std::vector<std::unique_ptr<Normalizer>> v;
    for (size_t i = 0; i < items.size(); ++i) {
      auto n = parse_normalizer(items[i], where + ".normalizers[" + std::to_string(i) + "]");
      if (n) v.push_back(std::move(n));
    }
    return std::make_unique<Sequence>(std::move(v));
  }
  RINGLM_USER_CHECK(false, where, ": unsupported normalizer type '", type, "'");
  return nullptr;
}

}  // namespace ringlm::tok
