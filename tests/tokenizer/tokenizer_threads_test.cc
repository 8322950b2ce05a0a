// Tokenizer is shared across request threads: concurrent encodes (sharing the BPE word cache) must
// give exactly the single-threaded ids. Most useful under -DRINGLM_TSAN=ON.
#include <gtest/gtest.h>

#include <thread>

#include "tokenizer/corpus.h"
#include "tokenizer/golden_util.h"

namespace ringlm {
namespace {

TEST(TokenizerThreads, ConcurrentEncodeMatchesSerial) {
  if (!test::have_tokenizer("qwen3")) GTEST_SKIP() << test::kNpmMissing;
  // A fresh instance so the word cache starts empty and threads race to fill it.
  const Tokenizer t = Tokenizer::load(test::tokenizer_dir("qwen3"));
  const auto corpus = test::read_corpus(std::string(RINGLM_FIXTURES_DIR) + "/tokenizer/corpus");
  std::vector<std::vector<int32_t>> got[4];
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (size_t i = 0; i < corpus.size(); ++i) {
        // Different threads walk the corpus in different orders.
        const size_t j = (k % 2 == 0) ? i : corpus.size() - 1 - i;
        got[k].push_back(t.encode(corpus[j].bytes, false));
      }
    });
  }
  for (auto& th : threads) th.join();
  const Tokenizer serial = Tokenizer::load(test::tokenizer_dir("qwen3"));
  for (size_t i = 0; i < corpus.size(); ++i) {
    const auto want = serial.encode(corpus[i].bytes, false);
    for (int k = 0; k < 4; ++k) {
      const size_t at = (k % 2 == 0) ? i : corpus.size() - 1 - i;
      ASSERT_EQ(got[k][at], want) << "thread " << k << " entry " << i;
    }
  }
}

}  // namespace
}  // namespace ringlm
