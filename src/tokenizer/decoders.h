// Decoders of tokenizer.json ("decoder"): ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace,
// Sequence. They are implemented as a streaming pipeline: tokens go in one at a time and text comes
// out as soon as it is final. Tokenizer::decode runs the same pipeline over all tokens, so a
// stream's concatenated output equals decode() by construction.
//
// Streaming holds back only what HF's whole-sequence semantics could still change: an incomplete
// UTF-8 sequence (ByteLevel), a run of <0xXX> byte tokens until it ends (ByteFallback turns a whole
// run into U+FFFD if any part is invalid), trailing characters a Strip(stop) might remove, and the
// tail of a fused text that could begin a Replace pattern.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_util.h"

namespace ringlm::tok {

class DecoderStage {
 public:
  virtual ~DecoderStage() = default;
  virtual std::unique_ptr<DecoderStage> clone() const = 0;  // same config, fresh state
  // Consumes one token (token mode) or one fragment of the fused text (after Fuse/ByteLevel).
  virtual void push(std::string&& s, std::vector<std::string>& out) = 0;
  virtual void flush(std::vector<std::string>& out) = 0;
};

class Decoder {
 public:
  // j may be null (HF then joins tokens with spaces). Unknown types -> ringlm::Error naming where.
  static Decoder parse(const json& j, const std::string& where);
  Decoder() = default;
  Decoder(Decoder&&) = default;
  Decoder& operator=(Decoder&&) = default;
  Decoder clone() const;

  std::vector<std::unique_ptr<DecoderStage>> stages;
};

// A streaming decode: push token strings, get final text back.
class DecodeStream {
 public:
  explicit DecodeStream(const Decoder& d) : d_(d.clone()) {}
  std::string push(std::string token);
  std::string flush();

 private:
  void run(size_t stage, std::string&& s, std::string& sink);
  Decoder d_;
};

}  // namespace ringlm::tok
