// Pre-tokenizers, normalizers and split behaviors against the expected outputs of Hugging Face
// tokenizers' own unit tests (split.rs, metaspace.rs, digits.rs, punctuation.rs, whitespace.rs,
// byte_level.rs), which exercise components the npm tokenizer files do not use.
#include <gtest/gtest.h>

#include "tokenizer/normalizers.h"
#include "tokenizer/pre_tokenizers.h"

namespace ringlm::tok {
namespace {

std::vector<std::string> pre(const std::string& spec, const std::string& text,
                             bool at_start = true) {
  auto p = parse_pre_tokenizer(json::parse(spec), "test");
  std::vector<Piece> pieces{{text, -1, at_start}};
  p->pre_tokenize(pieces);
  std::vector<std::string> out;
  for (const auto& x : pieces) out.push_back(x.text);
  return out;
}

std::string norm(const std::string& spec, const std::string& text) {
  return parse_normalizer(json::parse(spec), "test")->normalize(text);
}

using V = std::vector<std::string>;

TEST(PreTokenizers, SplitBehaviorsInvertedWhitespaceRegex) {
  const std::string s = "How are you doing?";
  auto split = [&](const char* b) {
    return pre(
        std::string(R"({"type":"Split","pattern":{"Regex":"\\w+|[^\\w\\s]+"},"behavior":")") + b +
            R"(","invert":true})",
        s);
  };
  EXPECT_EQ(split("Removed"), (V{"How", "are", "you", "doing", "?"}));
  EXPECT_EQ(split("Isolated"), (V{"How", " ", "are", " ", "you", " ", "doing", "?"}));
  EXPECT_EQ(split("MergedWithPrevious"), (V{"How ", "are ", "you ", "doing", "?"}));
  EXPECT_EQ(split("MergedWithNext"), (V{"How", " are", " you", " doing", "?"}));
  EXPECT_EQ(split("Contiguous"), (V{"How", " ", "are", " ", "you", " ", "doing?"}));
}

TEST(PreTokenizers, SplitStringEqualsRegexAndInvert) {
  EXPECT_EQ(
      pre(R"({"type":"Split","pattern":{"Regex":"\\s+"},"behavior":"Removed","invert":false})",
          "Hey, man!"),
      pre(R"({"type":"Split","pattern":{"String":" "},"behavior":"Removed","invert":false})",
          "Hey, man!"));
  EXPECT_EQ(
      pre(R"({"type":"Split","pattern":{"String":"Hello"},"behavior":"Removed","invert":true})",
          "Hello Hello Hello"),
      pre(R"({"type":"Split","pattern":{"String":" "},"behavior":"Removed","invert":false})",
          "Hello Hello Hello"));
}

TEST(PreTokenizers, Metaspace) {
  const std::string always =
      R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true})";
  EXPECT_EQ(pre(always, "Hey friend!"), (V{"▁Hey", "▁friend!"}));
  EXPECT_EQ(pre(always, "Hey   friend!"), (V{"▁Hey", "▁", "▁", "▁friend!"}));
  EXPECT_EQ(pre(R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":false})",
                "Hey friend!"),
            (V{"▁Hey▁friend!"}));
  // "first": only the piece at the start of the input gets the prefix (HF checks the offset).
  const std::string first =
      R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true})";
  EXPECT_EQ(pre(first, "Hey friend", true), (V{"▁Hey", "▁friend"}));
  EXPECT_EQ(pre(first, "Hey friend", false), (V{"Hey", "▁friend"}));
  // Legacy add_prefix_space=false means "never".
  EXPECT_EQ(pre(R"({"type":"Metaspace","replacement":"_","add_prefix_space":false})", "a b"),
            (V{"a", "_b"}));
}

TEST(PreTokenizers, DigitsPunctuationWhitespace) {
  EXPECT_EQ(pre(R"({"type":"Digits","individual_digits":true})", "Hey 123 friend!"),
            (V{"Hey ", "1", "2", "3", " friend!"}));
  EXPECT_EQ(pre(R"({"type":"Digits","individual_digits":false})", "Hey 123 friend!"),
            (V{"Hey ", "123", " friend!"}));
  EXPECT_EQ(pre(R"({"type":"Punctuation"})", "Hey friend!     How are you?!?"),
            (V{"Hey friend", "!", "     How are you", "?", "!", "?"}));
  EXPECT_EQ(pre(R"({"type":"Whitespace"})", "Hey man!"), (V{"Hey", "man", "!"}));
  EXPECT_EQ(pre(R"({"type":"Whitespace"})", "Hey, man, Good?"),
            (V{"Hey", ",", "man", ",", "Good", "?"}));
  EXPECT_EQ(pre(R"({"type":"Whitespace"})", "\n"), V{});
  EXPECT_EQ(pre(R"({"type":"WhitespaceSplit"})", "Hey man!"), (V{"Hey", "man!"}));
  EXPECT_EQ(pre(R"({"type":"WhitespaceSplit"})", "Hey, man, Good?"), (V{"Hey,", "man,", "Good?"}));
}

TEST(PreTokenizers, ByteLevel) {
  EXPECT_EQ(pre(R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":true})",
                "Hello my friend, how is your day going?"),
            (V{"Hello", "Ġmy", "Ġfriend", ",", "Ġhow", "Ġis", "Ġyour", "Ġday", "Ġgoing", "?"}));
  EXPECT_EQ(pre(R"({"type":"ByteLevel","add_prefix_space":true,"use_regex":true})", "Hello"),
            (V{"ĠHello"}));
  // Multi-byte characters become one alphabet character per byte; \n -> Ċ.
  EXPECT_EQ(pre(R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":false})", "é\n"),
            (V{"Ã©Ċ"}));
}

TEST(PreTokenizers, SequenceAndUnknownType) {
  EXPECT_EQ(
      pre(R"({"type":"Sequence","pretokenizers":[{"type":"WhitespaceSplit"},{"type":"Digits","individual_digits":true}]})",
          "ab12 c"),
      (V{"ab", "1", "2", "c"}));
  try {
    pre(R"({"type":"Sequence","pretokenizers":[{"type":"WhitespaceSplit"},{"type":"Frobnicate"}]})",
        "x");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test.pretokenizers[1]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Frobnicate"), std::string::npos) << e.what();
  }
}

TEST(Normalizers, UnicodeForms) {
  EXPECT_EQ(norm(R"({"type":"NFC"})", "e\u0301cole"), "\u00e9cole");
  EXPECT_EQ(norm(R"({"type":"NFD"})", "\u00e9"), "e\u0301");
  EXPECT_EQ(norm(R"({"type":"NFKC"})", "\ufb01 \uff21 \u2460 x\u00b2"), "fi A 1 x2");
  EXPECT_EQ(norm(R"({"type":"NFKD"})", "\u00bd"), "1\u20442");
}

TEST(Normalizers, SimpleOnes) {
  EXPECT_EQ(norm(R"({"type":"Lowercase"})", "HeLLo ÉCOLE Σ İ"), "hello école σ i\u0307");
  EXPECT_EQ(norm(R"({"type":"Strip","strip_left":true,"strip_right":true})", " \t hi \u3000"),
            "hi");
  EXPECT_EQ(norm(R"({"type":"Strip","strip_left":false,"strip_right":true})", "  hi  "), "  hi");
  EXPECT_EQ(norm(R"({"type":"Prepend","prepend":"▁"})", "hi"), "▁hi");
  EXPECT_EQ(norm(R"({"type":"Prepend","prepend":"▁"})", ""), "");
  EXPECT_EQ(norm(R"({"type":"Replace","pattern":{"String":" "},"content":"▁"})", "a b  c"),
            "a▁b▁▁c");
  EXPECT_EQ(norm(R"({"type":"Replace","pattern":{"Regex":" {2,}"},"content":" "})", "a b    c"),
            "a b c");
  EXPECT_EQ(
      norm(
          R"({"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},{"type":"Replace","pattern":{"String":" "},"content":"▁"}]})",
          "Hey you"),
      "▁Hey▁you");
}

TEST(Normalizers, ErrorsNameTheField) {
  try {
    norm(R"({"type":"Replace","pattern":{"Regex":"(unclosed"},"content":""})", "x");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test.pattern.Regex"), std::string::npos) << e.what();
  }
  EXPECT_THROW(norm(R"({"type":"Precompiled"})", "x"), Error);
  EXPECT_THROW(norm(R"({"pattern":1})", "x"), Error);
}

}  // namespace
}  // namespace ringlm::tok
