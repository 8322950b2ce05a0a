// Real tokenizer files (npm fixtures): tokenizer_config.json fields and streaming of characters
// that span several tokens (byte-fallback runs in Llama 2, split UTF-8 bytes in byte-level BPE).
#include <gtest/gtest.h>

#include "tokenizer/detokenizer.h"
#include "tokenizer/golden_util.h"

namespace ringlm {
namespace {

TEST(RealTokenizers, ConfigSpecialTokens) {
  for (const char* n : {"llama3", "qwen3", "gemma3", "llama2"}) {
    if (!test::have_tokenizer(n)) GTEST_SKIP() << test::kNpmMissing;
  }
  const Tokenizer& llama3 = test::cached_tokenizer("llama3");
  EXPECT_EQ(llama3.bos_id(), 128000);  // <|begin_of_text|>
  EXPECT_EQ(llama3.eos_id(), 128001);  // <|end_of_text|>
  ASSERT_TRUE(llama3.chat_template().has_value());
  EXPECT_NE(llama3.chat_template()->find("<|start_header_id|>"), std::string::npos);

  const Tokenizer& qwen3 = test::cached_tokenizer("qwen3");
  EXPECT_EQ(qwen3.bos_id(), -1);      // "bos_token": null
  EXPECT_EQ(qwen3.eos_id(), 151645);  // <|im_end|>
  EXPECT_EQ(qwen3.config().add_bos_token, false);
  EXPECT_EQ(qwen3.config().model_max_length, 131072.0);
  EXPECT_TRUE(qwen3.is_special(151645));
  EXPECT_FALSE(qwen3.is_special(qwen3.token_to_id("<think>")));  // added, not special

  const Tokenizer& gemma3 = test::cached_tokenizer("gemma3");
  EXPECT_EQ(gemma3.bos_id(), 2);
  EXPECT_EQ(gemma3.id_to_token(gemma3.eos_id()), "<end_of_turn>");
  EXPECT_EQ(gemma3.config().add_bos_token, true);
  EXPECT_EQ(gemma3.encode("hi", true).front(), 2);

  const Tokenizer& llama2 = test::cached_tokenizer("llama2");
  // (This package's "llama2" file has Mistral-7B's vocabulary; ids come from the file.)
  EXPECT_EQ(llama2.encode("Hello", true),
            (std::vector<int32_t>{1, llama2.token_to_id("\xE2\x96\x81Hello")}));
  EXPECT_EQ(llama2.vocab_size(), 32000u);
}

TEST(RealTokenizers, StreamsByteFallbackRunsWhole) {
  if (!test::have_tokenizer("llama2")) GTEST_SKIP() << test::kNpmMissing;
  const Tokenizer& t = test::cached_tokenizer("llama2");
  const std::string text = "a \xF0\x9D\x94\xA0 b";  // 𝔠 is not in the Llama 2 vocabulary
  const auto ids = t.encode(text, false);
  IncrementalDetokenizer d(t);
  std::string out;
  size_t bytes_seen = 0;
  for (int32_t id : ids) {
    const auto tokstr = t.id_to_token(id).value();
    const bool byte_token = tokstr.size() == 6 && tokstr.rfind("<0x", 0) == 0;
    const std::string piece = d.push(id);
    if (byte_token) {
      ++bytes_seen;
      EXPECT_EQ(piece, "") << "a byte-fallback run is held until it ends";
    }
    out += piece;
  }
  EXPECT_EQ(bytes_seen, 4u);
  out += d.flush();
  EXPECT_EQ(out, t.decode(ids));
  EXPECT_EQ(out, "a \xF0\x9D\x94\xA0 b");
}

TEST(RealTokenizers, StreamsSplitUtf8InByteLevel) {
  if (!test::have_tokenizer("llama3")) GTEST_SKIP() << test::kNpmMissing;
  const Tokenizer& t = test::cached_tokenizer("llama3");
  // A rare CJK extension-B character: several byte-level tokens for one character.
  const std::string text = "\xF0\xA0\x80\x8B!";
  const auto ids = t.encode(text, false);
  ASSERT_GE(ids.size(), 3u);
  IncrementalDetokenizer d(t);
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(d.push(id));
  pieces.push_back(d.flush());
  std::string out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_TRUE(pieces[i].empty() || pieces[i].find("\xF0\xA0\x80\x8B") != std::string::npos ||
                pieces[i] == "!")
        << "piece " << i << " splits the character";
    out += pieces[i];
  }
  EXPECT_EQ(out, text);
}

}  // namespace
}  // namespace ringlm
