// Sampling on the GPU (cuda::sample) against the host sampler (engine/sampler.h: the same rules,
// other summation orders). Oracle: for every job the device token equals the host's token — or,
// where they differ, the host gives the device's token once u or top_p moves by rounding's
// width (u · (1 ± 1e-9), top_p to its float neighbours): a boundary case, at most 1 % of the
// jobs. A wrong threshold, cut, tie order or scan misses by far more than that.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "core/error.h"
#include "cuda_test_util.h"
#include "engine/sampler.h"

namespace ringlm::cuda {
namespace {

using ops::testing::OnDevice;
using ops::testing::Owned;

// Host rows of V logits: normal (scale 3), ties (normal rounded to steps of 0.5), every third
// -inf, one peaked token (+20 over the normal ones).
Owned make_rows(int64_t V, uint32_t seed) {
  Owned rows(DType::F32, {4, V});
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  float* p = rows.t().ptr<float>();
  for (int64_t i = 0; i < V; ++i) {
    p[i] = normal(rng);
    p[V + i] = std::round(normal(rng) * 2.0f) / 2.0f;
    p[2 * V + i] = i % 3 == 0 ? -std::numeric_limits<float>::infinity() : normal(rng);
    p[3 * V + i] = normal(rng);
  }
  p[3 * V + V / 2] = 20.0f;
  return rows;
}

engine::SamplingParams params_of(const SampleJob& j) {
  engine::SamplingParams p;
  p.temperature = j.temperature;
  p.top_k = j.top_k;
  p.top_p = j.top_p;
  p.min_p = j.min_p;
  return p;
}

int32_t host_token(const Owned& rows, const SampleJob& j, double u, float top_p) {
  const int64_t V = rows.t().shape[1];
  const std::span<const float> row(rows.t().ptr<const float>() + j.row * V, static_cast<size_t>(V));
  engine::SamplingParams p = params_of(j);
  p.top_p = top_p;
  return engine::pick_token(engine::sampling_distribution(row, p), u);
}

// Runs `jobs` on the device in groups of 64 and checks each against the host.
void check_against_host(const Owned& rows, const std::vector<SampleJob>& jobs) {
  const OnDevice logits(rows);
  int boundary = 0;
  for (size_t first = 0; first < jobs.size(); first += 64) {
    const std::span<const SampleJob> group(jobs.data() + first,
                                           std::min<size_t>(64, jobs.size() - first));
    OnDevice tokens(DType::I32, {static_cast<int64_t>(group.size())});
    sample(logits.t(), group, tokens.t());
    const Owned got = tokens.to_host();
    for (size_t k = 0; k < group.size(); ++k) {
      const SampleJob& j = group[k];
      const int32_t device = got.t().ptr<int32_t>()[k];
      if (device == host_token(rows, j, j.u, j.top_p)) continue;
      const bool near =
          device == host_token(rows, j, j.u * (1 - 1e-9), j.top_p) ||
          device == host_token(rows, j, std::min(j.u * (1 + 1e-9), 0.999999999), j.top_p) ||
          device == host_token(rows, j, j.u, std::nextafter(j.top_p, 0.0f)) ||
          device == host_token(rows, j, j.u, std::min(1.0f, std::nextafter(j.top_p, 2.0f)));
      ASSERT_TRUE(near) << "row " << j.row << " t=" << j.temperature << " top_k=" << j.top_k
                        << " top_p=" << j.top_p << " min_p=" << j.min_p << " u=" << j.u
                        << ": device " << device << ", host " << host_token(rows, j, j.u, j.top_p);
      ++boundary;
    }
  }
  EXPECT_LE(boundary * 100, static_cast<int>(jobs.size())) << boundary << " boundary cases";
}

TEST(GpuSampling, MatchesTheHostSampler) {
  RINGLM_REQUIRE_GPU();
  for (int64_t V : {int64_t{1000}, int64_t{32003}, int64_t{128256}}) {
    SCOPED_TRACE(::testing::Message() << "V=" << V);
    const Owned rows = make_rows(V, static_cast<uint32_t>(V));
    std::mt19937_64 rng(static_cast<uint64_t>(V));
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    std::vector<SampleJob> jobs;
    for (int32_t row = 0; row < 4; ++row)
      for (float t : {0.3f, 1.0f, 1.8f})
        for (int32_t k : {0, 1, 7, 50, static_cast<int32_t>(V) + 5})
          for (float top_p : {1.0f, 0.95f, 0.5f, 0.05f})
            for (float min_p : {0.0f, 0.02f})
              jobs.push_back({row, k, t, top_p, min_p, uniform(rng)});
    check_against_host(rows, jobs);
  }
}

// A job's token does not depend on the other jobs of the call (nor on which rows they read).
TEST(GpuSampling, AJobAloneEqualsTheJobAmongOthers) {
  RINGLM_REQUIRE_GPU();
  const Owned rows = make_rows(5003, 9);
  const OnDevice logits(rows);
  std::vector<SampleJob> jobs;
  for (int32_t i = 0; i < 12; ++i)
    jobs.push_back({i % 4, i % 3 == 0 ? 0 : 20, 0.7f + 0.1f * static_cast<float>(i),
                    i % 2 == 0 ? 0.9f : 1.0f, 0.0f, 0.083 * i});
  OnDevice together(DType::I32, {12});
  sample(logits.t(), jobs, together.t());
  const Owned all = together.to_host();
  for (size_t k = 0; k < jobs.size(); ++k) {
    OnDevice alone(DType::I32, {1});
    sample(logits.t(), std::span<const SampleJob>(&jobs[k], 1), alone.t());
    EXPECT_EQ(alone.to_host().t().ptr<int32_t>()[0], all.t().ptr<int32_t>()[k]) << "job " << k;
  }
}

// More jobs than the GPU has SMs run in several launches (one job per SM each, bounding the
// weight scratch): the same tokens and logprobs as in launches of 64.
TEST(GpuSampling, JobsBeyondOneLaunchEqualSmallerCalls) {
  RINGLM_REQUIRE_GPU();
  const Owned rows = make_rows(5003, 17);
  const OnDevice logits(rows);
  std::vector<SampleJob> jobs;
  for (int32_t i = 0; i < 300; ++i)
    jobs.push_back(
        {i % 4, i % 5 == 0 ? 0 : 40, i % 7 == 0 ? 0.0f : 0.5f + 0.01f * static_cast<float>(i % 50),
         i % 3 == 0 ? 0.9f : 1.0f, 0.0f, (i * 0.618034) - std::floor(i * 0.618034), i % 2 == 0});
  const auto J = static_cast<int64_t>(jobs.size());
  OnDevice tokens(DType::I32, {J}), logprobs(DType::F32, {J});
  sample(logits.t(), jobs, tokens.t(), &logprobs.t());
  const Owned all_tokens = tokens.to_host(), all_logprobs = logprobs.to_host();
  for (int64_t first = 0; first < J; first += 64) {
    const int64_t n = std::min<int64_t>(64, J - first);
    OnDevice part_tokens(DType::I32, {n}), part_logprobs(DType::F32, {n});
    sample(logits.t(), std::span<const SampleJob>(jobs.data() + first, static_cast<size_t>(n)),
           part_tokens.t(), &part_logprobs.t());
    const Owned t = part_tokens.to_host(), l = part_logprobs.to_host();
    for (int64_t k = 0; k < n; ++k) {
      EXPECT_EQ(t.t().ptr<int32_t>()[k], all_tokens.t().ptr<int32_t>()[first + k]) << first + k;
      if (jobs[static_cast<size_t>(first + k)].want_logprob) {
        EXPECT_EQ(l.t().ptr<float>()[k], all_logprobs.t().ptr<float>()[first + k]) << first + k;
      }
    }
  }
}

// Every logit -inf or NaN: id 0, as the host sampler falls back to.
TEST(GpuSampling, RowWithoutAFiniteLogitPicksIdZero) {
  RINGLM_REQUIRE_GPU();
  Owned rows(DType::F32, {2, 300});
  for (int64_t i = 0; i < 300; ++i) {
    rows.t().ptr<float>()[i] = -std::numeric_limits<float>::infinity();
    rows.t().ptr<float>()[300 + i] = std::numeric_limits<float>::quiet_NaN();
  }
  const OnDevice logits(rows);
  const std::vector<SampleJob> jobs = {{0, 0, 1.0f, 0.9f, 0.0f, 0.5},
                                       {1, 5, 0.5f, 1.0f, 0.1f, 0.9}};
  OnDevice tokens(DType::I32, {2});
  sample(logits.t(), jobs, tokens.t());
  const Owned got = tokens.to_host();
  EXPECT_EQ(got.t().ptr<int32_t>()[0], 0);
  EXPECT_EQ(got.t().ptr<int32_t>()[1], 0);
}

// log Σ exp(l), in long double: the logprob oracle.
long double log_total(std::span<const float> row) {
  float top = -std::numeric_limits<float>::infinity();
  for (float l : row) top = std::max(top, l);
  long double sum = 0;
  for (float l : row) sum += std::exp(static_cast<long double>(l) - top);
  return top + std::log(sum);
}

// Jobs that want the token's logprob: the same token as without (the logprob changes nothing
// else), and l_token − log Σ exp(l) within float rounding. Temperature 0: the first largest
// logit (engine::argmax_token) — the tied rows have many equal maxima.
TEST(GpuSampling, LogprobsAndGreedyJobsMatchTheHost) {
  RINGLM_REQUIRE_GPU();
  for (int64_t V : {int64_t{1000}, int64_t{128256}}) {
    SCOPED_TRACE(::testing::Message() << "V=" << V);
    Owned rows = make_rows(V, static_cast<uint32_t>(V) + 1);
    rows.t().ptr<float>()[V + 17] = 40.0f;  // tied row: two equal maxima, 17 first
    rows.t().ptr<float>()[V + 400] = 40.0f;
    const OnDevice logits(rows);
    std::vector<SampleJob> jobs;
    for (int32_t row = 0; row < 4; ++row)
      for (float t : {0.0f, 0.7f})
        for (float top_p : {1.0f, 0.9f}) jobs.push_back({row, 0, t, top_p, 0.0f, 0.37 + row * 0.1});
    const auto J = static_cast<int64_t>(jobs.size());
    OnDevice plain(DType::I32, {J});
    sample(logits.t(), jobs, plain.t());
    for (SampleJob& j : jobs) j.want_logprob = true;
    OnDevice tokens(DType::I32, {J});
    OnDevice logprobs(DType::F32, {J});
    sample(logits.t(), jobs, tokens.t(), &logprobs.t());
    const Owned got = tokens.to_host(), got_plain = plain.to_host(), got_lp = logprobs.to_host();
    for (int64_t k = 0; k < J; ++k) {
      const SampleJob& j = jobs[static_cast<size_t>(k)];
      const std::span<const float> row(rows.t().ptr<const float>() + j.row * V,
                                       static_cast<size_t>(V));
      const int32_t token = got.t().ptr<int32_t>()[k];
      EXPECT_EQ(token, got_plain.t().ptr<int32_t>()[k]) << "job " << k;
      if (j.temperature == 0.0f) {
        EXPECT_EQ(token, engine::argmax_token(row)) << "job " << k;
      }
      const auto expected = static_cast<double>(row[static_cast<size_t>(token)] - log_total(row));
      EXPECT_NEAR(got_lp.t().ptr<float>()[k], expected, 1e-5 * (1.0 - expected)) << "job " << k;
    }
  }
}

// Invalid jobs are refused before anything runs; the next call works.
TEST(GpuSampling, InvalidJobsAreRefused) {
  RINGLM_REQUIRE_GPU();
  const Owned rows = make_rows(100, 3);
  const OnDevice logits(rows);
  OnDevice tokens(DType::I32, {1});
  for (const SampleJob& bad : {SampleJob{4, 0, 1.0f, 1.0f, 0.0f, 0.5},        // row past the end
                               SampleJob{0, 0, -1.0f, 1.0f, 0.0f, 0.5},       // temperature < 0
                               SampleJob{0, 0, 1.0f, 1.0f, 0.0f, 0.5, true},  // no logprobs out
                               SampleJob{0, -1, 1.0f, 1.0f, 0.0f, 0.5},       // top_k < 0
                               SampleJob{0, 0, 1.0f, 0.0f, 0.0f, 0.5},        // top_p 0
                               SampleJob{0, 0, 1.0f, 1.0f, 1.5f, 0.5},        // min_p > 1
                               SampleJob{0, 0, 1.0f, 1.0f, 0.0f, 1.0}})       // u = 1
    EXPECT_THROW(sample(logits.t(), std::span<const SampleJob>(&bad, 1), tokens.t()), Error);
  const SampleJob good{0, 0, 1.0f, 1.0f, 0.0f, 0.5};
  sample(logits.t(), std::span<const SampleJob>(&good, 1), tokens.t());
  const int32_t token = tokens.to_host().t().ptr<int32_t>()[0];
  EXPECT_EQ(token, host_token(rows, good, good.u, good.top_p));
}

}  // namespace
}  // namespace ringlm::cuda
