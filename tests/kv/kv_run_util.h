// One sequence run alone through an engine::Runner, chunk by chunk, and logits compared bit for
// bit: the serial oracle of the KV tests under real models.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "engine/runner.h"
#include "kv/step_plan.h"
#include "models/model.h"

namespace ringlm::testing {

using Logits = std::vector<std::vector<float>>;  // [position][vocab]

// The row of a step that runs tokens [done, done + n) of `seq`, with logits for every token.
inline kv::RowRequest chunk_row(kv::SequenceId seq, const std::vector<int32_t>& tokens, size_t done,
                                size_t n) {
  return {seq,
          {tokens.begin() + static_cast<int64_t>(done),
           tokens.begin() + static_cast<int64_t>(done + n)},
          static_cast<int64_t>(done),
          true,
          true};
}

// Appends the first n rows of a step's logits (F32[≥ n, vocab]) to out.
inline void append_logits(const Tensor& logits, size_t n, int64_t vocab, Logits& out) {
  for (size_t i = 0; i < n; ++i) {
    const float* p = logits.row<float>(static_cast<int64_t>(i));
    out.emplace_back(p, p + vocab);
  }
}

// Logits of every position of `tokens` run alone, prefilled in the given chunk sizes (the last
// one repeats: {20, 1} is a prefill of 20, then decode). The pools end empty.
inline Logits run_chunks(models::Model& model, const engine::RunnerConfig& rc,
                         const std::vector<int32_t>& tokens, const std::vector<size_t>& chunks) {
  engine::Runner runner(model, rc);
  auto& cache = runner.cache();
  const auto seq = cache.add_sequence();
  Logits out;
  size_t done = 0;
  for (size_t c = 0; done < tokens.size(); ++c) {
    const size_t n = std::min(chunks[std::min(c, chunks.size() - 1)], tokens.size() - done);
    EXPECT_TRUE(cache.append(seq, static_cast<int64_t>(n)));
    kv::StepPlan plan({chunk_row(seq, tokens, done, n)}, cache);
    append_logits(runner.step(plan), n, model.vocab_size(), out);
    done += n;
  }
  cache.release(seq);
  EXPECT_EQ(cache.used_blocks(), 0);
  return out;
}

inline bool same_logits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline void expect_same_logits(const Logits& got, const Logits& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t p = 0; p < want.size(); ++p) {
    ASSERT_EQ(got[p].size(), want[p].size()) << what << " position " << p;
    ASSERT_TRUE(same_logits(got[p], want[p])) << what << ": logits differ at position " << p;
  }
}

}  // namespace ringlm::testing
