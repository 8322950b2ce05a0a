// Tokenizer pieces the npm files do not cover, on small hand-made tokenizer.json files: BPE options
// (expected values from HF tokenizers' model.rs tests), added-token matching (HF's
// added_vocabulary.rs tests), post-processing, decoders (HF's decoder tests), the incremental
// detokenizer, tokenizer_config.json, invalid UTF-8 input, and error messages.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace ringlm {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

json vocab_of(const std::vector<std::string>& toks) {
  json v = json::object();
  for (size_t i = 0; i < toks.size(); ++i) v[toks[i]] = i;
  return v;
}

json base(const std::vector<std::string>& toks, json merges = json::array()) {
  return {{"version", "1.0"},
          {"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model", {{"type", "BPE"}, {"vocab", vocab_of(toks)}, {"merges", merges}}}};
}

Tokenizer make(const json& j, const std::string& config = "") {
  return Tokenizer::from_json(j.dump(), config);
}

json added(const std::string& content, int id, bool special, json extra = json::object()) {
  json a = {{"id", id},        {"content", content},     {"single_word", false}, {"lstrip", false},
            {"rstrip", false}, {"normalized", !special}, {"special", special}};
  for (auto& [k, v] : extra.items()) a[k] = v;
  return a;
}

TEST(BpeModel, ContinuingSubwordPrefix) {
  json j =
      base({"a", "##b", "##c", "ab", "abc"}, json::array({"a ##b", json::array({"ab", "##c"})}));
  j["model"]["continuing_subword_prefix"] = "##";
  j["model"]["unk_token"] = "[UNK]";
  const Tokenizer t = make(j);
  EXPECT_EQ(t.encode("ab", false), (Ids{3}));
  EXPECT_EQ(t.encode("abc", false), (Ids{4}));
}

TEST(BpeModel, EndOfWordSuffix) {
  json j = base({"a", "b</w>", "ab</w>", "b"}, json::array({"a b</w>"}));
  j["model"]["end_of_word_suffix"] = "</w>";
  const Tokenizer t = make(j);
  EXPECT_EQ(t.encode("ab", false), (Ids{2}));
  EXPECT_EQ(t.encode("ba", false), (Ids{3}));  // a final "a" needs "a</w>": dropped (no unk)
}

TEST(BpeModel, UnknownTokensFusedOrNot) {
  json j = base({"<unk>", "a", "b"});
  j["model"]["unk_token"] = "<unk>";
  EXPECT_EQ(make(j).encode("accb", false), (Ids{1, 0, 0, 2}));
  j["model"]["fuse_unk"] = true;
  EXPECT_EQ(make(j).encode("accb", false), (Ids{1, 0, 2}));
  EXPECT_EQ(make(j).encode("cc", false), (Ids{0}));
}

TEST(BpeModel, ByteFallback) {
  json j = base({"<unk>", "<0x61>", "<0xC3>", "<0xA9>"});
  j["model"]["unk_token"] = "<unk>";
  j["model"]["byte_fallback"] = true;
  const Tokenizer t = make(j);
  EXPECT_EQ(t.encode("c", false), (Ids{0}));  // no byte token for 'c' -> unk
  EXPECT_EQ(t.encode("a", false), (Ids{1}));
  EXPECT_EQ(t.encode("é", false), (Ids{2, 3}));  // both bytes exist
}

TEST(BpeModel, MergePriorityAndIgnoreMerges) {
  // Ranks: "b c" (0) before "a b" (1): "abc" -> a + bc, never ab + c.
  json j = base({"a", "b", "c", "ab", "bc", "abc"}, json::array({"b c", "a b"}));
  EXPECT_EQ(make(j).encode("abc", false), (Ids{0, 4}));
  j["model"]["ignore_merges"] = true;  // a word in the vocabulary is taken whole
  EXPECT_EQ(make(j).encode("abc", false), (Ids{5}));
  // Long words use the heap path; same result as repeated lowest-rank merging.
  json k = base({"a", "aa", "aaaa"}, json::array({"a a", "aa aa"}));
  EXPECT_EQ(make(k).encode(std::string(9, 'a'), false), (Ids{2, 2, 0}));
  EXPECT_EQ(make(k).encode(std::string(41, 'a'), false).size(), 11u);
}

TEST(AddedTokens, OptionsLikeHf) {
  // HF added_vocabulary.rs "options_use_cases": lowercase normalizer; "my" lstrip+rstrip,
  // "ony" single_word, [CLS]/[SEP] special.
  std::vector<std::string> chars;
  for (char c = 'a'; c <= 'z'; ++c) chars.push_back(std::string(1, c));
  chars.push_back(" ");
  json j = base(chars);
  j["normalizer"] = {{"type", "Lowercase"}};
  j["added_tokens"] =
      json::array({added("my", 27, false, {{"lstrip", true}, {"rstrip", true}}),
                   added("name", 28, false), added("ony", 29, false, {{"single_word", true}}),
                   added("[CLS]", 30, true), added("[SEP]", 31, true)});
  const Tokenizer t = make(j);
  const Ids ids = t.encode("[CLS] My name is Anthony [SEP]", false);
  Ids want = {30, 27, 28};
  for (char c : std::string(" is anthony ")) want.push_back(c == ' ' ? 26 : c - 'a');
  want.push_back(31);
  EXPECT_EQ(ids, want);
  // parse_special=false: special tokens are plain text (lowercased by the normalizer here).
  const Ids plain = t.encode("[CLS]", false, false);
  EXPECT_EQ(plain.size(), 3u);  // "[" and "]" are not in the vocabulary: only c, l, s remain
}

TEST(AddedTokens, SingleWordAndUnicodeSpaces) {
  std::vector<std::string> chars;
  for (char c = 'a'; c <= 'z'; ++c) chars.push_back(std::string(1, c));
  for (const char* s : {" ", "\t", "\u2000", "<", ">", ","}) chars.push_back(s);
  json j = base(chars);
  j["added_tokens"] = json::array({added("<mask>", 40, false, {{"single_word", true}})});
  const Tokenizer t = make(j);
  // HF gives an added token outside the vocabulary the next free id (not the listed 40).
  const int32_t mask = t.token_to_id("<mask>");
  EXPECT_EQ(mask, 32);
  // "<mask> my name <mask> a<mask> <mask>ony <mask>": only the free-standing ones match.
  const Ids ids = t.encode("<mask> my name <mask> a<mask> <mask>ony <mask>", false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), mask), 3);
  json k = base(chars);
  k["added_tokens"] = json::array(
      {added("<mask>", 40, false, {{"single_word", true}, {"lstrip", true}, {"rstrip", true}})});
  // HF: "hi", " <mask> ", "there", "\t<mask>\t", "<mask>\u2000" -> whitespace is absorbed.
  const Ids k_ids = make(k).encode("hi <mask> there\t<mask>\t<mask>\u2000", false);
  Ids want = {7, 8, mask, 19, 7, 4, 17, 4, mask, mask};
  EXPECT_EQ(k_ids, want);
}

TEST(PostProcessor, TemplateAndConfig) {
  json j = base({"<s>", "</s>", "a"});
  j["added_tokens"] = json::array({added("<s>", 0, true), added("</s>", 1, true)});
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                              {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}})},
      {"pair", json::array()},
      {"special_tokens",
       {{"<s>", {{"id", "<s>"}, {"ids", {0}}, {"tokens", {"<s>"}}}},
        {"</s>", {{"id", "</s>"}, {"ids", {1}}, {"tokens", {"</s>"}}}}}}};
  const std::string config = R"({"bos_token": {"content": "<s>", "__type": "AddedToken"},
      "eos_token": "</s>", "add_bos_token": true, "model_max_length": 1e30,
      "chat_template": [{"name": "default", "template": "{{ x }}"}, {"name": "tool_use", "template": "T"}]})";
  const Tokenizer t = make(j, config);
  EXPECT_EQ(t.encode("aa", true), (Ids{0, 2, 2, 1}));
  EXPECT_EQ(t.encode("aa", false), (Ids{2, 2}));
  EXPECT_EQ(t.bos_id(), 0);
  EXPECT_EQ(t.eos_id(), 1);
  EXPECT_EQ(t.config().add_bos_token, true);
  EXPECT_EQ(t.chat_template("tool_use"), "T");
  EXPECT_EQ(t.chat_template(), "{{ x }}");
  EXPECT_FALSE(t.chat_template("missing").has_value());
  EXPECT_GT(*t.config().model_max_length, 1e29);
  EXPECT_EQ(t.decode(Ids{0, 2, 1}, true), "a");
  EXPECT_EQ(t.decode(Ids{0, 2, 1}, false), "<s> a </s>");  // no decoder: HF joins with spaces
}

json metaspace_tokenizer() {
  json j = base({"<unk>", "<s>", "▁Hey", "▁friend", "!", "<0xE5>", "<0x8F>", "<0xAB>", "▁"});
  j["model"]["unk_token"] = "<unk>";
  j["model"]["byte_fallback"] = true;
  j["added_tokens"] = json::array({added("<s>", 1, true)});
  j["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", false}};
  j["decoder"] = {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", false}};
  return j;
}

TEST(Decoders, MetaspaceLeadingSpaceAndStream) {
  const Tokenizer t = make(metaspace_tokenizer());
  // HF: the first token (after skipped specials) loses its ▁, later ones become spaces.
  EXPECT_EQ(t.decode(Ids{2, 3, 4}), "Hey friend!");
  EXPECT_EQ(t.decode(Ids{1, 2, 3}, true), "Hey friend");
  EXPECT_EQ(t.decode(Ids{1, 2, 3}, false), "<s> Hey friend");
  IncrementalDetokenizer d(t, true);
  EXPECT_EQ(d.push(1), "");
  EXPECT_EQ(d.push(2), "Hey");
  EXPECT_EQ(d.push(3), " friend");
  EXPECT_EQ(d.flush(), "");
}

TEST(Decoders, ByteFallbackRuns) {
  json j = base({"<unk>", "a", "<0x61>", "<0xE5>", "<0x8F>", "<0xAB>"});
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", json::array({{{"type", "ByteFallback"}}, {{"type", "Fuse"}}})}};
  const Tokenizer t = make(j);
  // HF byte_fallback.rs: a complete run is one character, an invalid run one U+FFFD per byte.
  EXPECT_EQ(t.decode(Ids{2}), "a");
  EXPECT_EQ(t.decode(Ids{3}), "\uFFFD");
  EXPECT_EQ(t.decode(Ids{3, 4}), "\uFFFD\uFFFD");
  EXPECT_EQ(t.decode(Ids{3, 4, 5}), "叫");
  EXPECT_EQ(t.decode(Ids{3, 4, 5, 1}), "叫a");
  EXPECT_EQ(t.decode(Ids{3, 4, 1}), "\uFFFD\uFFFDa");
  // Streaming: nothing until the run ends or completes a character.
  IncrementalDetokenizer d(t);
  EXPECT_EQ(d.push(3), "");
  EXPECT_EQ(d.push(4), "");
  EXPECT_EQ(d.push(5), "");  // held until the run ends (a later invalid byte would change it)
  EXPECT_EQ(d.push(1), "叫a");
  EXPECT_EQ(d.push(3), "");
  EXPECT_EQ(d.flush(), "\uFFFD");
}

TEST(Decoders, StripReplaceFuse) {
  json j = base({"▁Hello", "▁world", "▁", "x"});
  j["decoder"] = {
      {"type", "Sequence"},
      {"decoders",
       json::array({{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                    {{"type", "Fuse"}},
                    {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 1}}})}};
  const Tokenizer t = make(j);
  EXPECT_EQ(t.decode(Ids{0, 1}), "Hello world");
  EXPECT_EQ(t.decode(Ids{0, 2}), "Hello");  // trailing space stripped (stop=1)
  EXPECT_EQ(t.decode(Ids{2, 2, 3}), " x");  // only one leading space stripped (start=1)
  IncrementalDetokenizer d(t);
  std::string s = d.push(0);
  EXPECT_EQ(s, "Hello");
  EXPECT_EQ(d.push(2), "");  // may be the trailing space
  EXPECT_EQ(d.push(3), " x");
  EXPECT_EQ(d.flush(), "");
}

TEST(Decoders, ByteLevelPartialCharacters) {
  // GPT-2 byte alphabet: "æ" = byte 0xE6, "ĸ" = 0x96, "ĩ" = 0x87 (together: 文).
  json j = base({"æ", "ĸ", "ĩ", "a"});
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}};
  const Tokenizer t = make(j);
  EXPECT_EQ(t.decode(Ids{0, 1, 2}), "文");
  EXPECT_EQ(t.decode(Ids{0, 1, 3}), "\uFFFDa");  // truncated sequence -> one U+FFFD
  IncrementalDetokenizer d(t);
  EXPECT_EQ(d.push(0), "");
  EXPECT_EQ(d.push(1), "");
  EXPECT_EQ(d.push(2), "文");
  EXPECT_EQ(d.push(0), "");
  EXPECT_EQ(d.flush(), "\uFFFD");
}

TEST(Tokenizer, InvalidUtf8IsReplacedLikePython) {
  // Python: b"...".decode("utf-8", "replace"), one U+FFFD per maximal invalid subpart.
  EXPECT_EQ(tok::to_valid_utf8("\xF0\x9F\x98x"), "\uFFFDx");
  EXPECT_EQ(tok::to_valid_utf8("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(tok::to_valid_utf8("\xC0\xAF"), "\uFFFD\uFFFD");
  EXPECT_EQ(tok::to_valid_utf8("\xE2\x28\xA1"), "\uFFFD(\uFFFD");
  EXPECT_EQ(tok::to_valid_utf8("\xF4\x90\x80\x80"), "\uFFFD\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(tok::to_valid_utf8("ok é"), "ok é");
  EXPECT_EQ(tok::complete_utf8_prefix("ab\xE6\x96"), 2u);
  EXPECT_EQ(tok::complete_utf8_prefix("ab\xE6\x96\x89"), 5u);
}

TEST(Tokenizer, ErrorsNameFileFieldAndType) {
  auto message = [](const std::string& text) {
    try {
      Tokenizer::from_json(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  json j = base({"a"});
  j["decoder"] = {{"type", "WordPiece"}};
  EXPECT_NE(message(j.dump()).find("tokenizer.json.decoder: unsupported decoder type 'WordPiece'"),
            std::string::npos);
  j = base({"a"});
  j["model"]["type"] = "Unigram";
  EXPECT_NE(message(j.dump()).find("unsupported model type 'Unigram'"), std::string::npos);
  j = base({"a", "b"}, json::array({"a c"}));
  EXPECT_NE(message(j.dump()).find("merges[0]: token 'c' is not in the vocabulary"),
            std::string::npos);
  j = base({"a"});
  j["model"]["dropout"] = 0.1;
  EXPECT_NE(message(j.dump()).find("dropout"), std::string::npos);
  // A sparse id far past the entries: a clear error, not a multi-gigabyte table (fuzzer finding).
  j = base({"a"});
  j["model"]["vocab"]["b"] = 1000000000;
  EXPECT_NE(message(j.dump()).find("id 1000000000 is far beyond its 2 entries"), std::string::npos);
  j = base({"a"});
  j["model"]["vocab"]["b"] = 1000;  // a small gap still loads
  EXPECT_EQ(message(j.dump()), "no error");
  EXPECT_NE(message("{not json").find("invalid JSON"), std::string::npos);
  EXPECT_NE(message("[]").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(message("{}").find("missing field 'model'"), std::string::npos);
  EXPECT_THROW(Tokenizer::load("/nonexistent/dir"), Error);
}

}  // namespace
}  // namespace ringlm
