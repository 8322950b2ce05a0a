// Whole models on the GPU: every fixture architecture against its transformers goldens (logits at
// every prompt position, greedy continuation), the GPU against the CPU on the same checkpoint, and
// chunked / batched prefill against whole-prompt prefill on the GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/quant_mma.h"
#include "backends/cuda/runtime.h"
#include "cuda/cuda_test_util.h"
#include "engine/runner.h"
#include "models/golden_util.h"
#include "models/model.h"
#include "models/parity_util.h"
#include "models/random_checkpoint.h"

namespace ringlm {
namespace {

using testing::Golden;

class GpuDecoderParity : public ::testing::TestWithParam<std::string> {};

// `run`'s logits with a backend switch on, then off (and on again after): not one bit differs.
template <typename Run>
void expect_switch_changes_no_bits(const Run& run, void (*set_switch)(bool)) {
  const std::vector<float> on = run();
  set_switch(false);
  const std::vector<float> off = run();
  set_switch(true);
  ASSERT_EQ(on.size(), off.size());
  size_t differing = 0;
  for (size_t i = 0; i < on.size(); ++i)
    differing += std::memcmp(&on[i], &off[i], sizeof(float)) != 0;
  EXPECT_EQ(differing, 0u) << "of " << on.size() << " logits";
}

// The same for the prompt's logits in chunks of `chunk` beside the neighbour.
void expect_switch_changes_no_bits(
    models::Model& gpu, const std::vector<int32_t>& prompt, int64_t chunk,
    const std::vector<int32_t>& neighbour, void (*set_switch)(bool),
    const kv::KvFormat& kv_format = kv::KvFormat::dense(DType::F32)) {
  expect_switch_changes_no_bits(
      [&] { return testing::prompt_logits(gpu, prompt, chunk, &neighbour, kv_format); },
      set_switch);
}

// A fixture model's config.json (empty when missing).
std::string fixture_config(const std::string& name) {
  std::ifstream in(testing::fixture_model_dir(name) + "/config.json");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Five prompts of 24 tokens side by side: decode steps of 5 rows, above the GEMV's 2 (cuBLAS
// matmuls, the joined q/k/v GEMM, the merges writing a rounded attention output).
std::vector<std::vector<int32_t>> lockstep_prompts() {
  std::vector<std::vector<int32_t>> prompts(5);
  for (size_t r = 0; r < prompts.size(); ++r)
    for (int i = 0; i < 24; ++i)
      prompts[r].push_back(static_cast<int32_t>(3 + (i * 37 + 11 * static_cast<int>(r)) % 500));
  return prompts;
}

// The CPU parity suite holds the CPU to 1e-4 of the largest logit; the GPU runs the same f32
// math (cuBLAS f32 without TF32) in a different summation order, held to the same bound.
constexpr float kGoldenTolerance = 1e-4f;

TEST_P(GpuDecoderParity, LogitsMatchTransformersAtEveryPosition) {
  RINGLM_REQUIRE_GPU();
  const Golden golden = testing::load_golden(GetParam());
  auto model = models::load_model(testing::fixture_model_dir(GetParam()), Device::CUDA);
  ASSERT_EQ(model->device(), Device::CUDA);
  const auto logits = testing::prompt_logits(*model, golden.prompt,
                                             static_cast<int64_t>(golden.prompt.size()), nullptr);
  ASSERT_EQ(logits.size(), golden.logits.size());
  const float worst = testing::worst_relative_error(logits, golden.logits, golden.vocab);
  RecordProperty("worst_relative_error", std::to_string(worst));
  EXPECT_LE(worst, kGoldenTolerance) << GetParam();
}

TEST_P(GpuDecoderParity, GreedyContinuationMatchesTransformers) {
  RINGLM_REQUIRE_GPU();
  const Golden golden = testing::load_golden(GetParam());
  auto model = models::load_model(testing::fixture_model_dir(GetParam()), Device::CUDA);
  bool cache_empty = false;
  EXPECT_EQ(testing::greedy_continuation(*model, golden.prompt, golden.greedy.size(), &cache_empty),
            golden.greedy);
  EXPECT_TRUE(cache_empty);
}

TEST_P(GpuDecoderParity, GpuEqualsCpuOnTheSameCheckpoint) {
  RINGLM_REQUIRE_GPU();
  const Golden golden = testing::load_golden(GetParam());
  auto gpu = models::load_model(testing::fixture_model_dir(GetParam()), Device::CUDA);
  auto cpu = models::load_model(testing::fixture_model_dir(GetParam()), Device::CPU);
  const auto n = static_cast<int64_t>(golden.prompt.size());
  const auto on_gpu = testing::prompt_logits(*gpu, golden.prompt, n, nullptr);
  const auto on_cpu = testing::prompt_logits(*cpu, golden.prompt, n, nullptr);
  EXPECT_LE(testing::worst_relative_error(on_gpu, on_cpu, golden.vocab), kGoldenTolerance);
}

// Batch composition and chunking change which kernels and GEMM shapes run, not the math: on the
// GPU the results agree to f32 rounding (bitwise equality is the CPU's guarantee).
TEST_P(GpuDecoderParity, ChunkedAndBatchedPrefillMatchWholePrompt) {
  RINGLM_REQUIRE_GPU();
  const Golden golden = testing::load_golden(GetParam());
  auto model = models::load_model(testing::fixture_model_dir(GetParam()), Device::CUDA);
  const auto whole = testing::prompt_logits(*model, golden.prompt,
                                            static_cast<int64_t>(golden.prompt.size()), nullptr);
  std::vector<int32_t> neighbour(golden.prompt.rbegin(), golden.prompt.rend());
  neighbour.resize(neighbour.size() / 2 + 3);
  for (int64_t chunk : {1, 7, 16, 33}) {
    const auto chunked = testing::prompt_logits(*model, golden.prompt, chunk, &neighbour);
    ASSERT_EQ(chunked.size(), whole.size());
    EXPECT_LE(testing::worst_relative_error(chunked, whole, golden.vocab), 1e-5f)
        << GetParam() << " chunk " << chunk;
  }
}

TEST(GpuModel, ManyPromptsBatchedGiveEachItsSerialTokens) {
  RINGLM_REQUIRE_GPU();
  auto model = models::load_model(testing::fixture_model_dir("gemma3"), Device::CUDA);
  const Golden golden = testing::load_golden("gemma3");
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < 6; ++i) {
    std::vector<int32_t> p(golden.prompt.begin() + static_cast<int64_t>(i),
                           golden.prompt.end() - static_cast<int64_t>(3 * i));
    prompts.push_back(p);
  }
  engine::RunnerConfig rc;
  rc.kv_memory_bytes = size_t{64} << 20;
  rc.max_step_tokens = 40;
  engine::GreedyOptions options;
  options.max_new_tokens = 24;
  options.max_rows = 4;  // rows join as others leave
  engine::Runner batched_runner(*model, rc);
  const auto batched = engine::generate_greedy(batched_runner, prompts, options);
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine::Runner serial_runner(*model, rc);
    const auto serial = engine::generate_greedy(serial_runner, {prompts[i]}, options);
    EXPECT_EQ(batched.tokens[i], serial.tokens.at(0)) << "prompt " << i;
  }
  EXPECT_EQ(batched_runner.cache().used_blocks(), 0);
}

// A bf16 Llama with head_dim 128 and 4 query heads per KV head (the 8B shape, scaled down): its
// prompts run through the tensor-core prefill kernel, which the f32 fixtures (head dims <= 32)
// never reach. Oracle: the CPU on the same checkpoint (f32 attention over the same bf16 K/V).
// The kernel rounds q·scale and the softmax weights to bf16 (2^-8 relative), so agreement is to
// that rounding, not to f32's.
TEST(GpuModel, TensorCorePrefillMatchesCpu) {
  RINGLM_REQUIRE_GPU();
  const std::string out = testing::write_random_checkpoint(
      "gpu_bf16_d128", testing::llama_config(256, 512, 2, 8, 2, 128),
      {"--seed=11", "--dtype=bf16"});
  auto gpu = models::load_model(out, Device::CUDA);
  auto cpu = models::load_model(out, Device::CPU);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 150; ++i) prompt.push_back(3 + (i * 37) % 500);
  const auto n = static_cast<int64_t>(prompt.size());
  const auto on_cpu = testing::prompt_logits(*cpu, prompt, n, nullptr);
  const auto whole = testing::prompt_logits(*gpu, prompt, n, nullptr);
  EXPECT_LE(testing::worst_relative_error(whole, on_cpu, 512), 2e-2f);
  // Chunks of 40 (tiles of 16 queries restart at each chunk; a query's key tiles do not move):
  // GEMMs of other shapes change K/V in the last f32 bits, which the bf16 cache can round to a
  // neighbouring value, so the bound is bf16's here too.
  const auto chunked = testing::prompt_logits(*gpu, prompt, 40, nullptr);
  EXPECT_LE(testing::worst_relative_error(chunked, whole, 512), 2e-2f);
}

// Overlapped launches (programmatic dependent launch, device/pdl.cuh) change no bits: one-token
// steps of two rows of a bf16 Llama — the decode GEMV, gate/up with the activation, the fused
// norm/rope/K-V write, split-K decode attention and its merge, argmax — with and without overlap,
// for K/V in f32 (the CUDA-core decode kernel), bf16 (the tensor-core kernel's cp.async tiles),
// TurboQuant k8v3 (its register fragments) and affine int8/int4 (codes loaded ahead, or at use:
// cuda::decode_affine_prefetch). The tensor-core kernels fetch older keys' tiles before
// waiting for the K/V write (cuda::decode_early_fetch); with that off, too. A kernel that touched
// its predecessor's output before waiting for it shows up as a difference.
TEST(GpuModel, OverlappedLaunchesChangeNoBits) {
  RINGLM_REQUIRE_GPU();
  const std::string out = testing::write_random_checkpoint(
      "gpu_bf16_d128_pdl", testing::llama_config(256, 512, 2, 8, 2, 128),
      {"--seed=12", "--dtype=bf16"});
  auto gpu = models::load_model(out, Device::CUDA);
  std::vector<int32_t> prompt, neighbour;
  for (int i = 0; i < 90; ++i) prompt.push_back(3 + (i * 37) % 500);
  for (int i = 0; i < 70; ++i) neighbour.push_back(5 + (i * 53) % 500);
  ASSERT_TRUE(cuda::decode_early_fetch());
  ASSERT_TRUE(cuda::decode_affine_prefetch());
  for (const char* format : {"f32", "bf16", "turbo", "int8-g64", "int4-g32"}) {
    SCOPED_TRACE(format);
    const kv::KvFormat kv_format = kv::KvFormat::parse(format);
    cuda::set_pdl_enabled(false);
    const auto plain = testing::prompt_logits(*gpu, prompt, 1, &neighbour, kv_format);
    cuda::set_pdl_enabled(true);
    const auto overlapped = testing::prompt_logits(*gpu, prompt, 1, &neighbour, kv_format);
    cuda::set_decode_early_fetch(false);
    const auto late = testing::prompt_logits(*gpu, prompt, 1, &neighbour, kv_format);
    cuda::set_decode_early_fetch(true);
    cuda::set_decode_affine_prefetch(false);
    const auto affine_at_use = testing::prompt_logits(*gpu, prompt, 1, &neighbour, kv_format);
    cuda::set_decode_affine_prefetch(true);
    for (const auto* other : {&overlapped, &late, &affine_at_use}) {
      ASSERT_EQ(plain.size(), other->size());
      size_t differing = 0;
      for (size_t i = 0; i < plain.size(); ++i)
        differing += std::memcmp(&plain[i], &(*other)[i], sizeof(float)) != 0;
      EXPECT_EQ(differing, 0u) << "of " << plain.size() << " logits, run "
                               << (other == &overlapped ? "overlapped"
                                   : other == &late     ? "late"
                                                        : "affine codes loaded at use");
    }
  }
}

// Matmul inputs written already rounded (ops::matmul_input_dtype: the norms and the gated
// activation write bf16 for the cuBLAS matmuls above the GEMV's rows) change no bits: bf16
// checkpoints of a Llama (head_dim 128) and of the Gemma-3 fixture's config (sandwich norms,
// sliding layers), a prompt in chunks of 7 tokens beside a neighbour (steps of 14 rows: cuBLAS
// q/k/v, gate/up and down) and five prompts in decode steps of 5 rows (the attention output
// rounded by the merge, K/V bf16, TurboQuant and int8), with the rounded inputs and without.
TEST(GpuModel, RoundedMatmulInputsChangeNoBits) {
  RINGLM_REQUIRE_GPU();
  const std::string gemma = fixture_config("gemma3");
  ASSERT_FALSE(gemma.empty());
  const std::pair<std::string, std::string> checkpoints[] = {
      {"gpu_bf16_feed_llama", testing::llama_config(256, 512, 2, 8, 2, 128)},
      {"gpu_bf16_feed_gemma3", gemma}};
  std::vector<int32_t> prompt, neighbour;
  for (int i = 0; i < 90; ++i) prompt.push_back(3 + (i * 37) % 500);
  for (int i = 0; i < 70; ++i) neighbour.push_back(5 + (i * 53) % 500);
  for (const auto& [tag, config] : checkpoints) {
    SCOPED_TRACE(tag);
    auto gpu = models::load_model(
        testing::write_random_checkpoint(tag, config, {"--seed=13", "--dtype=bf16"}), Device::CUDA);
    ASSERT_TRUE(cuda::rounded_matmul_inputs());
    expect_switch_changes_no_bits(*gpu, prompt, 7, neighbour, cuda::set_rounded_matmul_inputs);
    // Decode steps: the attention output rounded by the split-K merge (kernel, or the TurboQuant
    // decode kernel's own merge with the inverse rotation) for the o projection.
    for (const char* format : {"bf16", "turbo", "int8-g32"}) {
      SCOPED_TRACE(format);
      const kv::KvFormat kv_format = kv::KvFormat::parse(format);
      const auto lockstep = [&] {
        return testing::lockstep_logits(*gpu, lockstep_prompts(), kv_format);
      };
      expect_switch_changes_no_bits(lockstep, cuda::set_rounded_matmul_inputs);
      ASSERT_TRUE(cuda::merge_rounded());
      expect_switch_changes_no_bits(lockstep, cuda::set_merge_rounded);  // the rounding pass
    }
  }
}

// The same with MLX 4-bit weights (BF16 scales, group 64; cuda::quant_mma_half_x on): from 9
// rows the norms, the gated activation and the decode merge write bf16 rows for quant_mma's bf16
// kernels and, past its rows, the dequantized tiles. A prompt in chunks of 7, 20 and 50 beside a
// neighbour (steps of 14, 40 and up to 100 rows: the 16-row kernel, row groups, the tiles), and
// twelve prompts in decode steps of 12 rows (bf16 and TurboQuant K/V), with the rounded inputs
// and without.
TEST(GpuModel, RoundedMatmulInputsChangeNoBitsWithQuantizedWeights) {
  RINGLM_REQUIRE_GPU();
  auto gpu =
      models::load_model(testing::write_random_checkpoint(
                             "gpu_mlx4_feed_llama", testing::llama_config(256, 512, 2, 8, 2, 128),
                             {"--seed=17", "--dtype=bf16", "--quantize=4"}),
                         Device::CUDA);
  const ops::testing::SwitchFor half_x(cuda::quant_mma_half_x, cuda::set_quant_mma_half_x, true);
  std::vector<int32_t> prompt, neighbour;
  for (int i = 0; i < 90; ++i) prompt.push_back(3 + (i * 37) % 500);
  for (int i = 0; i < 70; ++i) neighbour.push_back(5 + (i * 53) % 500);
  ASSERT_TRUE(cuda::rounded_matmul_inputs());
  const int64_t half_before = cuda::quant_mma_half_x_count();
  for (int64_t chunk : {7, 20, 50}) {
    SCOPED_TRACE(::testing::Message() << "chunks of " << chunk);
    expect_switch_changes_no_bits(*gpu, prompt, chunk, neighbour, cuda::set_rounded_matmul_inputs);
  }
  EXPECT_GT(cuda::quant_mma_half_x_count(), half_before) << "no bf16 x reached quant_mma";
  std::vector<std::vector<int32_t>> prompts(12);
  for (size_t r = 0; r < prompts.size(); ++r)
    for (int i = 0; i < 20; ++i)
      prompts[r].push_back(static_cast<int32_t>(3 + (i * 41 + 13 * static_cast<int>(r)) % 500));
  for (const char* format : {"bf16", "turbo"}) {
    SCOPED_TRACE(format);
    const kv::KvFormat kv_format = kv::KvFormat::parse(format);
    expect_switch_changes_no_bits(
        [&] { return testing::lockstep_logits(*gpu, prompts, kv_format); },
        cuda::set_rounded_matmul_inputs);
  }
}

// prepare_attention reading the joined q/k/v GEMM's rows (cuda::matmul_prepare_attention: no
// column-split kernel; not for TurboQuant caches, whose run checks the switch leaves them alone)
// changes no bits, in prefill chunks and in decode steps of 5 rows: bf16
// checkpoints of a Llama (head_dim 128; K/V in f32,
// bf16, TurboQuant k8v3 and affine int8 — the quantizing write reads the k and v it leaves) and
// of the qwen2 (q/k/v biases), qwen3 (q/k norms) and Gemma-3 (sandwich norms, sliding layers)
// fixtures' configs, a prompt in chunks of 7 beside a neighbour
// (steps of 14 rows: the joined cuBLAS GEMM), with the switch on and off.
TEST(GpuModel, PrepareFromJoinedGemmChangesNoBits) {
  RINGLM_REQUIRE_GPU();
  const std::pair<std::string, std::string> checkpoints[] = {
      {"gpu_joined_llama", testing::llama_config(256, 512, 2, 8, 2, 128)},
      {"gpu_joined_qwen2", fixture_config("qwen2")},
      {"gpu_joined_qwen3", fixture_config("qwen3")},
      {"gpu_joined_gemma3", fixture_config("gemma3")}};
  std::vector<int32_t> prompt, neighbour;
  for (int i = 0; i < 60; ++i) prompt.push_back(3 + (i * 37) % 500);
  for (int i = 0; i < 50; ++i) neighbour.push_back(5 + (i * 53) % 500);
  ASSERT_TRUE(cuda::prepare_joined());
  for (const auto& [tag, config] : checkpoints) {
    SCOPED_TRACE(tag);
    ASSERT_FALSE(config.empty());
    auto gpu = models::load_model(
        testing::write_random_checkpoint(tag, config, {"--seed=19", "--dtype=bf16"}), Device::CUDA);
    const bool llama = tag == checkpoints[0].first;
    for (const char* format : {"f32", "bf16", "turbo", "int8-g64"}) {
      if (!llama && std::string(format) != "bf16") continue;
      SCOPED_TRACE(format);
      const kv::KvFormat kv_format = kv::KvFormat::parse(format);
      expect_switch_changes_no_bits(*gpu, prompt, 7, neighbour, cuda::set_prepare_joined,
                                    kv_format);
      expect_switch_changes_no_bits(
          [&] { return testing::lockstep_logits(*gpu, lockstep_prompts(), kv_format); },
          cuda::set_prepare_joined);
    }
  }
}

// The residual-fused decoder blocks (ops/residual_matmul.h: the GEMVs at 1-2 rows add into the
// residual stream and normalize it on their way in, no norm kernels; without q/k norms the q/k/v
// GEMV also ropes and writes the K/V cache in its store) change no bits, either switch off: bf16
// checkpoints of a Llama (head_dim 128) and of the qwen2 (q/k/v biases) and qwen3 (q/k norms)
// fixtures' configs fed one token per step beside a neighbour (steps of 2 rows, then of 1), fused
// and not.
TEST(GpuModel, FusedResidualChangesNoBits) {
  RINGLM_REQUIRE_GPU();
  const std::pair<std::string, std::string> checkpoints[] = {
      {"gpu_fused_llama", testing::llama_config(256, 512, 2, 8, 2, 128)},
      {"gpu_fused_qwen2", fixture_config("qwen2")},
      {"gpu_fused_qwen3", fixture_config("qwen3")}};
  std::vector<int32_t> prompt, neighbour;
  for (int i = 0; i < 40; ++i) prompt.push_back(3 + (i * 37) % 500);
  for (int i = 0; i < 20; ++i) neighbour.push_back(5 + (i * 53) % 500);
  for (const auto& [tag, config] : checkpoints) {
    SCOPED_TRACE(tag);
    ASSERT_FALSE(config.empty());
    auto gpu = models::load_model(
        testing::write_random_checkpoint(tag, config, {"--seed=17", "--dtype=bf16"}), Device::CUDA);
    ASSERT_TRUE(cuda::gemv_fused_norms());
    expect_switch_changes_no_bits(*gpu, prompt, 1, neighbour, cuda::set_gemv_fused_norms);
    const bool rope_before = cuda::gemv_fused_rope();  // off by default
    cuda::set_gemv_fused_rope(true);
    expect_switch_changes_no_bits(*gpu, prompt, 1, neighbour, cuda::set_gemv_fused_rope);
    cuda::set_gemv_fused_rope(rope_before);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GpuDecoderParity, ::testing::ValuesIn(testing::all_fixtures()),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace ringlm
