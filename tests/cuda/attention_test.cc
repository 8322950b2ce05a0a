// GPU paged attention vs the scalar reference (dense gathered K/V, explicit mask, double math):
// every KV dtype, head dims 64/128/256 and odd ones, GQA ratios, windows, soft-capping, block
// sizes, decode rows, prefill chunks and empty rows; the pre-uploaded DeviceRows path; in-place
// use; batch invariance (a row alone = the same row batched, bitwise).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device_rows.h"
#include "cuda_test_util.h"
#include "ops/ops.h"
#include "ops/reference.h"
#include "paged_layout.h"

namespace ringlm::ops {
namespace {

using testing::kEps;
using testing::OnDevice;
using testing::Owned;

using testing::Layout;
using testing::make_layout;
using testing::RowSpec;

struct Config {
  DType dtype;
  int head_dim, q_heads, kv_heads, block_tokens, window;
  float softcap;
  int sinks = 0;  // with a window: the first `sinks` keys stay visible
};

// Decode rows, a whole prompt, a chunk continuing a prompt, an empty row, a long decode row.
const std::vector<RowSpec> kRows = {{1, 1}, {1, 37}, {0, 10}, {13, 13}, {5, 130}, {1, 300}};

struct Problem {
  Layout layout;
  Owned q, k, v;
  Problem(const Config& c, const std::vector<RowSpec>& specs, uint32_t seed)
      : layout(make_layout(specs, c.block_tokens, seed)),
        q(DType::F32, {layout.tokens(), c.q_heads, c.head_dim}),
        k(c.dtype, {layout.num_blocks, c.block_tokens, c.kv_heads, c.head_dim}),
        v(c.dtype, {layout.num_blocks, c.block_tokens, c.kv_heads, c.head_dim}) {
    testing::fill_uniform(q, seed + 1);
    testing::fill_uniform(k, seed + 2);
    testing::fill_uniform(v, seed + 3);
  }
};

AttentionParams params_for(const Config& c) {
  AttentionParams p;
  // With a cap, a larger scale so that scores reach the tanh's bend.
  p.scale = c.softcap > 0 ? 4.0f / std::sqrt(static_cast<float>(c.head_dim))
                          : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  p.softcap = c.softcap;
  p.window = c.window;
  p.sink_tokens = c.sinks;
  return p;
}

// Rows on tensor cores round q·scale and the softmax weights to the K/V dtype (unit roundoff u):
// the score error gains u·scale·Σ|q·k| and the output u·max|v| (Σ p̃·v / l with p̃ = p(1 + δ),
// |δ| ≤ u). Prefill rows (device/attention_prefill.cuh): 16-bit K/V, head_dim 64, 128 or 256,
// 1, 2, 4 or 8 query heads per KV head; decode rows (device/attention_decode_tc.cuh): 16-bit K/V,
// head_dim 64, 128 or 256.
double tensor_core_roundoff(const Config& c, int queries_in_row) {
  const int group = c.q_heads / c.kv_heads;
  if (c.dtype != DType::BF16 && c.dtype != DType::F16) return 0.0;
  const bool tc_dim = c.head_dim == 64 || c.head_dim == 128 || c.head_dim == 256;
  const bool prefill_dim =
      c.head_dim == 64 || c.head_dim == 128 || (c.head_dim == 256 && cuda::prefill_tc_extended());
  const bool tc = queries_in_row > 1
                      ? prefill_dim && (group == 1 || group == 2 || group == 4 || group == 8)
                      : tc_dim;
  if (!tc) return 0.0;
  return c.dtype == DType::BF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
}

// Error bound of one output element, from the inputs. f32 scores: the dot product of D terms is
// within γ_(D+2) of Σ|q·k| (doubled for the warp tree), times scale; the cap adds ≤ 6u of |s|.
// A score error ≤ Δ moves each softmax weight by a factor e^(±Δ): the output by ≤ 2.2Δ·max|v|.
// The f32 sums of weights and weighted values over ctx keys with rescaling add ≤ (2·ctx + 20)u
// relative to max|v|; expf's 2 ulp per weight, 8u more.
// Tensor-core rows add their roundoff u (tensor_core_roundoff).
double tolerance(const Problem& p, const Config& c, const AttentionParams& params, int64_t t,
                 int64_t h) {
  const Layout& L = p.layout;
  int r = 0;
  while (L.query_start[static_cast<size_t>(r) + 1] <= t) ++r;
  const int n = L.query_start[static_cast<size_t>(r) + 1] - L.query_start[static_cast<size_t>(r)];
  const int ctx = L.context_len[static_cast<size_t>(r)];
  const int pos = ctx - n + static_cast<int>(t) - L.query_start[static_cast<size_t>(r)];
  const int lo = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
  const int sinks = c.window > 0 ? std::min(c.sinks, lo) : 0;  // sinks not already in the window
  const double u = tensor_core_roundoff(c, n);
  const int g = static_cast<int>(h) / (c.q_heads / c.kv_heads);
  const int D = c.head_dim, bt = c.block_tokens;
  double delta = 0.0, vmax = 0.0;
  std::vector<int> visible;
  for (int j = 0; j < sinks; ++j) visible.push_back(j);
  for (int j = lo; j <= pos; ++j) visible.push_back(j);
  for (int j : visible) {
    const int64_t block = L.block_table[static_cast<size_t>(r) * L.max_blocks + j / bt];
    const int64_t off = ((block * bt + j % bt) * c.kv_heads + g) * D;
    double mag = 0.0, dot = 0.0;
    for (int d = 0; d < D; ++d) {
      const double qk = double{p.q.f((t * c.q_heads + h) * D + d)} * p.k.f(off + d);
      mag += std::fabs(qk);
      dot += qk;
      vmax = std::max(vmax, double{std::fabs(p.v.f(off + d))});
    }
    double d_s = (2.0 * (D + 2) * kEps + 2.0 * u) * mag * params.scale;
    if (c.softcap > 0) d_s += 6 * kEps * std::fabs(dot * params.scale);
    delta = std::max(delta, d_s);
  }
  return vmax * (2.2 * delta + 2.0 * u + (2.0 * static_cast<double>(visible.size()) + 28) * kEps) +
         1e-30;
}

void check_config(const Config& c, uint32_t seed, const std::vector<RowSpec>& specs = kRows) {
  SCOPED_TRACE(::testing::Message()
               << testing::dtype_label(c.dtype) << " D=" << c.head_dim << " qh=" << c.q_heads
               << " kvh=" << c.kv_heads << " bt=" << c.block_tokens << " window=" << c.window
               << " softcap=" << c.softcap << " sinks=" << c.sinks);
  const Problem p(c, specs, seed);
  const AttentionParams params = params_for(c);
  const int64_t T = p.layout.tokens();
  Owned ref(DType::F32, {T, c.q_heads, c.head_dim});
  reference::attention(p.q.t(), KvLayerView{p.k.t(), p.v.t()}, p.layout.rows(), params, ref.t());

  OnDevice dq(p.q), dk(p.k), dv(p.v), dout(DType::F32, {T, c.q_heads, c.head_dim});
  const KvLayerView view{dk.t(), dv.t()};
  attention(dq.t(), view, p.layout.rows(), params, dout.t());  // poisoned out: all written?
  const Owned out = dout.to_host();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < c.q_heads; ++h) {
      const double tol = tolerance(p, c, params, t, h);
      for (int64_t d = 0; d < c.head_dim; ++d) {
        const int64_t i = (t * c.q_heads + h) * c.head_dim + d;
        ASSERT_NEAR(out.f(i), ref.f(i), tol) << "t=" << t << " h=" << h << " d=" << d;
      }
    }
  }

  // The tables uploaded once (DeviceRows) and in place (out aliases q): the same bits.
  ASSERT_TRUE(testing::device_rows_and_in_place_match(dq, view, p.layout, params, out));
}

TEST(CudaAttention, MatchesReferenceAcrossShapes) {
  RINGLM_REQUIRE_GPU();
  uint32_t seed = 100;
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    // Head dims of real models and odd ones (tails of the per-lane chunks).
    for (int D : {64, 128, 256, 5, 40, 96, 200}) {
      // (q_heads, kv_heads, block_tokens, window, softcap, sinks): MHA, GQA 2, 3, 4 and 8, MQA;
      // full and sliding windows, with and without sinks; caps; block sizes 16, 5 and 1. 16-bit
      // K/V with head dims 64/128/256 decode on tensor cores (GQA 16 = two head groups); f32 and
      // odd head dims take the grouped CUDA-core kernel, or (GQA 3) the per-head one.
      const Config cs[] = {{dt, D, 4, 4, 16, 0, 0.0f},    {dt, D, 8, 2, 5, 0, 0.0f},
                           {dt, D, 8, 1, 16, 7, 0.0f},    {dt, D, 4, 4, 1, 50, 0.0f},
                           {dt, D, 2, 1, 16, 0, 30.0f},   {dt, D, 8, 2, 5, 32, 20.0f},
                           {dt, D, 6, 2, 16, 0, 0.0f},    {dt, D, 8, 4, 16, 24, 0.0f, 4},
                           {dt, D, 6, 2, 5, 20, 0.0f, 3}, {dt, D, 16, 2, 16, 0, 0.0f}};
      for (const Config& c : cs) check_config(c, seed++);
    }
  }
}

// Wide decode steps (cuda::wide_decode_rows(): parts of at least 512 keys) match the reference:
// the default threshold with 70 decode rows of 300-700 keys, then kRows' three decode rows with the
// threshold lowered to 3 (the 300-key row in one part instead of two, beside prefill rows).
TEST(CudaAttention, WideDecodeStepsMatchReference) {
  RINGLM_REQUIRE_GPU();
  ASSERT_EQ(cuda::wide_decode_rows(), 17);
  std::vector<RowSpec> many;
  for (int r = 0; r < 70; ++r) many.push_back({1, 300 + (r * 131) % 400});
  check_config({DType::BF16, 128, 8, 2, 16, 0, 0.0f}, 400, many);
  cuda::set_wide_decode_rows(3);
  uint32_t seed = 410;
  for (const Config& c :
       {Config{DType::BF16, 128, 8, 2, 16, 0, 0.0f}, Config{DType::F16, 64, 8, 4, 16, 24, 0.0f, 4},
        Config{DType::BF16, 256, 16, 2, 5, 0, 30.0f}})
    check_config(c, seed++);
  cuda::set_wide_decode_rows(17);
}

// Eight-warp decode blocks (cuda::set_narrow_decode_warps(8)) over 16-bit K/V: head dims 64 and
// 128 (256 keeps four warps: eight warps' stages would not fit shared memory), GQA 4 / 8 with
// sinks / 16, a sliding window and soft-capping match the reference, and a row alone equals its
// batched rows bit for bit (16 decode rows, 9,000 keys in many parts).
TEST(CudaAttention, EightWarpDecodeMatchesReferenceAndBatch) {
  RINGLM_REQUIRE_GPU();
  const int configured_warps = cuda::narrow_decode_warps();  // the env may set 8 for the suite
  cuda::set_narrow_decode_warps(8);
  std::vector<RowSpec> specs = kRows;
  specs.push_back({1, 9000});
  for (int r = 0; r < 12; ++r) specs.push_back({1, 600 + 17 * r});
  uint32_t seed = 500;
  for (const Config& c :
       {Config{DType::BF16, 128, 8, 2, 16, 0, 0.0f}, Config{DType::BF16, 64, 8, 1, 16, 40, 0.0f, 4},
        Config{DType::F16, 256, 16, 1, 16, 0, 0.0f},
        Config{DType::BF16, 128, 8, 2, 5, 32, 20.0f}}) {
    SCOPED_TRACE(::testing::Message() << "D=" << c.head_dim << " qh=" << c.q_heads);
    check_config(c, seed++, specs);
    const Problem p(c, specs, seed++);
    OnDevice dq(p.q), dk(p.k), dv(p.v);
    EXPECT_TRUE(testing::rows_alone_equal_batched(dq.t(), KvLayerView{dk.t(), dv.t()}, p.layout,
                                                  params_for(c)));
  }
  cuda::set_narrow_decode_warps(configured_warps);
}

// head_dim 256 prefill rows on the CUDA-core kernel (f32), as RINGLM_CUDA_PREFILL_TC_EXTENDED=0
// runs them: still matching the reference.
TEST(CudaAttention, CudaCorePrefillAtHeadDim256) {
  RINGLM_REQUIRE_GPU();
  cuda::set_prefill_tc_extended(false);
  uint32_t seed = 300;
  for (DType dt : {DType::BF16, DType::F16}) {
    const Config cs[] = {{dt, 256, 4, 4, 16, 0, 0.0f},
                         {dt, 256, 8, 2, 5, 32, 20.0f},
                         {dt, 256, 8, 4, 16, 24, 0.0f, 4}};
    for (const Config& c : cs) check_config(c, seed++);
  }
  cuda::set_prefill_tc_extended(true);
}

// Long decode contexts (up to 128 parts of 64 keys, then longer parts), windowed and not, with
// sinks.
TEST(CudaAttention, LongContext) {
  RINGLM_REQUIRE_GPU();
  for (int window : {0, 1024}) {
    const Config c{DType::BF16, 128, 32, 8, 16, window, 0.0f, window > 0 ? 4 : 0};
    const std::vector<RowSpec> specs = {{1, 5000}, {1, 4097}, {3, 3000}, {1, 8193}, {1, 20000}};
    const Problem p(c, specs, 7);
    const AttentionParams params = params_for(c);
    const int64_t T = p.layout.tokens();
    Owned ref(DType::F32, {T, c.q_heads, c.head_dim});
    reference::attention(p.q.t(), KvLayerView{p.k.t(), p.v.t()}, p.layout.rows(), params, ref.t());
    OnDevice dq(p.q), dk(p.k), dv(p.v), dout(DType::F32, {T, c.q_heads, c.head_dim});
    attention(dq.t(), KvLayerView{dk.t(), dv.t()}, p.layout.rows(), params, dout.t());
    const Owned out = dout.to_host();
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < c.q_heads; ++h) {
        const double tol = tolerance(p, c, params, t, h);
        for (int64_t d = 0; d < c.head_dim; ++d) {
          const int64_t i = (t * c.q_heads + h) * c.head_dim + d;
          ASSERT_NEAR(out.f(i), ref.f(i), tol)
              << "window=" << window << " t=" << t << " h=" << h << " d=" << d;
        }
      }
    }
  }
}

// Each row computed alone (its own one-row layout over the same cache) equals its rows of the
// batched result bit for bit: a row's output does not depend on what else is in a step of up to
// 16 decode rows (larger steps take wide parts: WideDecodeStepsMatchReference).
TEST(CudaAttention, BatchInvariant) {
  RINGLM_REQUIRE_GPU();
  std::vector<RowSpec> specs = kRows;
  specs.push_back({1, 9000});  // many decode parts
  // 16 decode rows in all: the most that still split by their own keys alone (below
  // cuda::wide_decode_rows(), so a 600-key row takes 256-key parts batched as alone).
  for (int r = 0; r < 12; ++r) specs.push_back({1, 600 + 17 * r});
  // The tensor-core decode kernel (GQA 4; 8 with sinks; 16), the grouped CUDA-core one (f32)
  // and the per-head one (GQA 3).
  for (const Config& c :
       {Config{DType::BF16, 128, 8, 2, 16, 0, 0.0f}, Config{DType::BF16, 64, 8, 1, 16, 40, 0.0f, 4},
        Config{DType::F16, 256, 16, 1, 16, 0, 0.0f}, Config{DType::F32, 128, 8, 2, 16, 0, 0.0f},
        Config{DType::F16, 96, 6, 2, 16, 0, 0.0f}}) {
    SCOPED_TRACE(::testing::Message() << "D=" << c.head_dim << " qh=" << c.q_heads);
    const Problem p(c, specs, 11);
    const AttentionParams params = params_for(c);
    OnDevice dq(p.q), dk(p.k), dv(p.v);
    ASSERT_TRUE(
        testing::rows_alone_equal_batched(dq.t(), KvLayerView{dk.t(), dv.t()}, p.layout, params));
  }
}

// A narrowed query range (--kv-quant-start runs attention per range): the queries at positions
// in [5, 40) equal the reference over the same range, every other row of `out` keeps its bits.
// The layout has decode rows inside and outside the range and prefill chunks that straddle it;
// the tensor-core kernels (bf16, head_dim 128), the grouped CUDA-core decode (f32) and the
// per-head kernels (GQA 3, head_dim 96).
TEST(CudaAttention, QueryRangeLeavesOtherRowsAlone) {
  RINGLM_REQUIRE_GPU();
  constexpr float kUntouched = 7.0f;
  for (const Config& c :
       {Config{DType::BF16, 128, 8, 2, 16, 0, 0.0f}, Config{DType::F32, 64, 8, 4, 5, 20, 0.0f},
        Config{DType::BF16, 96, 6, 2, 16, 0, 0.0f}}) {
    SCOPED_TRACE(::testing::Message() << testing::dtype_label(c.dtype) << " D=" << c.head_dim);
    const Problem p(c, kRows, 31);
    const AttentionParams params = params_for(c);
    AttentionRows rows = p.layout.rows();
    rows.query_pos_begin = 5;
    rows.query_pos_end = 40;
    const int64_t T = p.layout.tokens();
    Owned ref(DType::F32, {T, c.q_heads, c.head_dim}),
        start(DType::F32, {T, c.q_heads, c.head_dim});
    for (int64_t i = 0; i < ref.t().numel(); ++i) {
      ref.set(i, kUntouched);
      start.set(i, kUntouched);
    }
    reference::attention(p.q.t(), KvLayerView{p.k.t(), p.v.t()}, rows, params, ref.t());
    OnDevice dq(p.q), dk(p.k), dv(p.v), dout(start);
    attention(dq.t(), KvLayerView{dk.t(), dv.t()}, rows, params, dout.t());
    const Owned out = dout.to_host();
    int computed = 0;
    for (int64_t t = 0; t < T; ++t) {
      const bool wanted = ref.f(t * c.q_heads * c.head_dim) != kUntouched;
      computed += wanted ? 1 : 0;
      for (int64_t h = 0; h < c.q_heads; ++h) {
        const double tol = wanted ? tolerance(p, c, params, t, h) : 0.0;
        for (int64_t d = 0; d < c.head_dim; ++d) {
          const int64_t i = (t * c.q_heads + h) * c.head_dim + d;
          ASSERT_NEAR(out.f(i), ref.f(i), tol) << "t=" << t << " h=" << h << " d=" << d;
        }
      }
    }
    EXPECT_GT(computed, 8);  // the 13-query chunk's positions 5..12 and the decode at 36
  }
}

// A 16-bit out (the o projection's input) holds the f32 output rounded as the matmul's input pass
// rounds it (cuda::round_rows), bit for bit: in decode-only steps the split-K merge writes it, in
// steps with prefill chunks (and with the merge's rounding switched off) a pass after the
// attention does. The tensor-core decode kernel (bf16), the grouped CUDA-core one (f32) and the
// per-head one (GQA 3, head_dim 96); out in bf16 and f16.
TEST(CudaAttention, RoundedOutputIsTheF32OutputRounded) {
  RINGLM_REQUIRE_GPU();
  const std::vector<RowSpec> decode_only = {{1, 1}, {1, 37}, {1, 300}, {1, 9000}, {1, 16}};
  for (const Config& c :
       {Config{DType::BF16, 128, 8, 2, 16, 0, 0.0f}, Config{DType::F32, 128, 8, 2, 16, 40, 0.0f},
        Config{DType::F16, 96, 6, 2, 16, 0, 0.0f}}) {
    for (const auto* specs : {&decode_only, &kRows}) {
      for (const bool merge_rounds : {true, false}) {
        SCOPED_TRACE(::testing::Message()
                     << testing::dtype_label(c.dtype) << " D=" << c.head_dim
                     << (specs == &kRows ? " with prefill rows" : " decode only")
                     << (merge_rounds ? "" : " merge rounding off"));
        const Problem p(c, *specs, 41);
        const AttentionParams params = params_for(c);
        const int64_t T = p.layout.tokens();
        OnDevice dq(p.q), dk(p.k), dv(p.v), f32(DType::F32, {T, c.q_heads, c.head_dim});
        attention(dq.t(), KvLayerView{dk.t(), dv.t()}, p.layout.rows(), params, f32.t());
        cuda::set_merge_rounded(merge_rounds);
        for (const DType half : {DType::BF16, DType::F16}) {
          OnDevice rounded(half, {T, c.q_heads, c.head_dim}),
              expected(half, {T, c.q_heads * c.head_dim});
          attention(dq.t(), KvLayerView{dk.t(), dv.t()}, p.layout.rows(), params, rounded.t());
          Tensor f32_rows = f32.t().reshape({T, c.q_heads * c.head_dim});
          cuda::round_rows(f32_rows, expected.t());
          const Owned got = rounded.to_host(), want = expected.to_host();
          // Every query token's row is written: every element's bits.
          const auto* got_bits = got.t().ptr<const uint16_t>();
          const auto* want_bits = want.t().ptr<const uint16_t>();
          size_t differing = 0;
          for (int64_t i = 0; i < got.t().numel(); ++i) differing += got_bits[i] != want_bits[i];
          EXPECT_EQ(differing, 0u) << "of " << got.t().numel() << " " << testing::dtype_label(half);
        }
        cuda::set_merge_rounded(true);
      }
    }
  }
}

// Steps whose decode rows all have one part, their outputs written by the decode kernels
// themselves (cuda::set_decode_direct): the merge kernel's bits, into f32 and rounded to bf16, in
// narrow steps (rows to 256 keys, a prefill row beside them) and wide ones (20 decode rows to 512
// keys), over head dims 64 / 128 / 256, a window with sinks and soft-capping. A step with a longer
// row keeps the merge kernel.
TEST(CudaAttention, SinglePartDecodeWritesTheMergeKernelsBits) {
  RINGLM_REQUIRE_GPU();
  ASSERT_EQ(cuda::wide_decode_rows(), 17);
  const std::vector<RowSpec> narrow = {{1, 1}, {1, 37}, {13, 13}, {1, 256}, {1, 200}};
  const std::vector<RowSpec> wide = [] {
    std::vector<RowSpec> rows;
    for (int r = 0; r < 20; ++r) rows.push_back({1, 300 + 11 * r});
    return rows;
  }();
  uint32_t seed = 600;
  for (const Config& c :
       {Config{DType::BF16, 128, 8, 2, 16, 0, 0.0f}, Config{DType::F16, 64, 8, 4, 16, 24, 0.0f, 4},
        Config{DType::BF16, 256, 16, 2, 5, 0, 30.0f}}) {
    for (const auto* specs : {&narrow, &wide}) {
      const Problem p(c, *specs, seed++);
      OnDevice dq(p.q), dk(p.k), dv(p.v);
      for (const DType out_dtype : {DType::F32, DType::BF16}) {
        SCOPED_TRACE(::testing::Message() << testing::dtype_label(c.dtype) << " D=" << c.head_dim
                                          << (specs == &wide ? " wide step" : " narrow step")
                                          << " out " << testing::dtype_label(out_dtype));
        EXPECT_TRUE(testing::direct_write_changes_no_bits(
            dq.t(), KvLayerView{dk.t(), dv.t()}, p.layout.rows(), params_for(c), out_dtype, 1));
      }
    }
  }
  const Config c{DType::BF16, 128, 8, 2, 16, 0, 0.0f};
  const Problem p(c, {{1, 37}, {1, 300}}, seed);  // a 300-key row in a narrow step: two parts
  OnDevice dq(p.q), dk(p.k), dv(p.v);
  EXPECT_TRUE(testing::direct_write_changes_no_bits(dq.t(), KvLayerView{dk.t(), dv.t()},
                                                    p.layout.rows(), params_for(c), DType::F32, 0));
}

// Rows of up to 1024 keys in one part (cuda::set_decode_single_part), in blocks of four and of
// eight warps: they match the reference, a row alone equals its batched rows bit for bit, and with
// the decode kernels writing the outputs (cuda::set_decode_direct) the step gives the merge
// kernel's bits; a 2,000-key row beside them takes the usual parts, and the merge kernel with them.
TEST(CudaAttention, SinglePartRuleMatchesReferenceAndBatch) {
  RINGLM_REQUIRE_GPU();
  const int configured_warps = cuda::narrow_decode_warps();  // the env may set 8 for the suite
  cuda::set_decode_single_part(1024);
  const std::vector<RowSpec> specs = {{1, 300}, {13, 13}, {1, 700}, {1, 1024}, {1, 5}};
  uint32_t seed = 700;
  for (const int warps : {4, 8}) {
    cuda::set_narrow_decode_warps(warps);
    SCOPED_TRACE(::testing::Message() << warps << " warps a block");
    for (const Config& c : {Config{DType::BF16, 128, 8, 2, 16, 0, 0.0f},
                            Config{DType::F16, 256, 16, 2, 5, 0, 30.0f}}) {
      check_config(c, seed++, specs);
      const Problem p(c, specs, seed++);
      const AttentionParams params = params_for(c);
      OnDevice dq(p.q), dk(p.k), dv(p.v);
      const KvLayerView view{dk.t(), dv.t()};
      EXPECT_TRUE(testing::rows_alone_equal_batched(dq.t(), view, p.layout, params));
      for (const bool longer : {false, true}) {
        SCOPED_TRACE(longer ? "with a 2,000-key row" : "every row in one part");
        std::vector<RowSpec> rows = specs;
        if (longer) rows.push_back({1, 2000});
        const Problem q(c, rows, seed++);
        OnDevice qq(q.q), qk(q.k), qv(q.v);
        EXPECT_TRUE(testing::direct_write_changes_no_bits(qq.t(), KvLayerView{qk.t(), qv.t()},
                                                          q.layout.rows(), params, DType::F32,
                                                          longer ? 0 : 1));
      }
    }
  }
  cuda::set_decode_single_part(0);
  cuda::set_narrow_decode_warps(configured_warps);
}

TEST(CudaAttention, HostTablesAreStillValidated) {
  RINGLM_REQUIRE_GPU();
  const Config c{DType::BF16, 64, 2, 1, 16, 0, 0.0f};
  Problem p(c, {{1, 20}}, 3);
  p.layout.block_table[1] = p.layout.num_blocks;  // out of the pool
  OnDevice dq(p.q), dk(p.k), dv(p.v), dout(DType::F32, {1, 2, 64});
  EXPECT_THROW(
      attention(dq.t(), KvLayerView{dk.t(), dv.t()}, p.layout.rows(), params_for(c), dout.t()),
      Error);
}

}  // namespace
}  // namespace ringlm::ops
