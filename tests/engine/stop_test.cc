// StopChecker: text streamed token by token with stop strings held back, against the text the
// tokenizer decodes for the whole sequence.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/engine_test_util.h"
#include "engine/stop.h"

namespace ringlm::engine {
namespace {

using testing::fixture_tokenizer;

struct Streamed {
  std::string text;
  StopOutcome last;
  size_t tokens = 0;
  std::vector<std::string> so_far;  // emitted text after each token
};

Streamed stream(const std::vector<int32_t>& ids, const StopConditions& stop,
                const std::vector<int32_t>& eos = {2}) {
  StopChecker checker(fixture_tokenizer(), stop, eos);
  Streamed out;
  for (size_t i = 0; i < ids.size(); ++i) {
    out.last = checker.push(ids[i], static_cast<int64_t>(i) + 1);
    out.text += out.last.text;
    ++out.tokens;
    out.so_far.push_back(out.text);
    if (out.last.finish != FinishReason::None) return out;
  }
  out.last = checker.finish(FinishReason::Length);
  out.text += out.last.text;
  return out;
}

TEST(StopChecker, StopStringSpanningTokensIsCutAndNotEmitted) {
  const std::string text = "Hello world, this is a test of the stopping rules.";
  const auto ids = fixture_tokenizer().encode(text, false);
  ASSERT_EQ(fixture_tokenizer().decode(ids), text);
  StopConditions stop;
  stop.max_tokens = 1000;
  stop.stop_strings = {"is a te", "zzz"};
  const Streamed s = stream(ids, stop);
  EXPECT_EQ(s.last.finish, FinishReason::Stop);
  EXPECT_EQ(s.last.matched, "is a te");
  EXPECT_EQ(s.text, "Hello world, this ");  // emitted text only grows: never more than this
  EXPECT_LT(s.tokens, ids.size());
}

TEST(StopChecker, NearMissReleasesEverything) {
  const std::string text = "Hello world, this is a test of the stopping rules.";
  const auto ids = fixture_tokenizer().encode(text, false);
  StopConditions stop;
  stop.max_tokens = 1000;
  stop.stop_strings = {"is a tx", "rules.!"};
  const Streamed s = stream(ids, stop);
  EXPECT_EQ(s.last.finish, FinishReason::Length);
  EXPECT_EQ(s.text, text);
  // Held text goes out as soon as it can no longer start a stop string: "is a t" waits for the
  // next character, "rules." for the end.
  EXPECT_NE(std::find(s.so_far.begin(), s.so_far.end(), "Hello world, this is a test"),
            s.so_far.end());
  EXPECT_EQ(s.so_far.back(), "Hello world, this is a test of the stopping ");
}

TEST(StopChecker, MaxTokensAndStopIds) {
  const auto ids = fixture_tokenizer().encode("one two three four five six", false);
  ASSERT_GT(ids.size(), 5u);
  StopConditions stop;
  stop.max_tokens = 3;
  Streamed s = stream(ids, stop);
  EXPECT_EQ(s.last.finish, FinishReason::Length);
  EXPECT_EQ(s.tokens, 3u);
  EXPECT_EQ(s.text, fixture_tokenizer().decode({ids.begin(), ids.begin() + 3}));

  stop.max_tokens = 100;
  stop.stop_token_ids = {ids[3]};
  s = stream(ids, stop);
  EXPECT_EQ(s.last.finish, FinishReason::Stop);
  EXPECT_EQ(s.last.matched, "");
  EXPECT_EQ(s.tokens, 4u);
  EXPECT_EQ(s.text, fixture_tokenizer().decode({ids.begin(), ids.begin() + 3}));

  // EOS (id 2) ends the text unless ignore_eos.
  std::vector<int32_t> with_eos(ids.begin(), ids.begin() + 2);
  with_eos.push_back(2);
  with_eos.push_back(ids[2]);
  stop.stop_token_ids.clear();
  s = stream(with_eos, stop);
  EXPECT_EQ(s.last.finish, FinishReason::Stop);
  EXPECT_EQ(s.tokens, 3u);
  stop.ignore_eos = true;
  s = stream(with_eos, stop);
  EXPECT_EQ(s.last.finish, FinishReason::Length);
  EXPECT_EQ(s.tokens, 4u);
}

TEST(StopChecker, MinTokensDelaysStops) {
  const auto ids = fixture_tokenizer().encode("abc abc abc abc", false);
  StopConditions stop;
  stop.max_tokens = 100;
  stop.stop_strings = {"abc"};
  Streamed s = stream(ids, stop);
  EXPECT_EQ(s.text, "");
  stop.min_tokens = static_cast<int64_t>(ids.size());
  s = stream(ids, stop);
  // Checked once min_tokens tokens exist: earlier text went out unchecked.
  EXPECT_EQ(s.last.finish, FinishReason::Stop);
  EXPECT_EQ(s.text, "abc abc abc ");
}

}  // namespace
}  // namespace ringlm::engine
