// Sampler: a plainly written reference of the documented processor order vs sampler.cc on random
// logits, the empirical distribution over many fixed seeds vs the computed probabilities
// (chi-square), seed reproducibility, Philox known answers, logprobs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "engine/philox.h"
#include "engine/sampler.h"

namespace ringlm::engine {
namespace {

// The documented order, one stage at a time, without sampler.cc's shortcuts (normalized
// probabilities after every stage, full sorts).
std::vector<double> reference_probs(std::vector<float> logits, const SamplingParams& p,
                                    const std::vector<int32_t>& prompt,
                                    const std::vector<int32_t>& generated,
                                    const std::vector<int32_t>& suppressed) {
  const size_t V = logits.size();
  for (int32_t id : suppressed) logits[static_cast<size_t>(id)] = -INFINITY;
  for (const auto& [id, b] : p.logit_bias) logits[static_cast<size_t>(id)] += b;
  std::set<int32_t> seen(prompt.begin(), prompt.end());
  seen.insert(generated.begin(), generated.end());
  for (int32_t id : seen) {
    float& l = logits[static_cast<size_t>(id)];
    l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
  }
  std::map<int32_t, int> counts;
  for (int32_t id : generated) ++counts[id];
  for (const auto& [id, n] : counts) {
    logits[static_cast<size_t>(id)] -= p.frequency_penalty * static_cast<float>(n);
    logits[static_cast<size_t>(id)] -= p.presence_penalty;
  }
  std::vector<double> prob(V);
  double mx = -INFINITY;
  for (float l : logits) mx = std::max(mx, static_cast<double>(l) / p.temperature);
  double sum = 0;
  for (size_t i = 0; i < V; ++i) sum += prob[i] = std::exp(logits[i] / double{p.temperature} - mx);
  const auto normalize = [&] {
    const double s = std::accumulate(prob.begin(), prob.end(), 0.0);
    for (double& x : prob) x /= s;
  };
  normalize();
  const double pmax = *std::max_element(prob.begin(), prob.end());
  for (double& x : prob) {
    if (x < p.min_p * pmax) x = 0;
  }
  normalize();
  std::vector<size_t> ids(V);
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](size_t a, size_t b) { return prob[a] > prob[b]; });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < V) {
    const double kth = prob[ids[static_cast<size_t>(p.top_k) - 1]];
    for (double& x : prob) {
      if (x < kth) x = 0;
    }
    normalize();
  }
  double before = 0;
  for (size_t id : ids) {
    const double x = prob[id];
    if (before >= p.top_p) prob[id] = 0;
    before += x;
  }
  normalize();
  return prob;
}

std::vector<float> random_logits(std::mt19937& rng, size_t vocab, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> logits(vocab);
  for (float& l : logits) l = normal(rng);
  return logits;
}

// got equals the reference: every probability within 1e-9, and zero exactly where it is zero.
::testing::AssertionResult matches_reference(const std::vector<double>& got,
                                             const std::vector<double>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " probabilities, want " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= 1e-9) || (got[i] == 0) != (want[i] == 0))
      return ::testing::AssertionFailure() << "id " << i << ": " << got[i] << ", want " << want[i];
  }
  return ::testing::AssertionSuccess();
}

TEST(Sampler, MatchesTheReferenceOnRandomLogits) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t vocab = 64 + static_cast<size_t>(trial % 5) * 37;
    auto logits = random_logits(rng, vocab, 1.0f + 3.0f * unit(rng));
    SamplingParams p;
    p.temperature = 0.3f + 1.5f * unit(rng);
    p.top_k = trial % 3 == 0 ? 0 : 1 + static_cast<int>(rng() % 40);
    p.top_p = trial % 4 == 0 ? 1.0f : 0.2f + 0.8f * unit(rng);
    p.min_p = trial % 5 == 0 ? 0.0f : 0.2f * unit(rng);
    p.repetition_penalty = trial % 2 == 0 ? 1.0f : 0.7f + unit(rng);
    p.presence_penalty = 2.0f * unit(rng) - 1.0f;
    p.frequency_penalty = 2.0f * unit(rng) - 1.0f;
    for (int i = 0; i < 4; ++i)
      p.logit_bias.push_back({static_cast<int32_t>(rng() % vocab), 10.0f * unit(rng) - 5.0f});
    std::vector<int32_t> prompt, generated, suppressed;
    for (int i = 0; i < 12; ++i) prompt.push_back(static_cast<int32_t>(rng() % vocab));
    for (int i = 0; i < 9; ++i) generated.push_back(static_cast<int32_t>(rng() % vocab));
    if (trial % 3 == 1) suppressed = {static_cast<int32_t>(rng() % vocab)};

    const auto want = reference_probs(logits, p, prompt, generated, suppressed);
    TokenHistory history(prompt);
    for (int32_t t : generated) history.add_generated(t);
    process_logits(logits, p, history, suppressed);
    const auto got = sampling_distribution(logits, p);
    ASSERT_TRUE(matches_reference(got, want)) << "trial " << trial;
  }
}

// top_p (and top_k) where many tokens share a weight: logits from a few integer levels, so the
// cut falls inside a run of ties, which are kept in id order.
TEST(Sampler, TopPWithManyTiesMatchesTheReference) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t vocab = 50 + static_cast<size_t>(trial % 7) * 41;
    std::vector<float> logits(vocab);
    for (float& l : logits) l = static_cast<float>(static_cast<int>(rng() % 5));
    SamplingParams p;
    p.temperature = 0.5f + unit(rng);
    p.top_p = 0.05f + 0.9f * unit(rng);
    p.top_k = trial % 4 == 0 ? 1 + static_cast<int>(rng() % 30) : 0;
    const auto want = reference_probs(logits, p, {}, {}, {});
    const auto got = sampling_distribution(logits, p);
    ASSERT_TRUE(matches_reference(got, want)) << "trial " << trial;
  }
}

// top_p where the mass sits in a wide tail far below the largest token (one token 8 above 20,000
// near-equal ones: the tokens within 10⁻³ of the largest weight do not carry the top_p mass, so
// the cut must be looked for among all) and where a few tokens carry it (peaked rows).
TEST(Sampler, TopPOnTailAndPeakedRowsMatchesTheReference) {
  std::mt19937 rng(13);
  std::normal_distribution<float> noise(0.0f, 0.1f);
  for (int trial = 0; trial < 6; ++trial) {
    const bool peaked = trial % 2 == 1;
    std::vector<float> logits(20000);
    for (float& l : logits) l = peaked ? 3.0f * noise(rng) : noise(rng);
    for (int i = 0; i < (peaked ? 10 : 1); ++i)
      logits[rng() % logits.size()] += peaked ? 14.0f : 8.0f;
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_p = 0.5f + 0.08f * static_cast<float>(trial);
    const auto want = reference_probs(logits, p, {}, {}, {});
    const auto got = sampling_distribution(logits, p);
    ASSERT_TRUE(matches_reference(got, want)) << "trial " << trial;
    const auto kept = std::count_if(got.begin(), got.end(), [](double v) { return v > 0; });
    // The tail rows keep thousands of tokens, the peaked ones at most their 10.
    EXPECT_TRUE(peaked ? kept <= 10 : kept > 1000) << "trial " << trial << " kept " << kept;
  }
}

TEST(Sampler, ManySeedsFollowTheDistribution) {
  // Fixed seeds 0..N-1: deterministic, and a chi-square far beyond the 1e-6 quantile of 7
  // degrees of freedom (~37) would mean the draws do not follow the probabilities.
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f, 0.0f, 2.2f, -3.0f, 0.7f, 1.1f};
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 9;
  p.top_p = 0.95f;
  p.min_p = 0.02f;
  const TokenHistory history;
  std::vector<float> processed = logits;
  process_logits(processed, p, history, {});
  const auto probs = sampling_distribution(processed, p);
  constexpr int kDraws = 40000;
  std::vector<int> counts(logits.size(), 0);
  for (uint64_t seed = 0; seed < kDraws; ++seed) {
    std::vector<float> row = logits;
    SampleInput in{&p, &history, {}, seed, 0, 0};
    ++counts[static_cast<size_t>(sample_token(row, in).token)];
  }
  double chi2 = 0;
  int cells = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (probs[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " was filtered out but drawn";
      continue;
    }
    const double expected = probs[i] * kDraws;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++cells;
  }
  const auto want = reference_probs(logits, p, {}, {}, {});
  EXPECT_EQ(cells, std::count_if(want.begin(), want.end(), [](double x) { return x > 0; }));
  EXPECT_LT(cells, 9);  // the filters removed something
  EXPECT_LT(chi2, 37.0);
}

TEST(Sampler, SameSeedSameTokensDifferentChoicesDiffer) {
  std::mt19937 rng(3);
  SamplingParams p;
  p.temperature = 1.0f;
  const TokenHistory history;
  int differ = 0;
  for (uint64_t index = 0; index < 64; ++index) {
    const auto logits = random_logits(rng, 100, 1.0f);
    auto a = logits, b = logits, c = logits;
    const int32_t ta = sample_token(a, {&p, &history, {}, 1234, 0, index}).token;
    const int32_t tb = sample_token(b, {&p, &history, {}, 1234, 0, index}).token;
    const int32_t tc = sample_token(c, {&p, &history, {}, 1234, 1, index}).token;
    EXPECT_EQ(ta, tb);
    differ += ta != tc;
  }
  EXPECT_GT(differ, 32);
}

TEST(Sampler, GreedyTakesTheLowestIdOfTheLargestProcessedLogit) {
  SamplingParams p;
  p.temperature = 0.0f;
  const TokenHistory history;
  std::vector<float> logits = {0.0f, 3.0f, 1.0f, 3.0f};
  EXPECT_EQ(sample_token(logits, {&p, &history, {}, 0, 0, 0}).token, 1);
  logits = {0.0f, 3.0f, 1.0f, 3.0f};
  p.logit_bias = {{3, 0.5f}};
  EXPECT_EQ(sample_token(logits, {&p, &history, {}, 0, 0, 0}).token, 3);
  logits = {0.0f, 3.0f, 1.0f, 3.0f};
  const std::vector<int32_t> banned = {1, 3};
  p.logit_bias.clear();
  EXPECT_EQ(sample_token(logits, {&p, &history, banned, 0, 0, 0}).token, 2);
}

TEST(Sampler, LogprobsAreTheLogSoftmaxOfTheProcessedLogits) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.logprobs = 3;
  p.presence_penalty = 1.0f;
  TokenHistory history;
  history.add_generated(2);
  const std::vector<float> logits = {0.5f, 1.5f, 2.0f, -1.0f, 1.0f};
  auto row = logits;
  const TokenInfo info = sample_token(row, {&p, &history, {}, 99, 0, 0});
  std::vector<double> processed(logits.begin(), logits.end());
  processed[2] -= 1.0;  // presence penalty; temperature does not enter logprobs
  double lse = 0;
  for (double l : processed) lse += std::exp(l);
  lse = std::log(lse);
  EXPECT_NEAR(info.logprob, processed[static_cast<size_t>(info.token)] - lse, 1e-6);
  ASSERT_EQ(info.top.size(), 3u);
  EXPECT_EQ(info.top[0].token, 1);
  EXPECT_EQ(info.top[1].token, 2);  // 1.0 ties with id 4: the lower id first
  EXPECT_EQ(info.top[2].token, 4);
  EXPECT_NEAR(info.top[0].logprob, processed[1] - lse, 1e-6);
}

TEST(Sampler, PhiloxKnownAnswers) {
  // Random123's kat_vectors for philox4x32_10.
  using A4 = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (A4{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}),
            (A4{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          {0xa4093822u, 0x299f31d0u}),
            (A4{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

}  // namespace
}  // namespace ringlm::engine
