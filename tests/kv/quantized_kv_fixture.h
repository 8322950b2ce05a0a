// Shared by the quantized KV cache tests (affine_kv_test, turbo_kv_test): small caches, random K/V
// rows written into a sequence, save / load round trips of the stored planes, and a model's
// logits with a quantized KV format measured against the same model with bf16 KV.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "engine/runner.h"
#include "kv/paged_kv_cache.h"
#include "kv/step_plan.h"
#include "models/model.h"
#include "ops/ops.h"

namespace ringlm::testing {

// One layer per format, each 2 kv heads × head_dim; blocks of 4 tokens in 1 MiB.
inline kv::KvCacheConfig small_kv_config(const std::vector<kv::KvFormat>& formats,
                                         int head_dim = 64) {
  kv::KvCacheConfig c;
  for (const kv::KvFormat& f : formats) {
    kv::LayerKvSpec s;
    s.kv_heads = 2;
    s.head_dim = head_dim;
    s.format = f;
    c.layers.push_back(s);
  }
  c.block_tokens = 4;
  c.memory_bytes = size_t{1} << 20;
  return c;
}

// K then V drawn from `dist` with one engine seeded `seed`.
template <class Dist>
void fill_random_kv(std::vector<float>& k, std::vector<float>& v, uint32_t seed, Dist dist) {
  std::mt19937 rng(seed);
  for (auto& x : k) x = dist(rng);
  for (auto& x : v) x = dist(rng);
}

// Writes k and v (F32[n, kv_heads, head_dim] each) at positions [0, n) of `seq`, already appended,
// into layers [0, layers) through kv_write; returns the slots (of layer 0's group).
inline std::vector<int32_t> write_kv_rows(kv::PagedKvCache& cache, kv::SequenceId seq, int layers,
                                          int64_t kv_heads, int64_t head_dim, std::vector<float>& k,
                                          std::vector<float>& v) {
  const int64_t n = static_cast<int64_t>(k.size()) / (kv_heads * head_dim);
  std::vector<int32_t> slots;
  for (int64_t p = 0; p < n; ++p) slots.push_back(cache.slot(seq, 0, p));
  for (int l = 0; l < layers; ++l) {
    ops::KvLayerView view = cache.layer_view(l);
    ops::kv_write(Tensor(k.data(), DType::F32, {n, kv_heads, head_dim}),
                  Tensor(v.data(), DType::F32, {n, kv_heads, head_dim}),
                  Tensor(slots.data(), DType::I32, {n}), view);
  }
  return slots;
}

// Layers [0, layers) of a and b hold the same bytes in every plane.
inline void expect_same_planes(const kv::ExtractedKv& a, const kv::ExtractedKv& b, size_t layers) {
  for (size_t l = 0; l < layers; ++l) {
    EXPECT_EQ(a.layers[l].k, b.layers[l].k) << "layer " << l;
    EXPECT_EQ(a.layers[l].v, b.layers[l].v) << "layer " << l;
    EXPECT_EQ(a.layers[l].k_scales, b.layers[l].k_scales) << "layer " << l;
    EXPECT_EQ(a.layers[l].k_biases, b.layers[l].k_biases) << "layer " << l;
    EXPECT_EQ(a.layers[l].v_scales, b.layers[l].v_scales) << "layer " << l;
    EXPECT_EQ(a.layers[l].v_biases, b.layers[l].v_biases) << "layer " << l;
  }
}

// cache.save(seq) loaded into a fresh cache of `formats` (one per layer) gives back every plane
// bit for bit; loading the file into a cache of each of `wrong_formats` is an error naming the
// format and takes no blocks. The file is removed afterwards.
inline void check_save_load_round_trip(const kv::PagedKvCache& cache, kv::SequenceId seq,
                                       const std::vector<kv::KvFormat>& formats,
                                       const std::string& path,
                                       const std::vector<std::string>& wrong_formats) {
  cache.save(seq, path);
  kv::PagedKvCache other(small_kv_config(formats));
  const kv::SequenceId loaded = other.load(path);
  const kv::ExtractedKv a = cache.extract(seq), b = other.extract(loaded);
  ASSERT_EQ(a.length, b.length);
  expect_same_planes(a, b, formats.size());
  for (const std::string& wrong_format : wrong_formats) {
    kv::PagedKvCache wrong(small_kv_config(
        std::vector<kv::KvFormat>(formats.size(), kv::KvFormat::parse(wrong_format))));
    try {
      wrong.load(path);
      ADD_FAILURE() << "loaded a " << formats[0].name() << " file into a " << wrong_format
                    << " cache";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("format"), std::string::npos) << e.what();
    }
    EXPECT_EQ(wrong.used_blocks(), 0);
  }
  std::remove(path.c_str());
}

// ---- Quantized-KV tolerance on real models ----

// The models the tolerance tests measure: three fixtures of head_dim 32 and random_d64.
inline const std::vector<std::string> kKvToleranceModels = {"gemma3", "llama_linear", "qwen3",
                                                            "random_d64"};

// Logits of every position of `tokens` (one prefill step) with the given KV format.
inline std::vector<float> prompt_logits(models::Model& model, const std::string& format,
                                        const std::vector<int32_t>& tokens) {
  engine::RunnerConfig rc;
  rc.kv_memory_bytes = size_t{16} << 20;
  rc.max_step_tokens = static_cast<int64_t>(tokens.size());
  rc.kv_format = kv::KvFormat::parse(format);
  engine::Runner runner(model, rc);
  const kv::SequenceId s = runner.cache().add_sequence();
  EXPECT_TRUE(runner.cache().append(s, static_cast<int64_t>(tokens.size())));
  kv::StepPlan plan({{s, tokens, 0, true, true}}, runner.cache());
  const Tensor logits = runner.step(plan);
  return {logits.ptr<float>(), logits.ptr<float>() + logits.numel()};
}

// A model's bf16-KV logits over its prompt, and their largest magnitude.
struct LogitBaseline {
  std::vector<float> logits;
  double scale = 0;
};

inline LogitBaseline bf16_kv_baseline(models::Model& model, const std::vector<int32_t>& prompt) {
  LogitBaseline b;
  b.logits = prompt_logits(model, "bf16", prompt);
  for (float x : b.logits) b.scale = std::max(b.scale, double{std::fabs(x)});
  return b;
}

// *relative = max |logit(format) − logit(bf16)| / max |logit(bf16)| over every position of the
// prompt, printed as measured.
inline void measure_relative_logit_error(models::Model& model, const std::string& model_name,
                                         const std::string& format,
                                         const std::vector<int32_t>& prompt,
                                         const LogitBaseline& want, double* relative) {
  const std::vector<float> got = prompt_logits(model, format, prompt);
  ASSERT_EQ(got.size(), want.logits.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, double{std::fabs(got[i] - want.logits[i])});
  *relative = worst / want.scale;
  std::printf("[ measured ] %s %s: max|dlogit| %.4g, max|logit| %.4g, relative %.4g\n",
              model_name.c_str(), format.c_str(), worst, want.scale, *relative);
}

}  // namespace ringlm::testing
