// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): ByteLevel, Split, Metaspace, Digits,
// Punctuation, Whitespace, WhitespaceSplit, BertPreTokenizer, Sequence. They cut the pieces left
// between added tokens into words for the model, with HF tokenizers' semantics.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_util.h"

namespace ringlm::tok {

// A piece of the input on its way to the model. id >= 0: an added token (left alone).
struct Piece {
  std::string text;
  int32_t id = -1;
  bool at_start = false;  // begins at offset 0 of the original input (Metaspace "first")
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces every piece with id < 0 by its sub-pieces (empty ones dropped).
  virtual void pre_tokenize(std::vector<Piece>& pieces) const = 0;
};

// Returns nullptr for JSON null; throws ringlm::Error naming `where` for unknown types.
std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const json& j, const std::string& where);

}  // namespace ringlm::tok
