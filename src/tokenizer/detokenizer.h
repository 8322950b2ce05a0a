// Streaming detokenization: text for each generated token as soon as it is final.
// - Never emits broken UTF-8: incomplete multi-token characters wait for their last byte.
// - The concatenation of everything push() and flush() return equals Tokenizer::decode(all ids)
//   (decode runs the same pipeline), including HF's byte-fallback, Metaspace and Strip rules.
// - Byte-fallback runs (<0x..> tokens) are held until the run ends, because HF turns a whole run
//   into U+FFFD when any byte in it is invalid.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tokenizer/decoders.h"
#include "tokenizer/tokenizer.h"

namespace ringlm {

class IncrementalDetokenizer {
 public:
  // The tokenizer must outlive the detokenizer.
  explicit IncrementalDetokenizer(const Tokenizer& t, bool skip_special_tokens = false);
  std::string push(int32_t id);  // text made final by this token (possibly empty)
  std::string flush();           // end of stream: everything still held
  void reset();

 private:
  const Tokenizer* t_;
  bool skip_special_;
  std::unique_ptr<tok::DecodeStream> stream_;
};

}  // namespace ringlm
