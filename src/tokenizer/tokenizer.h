// Hugging Face tokenizer.json + tokenizer_config.json, giving the same token ids as the HF
// `tokenizers` library (tests compare against its goldens) and streaming detokenization.
//
//   Tokenizer t = Tokenizer::load("/path/to/model");        // tokenizer.json (+ config, optional)
//   std::vector<int32_t> ids = t.encode("Hello", /*add_special_tokens=*/true);
//   std::string text = t.decode(ids, /*skip_special_tokens=*/false);
//   IncrementalDetokenizer d(t, /*skip_special_tokens=*/true);
//   for (int32_t id : generated) out << d.push(id);  out << d.flush();
//
// encode() accepts arbitrary bytes: invalid UTF-8 is first replaced by U+FFFD per maximal invalid
// subpart (what Python's bytes.decode("utf-8", "replace") gives HF). Special-token strings in the
// text become their ids (HF's default); pass parse_special=false to treat them as text.
// add_special_tokens applies tokenizer.json's post_processor, as the HF tokenizers library does;
// tokenizer_config.json's add_bos_token/add_eos_token are exposed in config() but not re-applied.
// Supported: model BPE; normalizers NFC/NFD/NFKC/NFKD, Lowercase, Replace, Prepend, Strip,
// Sequence; pre-tokenizers ByteLevel, Split, Metaspace, Digits, Punctuation, Whitespace,
// WhitespaceSplit, BertPreTokenizer, Sequence; post-processors TemplateProcessing,
// Bert/RobertaProcessing, ByteLevel, Sequence; decoders ByteLevel, Metaspace, ByteFallback, Fuse,
// Strip, Replace, Sequence. Anything else is a ringlm::Error naming the type and its place in the
// file. All const methods are thread-safe (the BPE word cache is internally locked).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_config.h"

namespace ringlm {

namespace tok {
class BpeModel;
class Normalizer;
class PreTokenizer;
class AddedVocab;
class PostProcessor;
class Decoder;
}  // namespace tok

class Tokenizer {
 public:
  // Reads model_dir/tokenizer.json and, when present, tokenizer_config.json and
  // chat_template.jinja (which then becomes the "default" chat template, as in transformers).
  static Tokenizer load(const std::string& model_dir);
  // From file contents; config_json may be empty. `where` prefixes error messages.
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view config_json = {},
                             const std::string& where = "tokenizer.json");

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true,
                              bool parse_special = true) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  int32_t token_to_id(std::string_view token) const;         // -1 if unknown
  std::optional<std::string> id_to_token(int32_t id) const;  // raw vocabulary string
  bool is_special(int32_t id) const;                         // a special added token
  size_t vocab_size() const;  // distinct tokens incl. added ones (HF get_vocab_size(True))
  int32_t max_token_id() const;

  int32_t bos_id() const { return bos_id_; }  // from tokenizer_config.json; -1 if none
  int32_t eos_id() const { return eos_id_; }
  const TokenizerConfig& config() const { return config_; }
  // The chat template with that name ("default" = the unnamed one); nullopt if absent.
  std::optional<std::string> chat_template(std::string_view name = "default") const;

  // The decoder pipeline (used by IncrementalDetokenizer).
  const tok::Decoder& decoder() const { return *decoder_; }
  const tok::AddedVocab& added_vocab() const { return *added_; }

 private:
  Tokenizer();
  std::unique_ptr<tok::Normalizer> normalizer_;
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer_;
  std::unique_ptr<tok::BpeModel> model_;
  std::unique_ptr<tok::AddedVocab> added_;
  std::unique_ptr<tok::PostProcessor> post_;
  std::unique_ptr<tok::Decoder> decoder_;
  TokenizerConfig config_;
  int32_t bos_id_ = -1, eos_id_ = -1, max_id_ = -1;
};

}  // namespace ringlm
