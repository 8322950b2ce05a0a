// Normalizers of tokenizer.json ("normalizer"): NFC/NFD/NFKC/NFKD, Lowercase, Replace, Prepend,
// Strip, Sequence. Each maps valid UTF-8 text to valid UTF-8 text, as HF's NormalizedString does
// (offsets are not tracked: ringlm needs ids, not alignments).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/json_util.h"

namespace ringlm::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string_view s) const = 0;
};

// Throws ringlm::Error naming `where` and the type for unknown or malformed normalizers.
// Returns nullptr for JSON null.
std::unique_ptr<Normalizer> parse_normalizer(const json& j, const std::string& where);

}  // namespace ringlm::tok
