// The tensor-core decode GEMM for MLX-quantized weights (backends/cuda/quant_mma.h) for 1..16
// rows (17..128 as row groups of 16 or 32 rows), 4- and 8-bit codes, bf16 scales, f32 or bf16 x.
// Oracles: the CPU's quantized matmul within the kernel's stated bound (quant_checks.h) on random
// codes, scales, biases and x; bit for bit on small integers (every dequantized weight, product
// and partial sum exact, so any k order, split or tile must give the CPU's bits); batch invariance
// bit for bit (a row alone or among 16, with and without splits of K, and repeated launches: the
// split tickets return to zero); bf16 x and subnormal codes the bits of the usual path; strided
// rows; the shapes it declines take the other paths (quant_mma_count() tells which path ran).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <string>
#include <vector>

#include "backends/cuda/quant_mma.h"
#include "backends/cuda/runtime.h"
#include "cuda_test_util.h"
#include "op_checks.h"
#include "quant_checks.h"

namespace ringlm::ops {
namespace {

using testing::DeviceQuant;
using testing::OnDevice;
using testing::Owned;
using testing::QuantFixture;
using testing::QuantPath;
using testing::SwitchFor;

struct Case {
  int64_t M, K, N;
};

// y = x · dequant(q)ᵀ with a same-bits switch off, then on: the same bits, and `count` (the
// switched kernel's launches, or all quant_mma launches) one higher with it on.
::testing::AssertionResult same_bits_either_way(bool (*get)(), void (*set)(bool),
                                                int64_t (*count)(), const OnDevice& x,
                                                const QuantizedMatrix& q) {
  const int64_t M = x.t().shape[0], N = q.rows();
  OnDevice off_y(DType::F32, {M, N}), on_y(DType::F32, {M, N});
  {
    const SwitchFor off(get, set, false);
    matmul(x.t(), Weight::quantized(q), Tensor(), off_y.t());
  }
  {
    const SwitchFor on(get, set, true);
    const int64_t before = count();
    matmul(x.t(), Weight::quantized(q), Tensor(), on_y.t());
    if (count() != before + 1) return ::testing::AssertionFailure() << "not launched switched on";
  }
  if (!testing::bitwise_equal(on_y.to_host().t(), off_y.to_host().t()))
    return ::testing::AssertionFailure() << "the bits differ with the switch on";
  return ::testing::AssertionSuccess();
}

// One row of one page (N = 1: one partial tile); many splits of few tiles (k/v of an 8B model:
// 1024 × 4096; down: 64 × 14336); none (N = 1000 over K = 512); N off the 64-row tiles; rows
// around the mma's 8-row tiles.
const std::vector<Case> kCases = {{1, 256, 1},     {1, 4096, 1024}, {3, 1024, 67},
                                  {8, 14336, 64},  {9, 512, 1000},  {16, 4096, 333},
                                  {13, 2304, 130}, {2, 4096, 4096}};
const int kGroups[] = {32, 64, 128};

TEST(CudaQuantMma, MatchesCpuOnRandomInputs) {
  RINGLM_REQUIRE_GPU();
  ASSERT_TRUE(cuda::quant_mma_enabled());
  for (int bits : {4, 8}) {
    for (int group : kGroups) {
      for (const Case& c : kCases) {
        SCOPED_TRACE(::testing::Message() << "bits=" << bits << " group=" << group << " M=" << c.M
                                          << " K=" << c.K << " N=" << c.N);
        const QuantFixture f(c.N, c.K, bits, group, DType::BF16,
                             static_cast<uint32_t>(bits * 1000 + group + c.K + c.N));
        QuantPath path = QuantPath::Gemv;
        testing::expect_matches_cpu(f, c.M, c.M % 2 == 1, static_cast<uint32_t>(c.M + group),
                                    &path);
        ASSERT_EQ(path, QuantPath::Mma) << "the tensor-core kernel did not run";
      }
    }
  }
}

// Scales and biases in [-1, 1] and x in [-2, 2] as small integers: every dequantized weight is an
// integer of magnitude <= 256 (exact in bf16), every product and partial sum an exact f32 integer.
TEST(CudaQuantMma, ExactOnSmallIntegers) {
  RINGLM_REQUIRE_GPU();
  for (int bits : {4, 8}) {
    for (int group : kGroups) {
      for (const Case& c : kCases) {
        SCOPED_TRACE(::testing::Message() << "bits=" << bits << " group=" << group << " M=" << c.M
                                          << " K=" << c.K << " N=" << c.N);
        QuantFixture f(c.N, c.K, bits, group, DType::BF16, 51);
        testing::fill_small_ints(f.scales, 52, 1);
        testing::fill_small_ints(f.biases, 53, 1);
        const DeviceQuant dw(f);
        Owned x(DType::F32, {c.M, c.K}), b(DType::F32, {c.N}), ref(DType::F32, {c.M, c.N});
        testing::fill_small_ints(x, 54);
        testing::fill_small_ints(b, 55, 50);
        matmul(x.t(), Weight::quantized(f.q), b.t(), ref.t());
        OnDevice dx(x), db(b), dy(DType::F32, {c.M, c.N});
        const int64_t before = cuda::quant_mma_count();
        matmul(dx.t(), Weight::quantized(dw.q), db.t(), dy.t());
        ASSERT_EQ(cuda::quant_mma_count(), before + 1);
        ASSERT_TRUE(testing::bitwise_equal(dy.to_host().t(), ref.t()));
      }
    }
  }
}

// Row m's output is the same bits whether the call has 1 row or 16 (both row-tile instantiations),
// alone at its own offset, with and without splits of K — and each launch gives the same bits
// again (the split tickets return to zero).
TEST(CudaQuantMma, RowsAreTheSameBitsInAnyBatch) {
  RINGLM_REQUIRE_GPU();
  for (int bits : {4, 8}) {
    for (const Case& shape : {Case{16, 4096, 1024}, Case{16, 512, 1000}, Case{16, 14336, 64}}) {
      SCOPED_TRACE(::testing::Message() << "bits=" << bits << " K=" << shape.K << " N=" << shape.N);
      const int64_t K = shape.K, N = shape.N, rows = shape.M;
      const QuantFixture f(N, K, bits, 64, DType::BF16, static_cast<uint32_t>(K + N + bits));
      const DeviceQuant dw(f);
      const Weight w = Weight::quantized(dw.q);
      Owned x(DType::F32, {rows, K});
      testing::fill_uniform(x, 61, -2.0f, 2.0f);
      OnDevice dx(x), all(DType::F32, {rows, N});
      matmul(dx.t(), w, Tensor(), all.t());
      const Owned reference_rows = all.to_host();
      for (int64_t M = 1; M <= rows; ++M) {
        OnDevice y(DType::F32, {M, N});
        matmul(dx.t().slice_rows(0, M), w, Tensor(), y.t());
        const Owned got = y.to_host();
        ASSERT_EQ(std::memcmp(got.t().data, reference_rows.t().data, M * N * sizeof(float)), 0)
            << "M=" << M;
      }
      for (int64_t i : {int64_t{5}, int64_t{12}}) {
        OnDevice y(DType::F32, {1, N});
        matmul(dx.t().slice_rows(i, i + 1), w, Tensor(), y.t());
        ASSERT_EQ(std::memcmp(y.to_host().t().data, reference_rows.t().ptr<float>() + i * N,
                              N * sizeof(float)),
                  0)
            << "row " << i << " alone";
      }
    }
  }
}

// Scales and biases staged through shared memory with each x page (the default at 9-16 rows: the
// cases' rows) or loaded per lane and chunk from global memory: the same values reach the same
// arithmetic, so the same bits. (The CPU-reference tests above run the staged path at 9-16 rows.)
TEST(CudaQuantMma, StagedScalesChangeNoBits) {
  RINGLM_REQUIRE_GPU();
  ASSERT_TRUE(cuda::quant_mma_staged_scales());
  for (int bits : {4, 8}) {
    for (int group : kGroups) {
      for (const Case& c : {Case{12, 4096, 1024}, Case{9, 512, 1000}, Case{16, 14336, 64}}) {
        SCOPED_TRACE(::testing::Message() << "bits=" << bits << " group=" << group << " M=" << c.M
                                          << " K=" << c.K << " N=" << c.N);
        const QuantFixture f(c.N, c.K, bits, group, DType::BF16, static_cast<uint32_t>(group + 7));
        const DeviceQuant dw(f);
        Owned x(DType::F32, {c.M, c.K});
        testing::fill_uniform(x, 101);
        ASSERT_TRUE(same_bits_either_way(cuda::quant_mma_staged_scales,
                                         cuda::set_quant_mma_staged_scales, cuda::quant_mma_count,
                                         OnDevice(x), dw.q));
      }
    }
  }
}

// Warp-private x pages at one row (quant_mma_warp_x()): the same loads into the same arithmetic,
// so the block-shared pages' bits — with and without splits of K, every group size, both widths.
TEST(CudaQuantMma, WarpPrivatePagesChangeNoBits) {
  RINGLM_REQUIRE_GPU();
  const auto warp_pages = [](bool on) {
    return SwitchFor(cuda::quant_mma_warp_x, cuda::set_quant_mma_warp_x, on);
  };
  const std::vector<Case> cases = {{1, 256, 1},    {1, 4096, 1024}, {1, 1024, 67},
                                   {1, 14336, 64}, {1, 512, 1000},  {1, 4096, 4096}};
  for (int bits : {4, 8}) {
    for (int group : kGroups) {
      for (const Case& c : cases) {
        SCOPED_TRACE(::testing::Message() << "bits=" << bits << " group=" << group << " M=" << c.M
                                          << " K=" << c.K << " N=" << c.N);
        const QuantFixture f(c.N, c.K, bits, group, DType::BF16,
                             static_cast<uint32_t>(bits + group + c.N));
        const DeviceQuant dw(f);
        Owned x(DType::F32, {c.M, c.K}), b(DType::BF16, {c.N});
        testing::fill_uniform(x, 111);
        testing::fill_uniform(b, 112);
        OnDevice dx(x), db(b), shared(DType::F32, {c.M, c.N}), own(DType::F32, {c.M, c.N});
        {
          const auto block_pages = warp_pages(false);  // the reference: the block's pages
          matmul(dx.t(), Weight::quantized(dw.q), db.t(), shared.t());
        }
        const auto on = warp_pages(true);
        const int64_t before = cuda::quant_mma_count();
        const int64_t warp_before = cuda::quant_mma_warp_x_count();
        matmul(dx.t(), Weight::quantized(dw.q), db.t(), own.t());
        ASSERT_EQ(cuda::quant_mma_count() - before, 1);
        ASSERT_EQ(cuda::quant_mma_warp_x_count() - warp_before, 1)
            << "the warp-private pages did not run";
        ASSERT_TRUE(testing::bitwise_equal(own.to_host().t(), shared.to_host().t()));
      }
    }
  }
  // Two rows keep the block's pages with the switch on.
  const QuantFixture f(64, 512, 4, 64, DType::BF16, 113);
  const DeviceQuant dw(f);
  Owned x(DType::F32, {2, 512});
  testing::fill_uniform(x, 114);
  OnDevice dx(x), y(DType::F32, {2, 64});
  const auto on = warp_pages(true);
  const int64_t warp_before = cuda::quant_mma_warp_x_count();
  matmul(dx.t(), Weight::quantized(dw.q), Tensor(), y.t());
  EXPECT_EQ(cuda::quant_mma_warp_x_count() - warp_before, 0);
}

// q/k/v (three weights) and gate/up (two) over one x in one launch through ops::matmul_many: each
// output the same bits as the weight's own call (each target keeps its own split of K), biases
// and strided outputs per target; weights of different widths are not joined.
TEST(CudaQuantMma, JoinedTargetsEqualSeparateCallsBitwise) {
  RINGLM_REQUIRE_GPU();
  const int64_t K = 2048;
  for (int bits : {4, 8}) {
    for (int64_t M : {int64_t{1}, int64_t{6}, int64_t{16}}) {
      SCOPED_TRACE(::testing::Message() << "bits=" << bits << " M=" << M);
      const std::vector<int64_t> widths = {1000, 256, 130};
      std::deque<QuantFixture> fixtures;  // deques: elements stay put
      for (int64_t n : widths)
        fixtures.emplace_back(n, K, bits, 64, DType::BF16, static_cast<uint32_t>(n + bits));
      std::deque<DeviceQuant> dev;
      for (const QuantFixture& f : fixtures) dev.emplace_back(f);
      std::vector<Weight> weights;
      for (const DeviceQuant& d : dev) weights.push_back(Weight::quantized(d.q));
      Owned x(DType::F32, {M, K}), b(DType::BF16, {widths[1]});
      testing::fill_uniform(x, 91);
      testing::fill_uniform(b, 92);
      OnDevice dx(x), db(b);
      const Tensor no_bias;
      const Tensor* biases[] = {&no_bias, &db.t(), &no_bias};
      for (size_t count : {size_t{2}, size_t{3}}) {
        std::deque<OnDevice> alone, joined;
        for (size_t i = 0; i < count; ++i) {
          alone.emplace_back(DType::F32, std::initializer_list<int64_t>{M, widths[i]});
          joined.emplace_back(DType::F32, std::initializer_list<int64_t>{M, widths[i]});
          matmul(dx.t(), weights[i], *biases[i], alone.back().t());
        }
        std::vector<MatmulTarget> targets;
        for (size_t i = 0; i < count; ++i)
          targets.push_back({&weights[i], biases[i], &joined[i].t()});
        const int64_t before = cuda::quant_mma_count();
        matmul_many(dx.t(), targets);
        EXPECT_EQ(cuda::quant_mma_count(), before + 1) << count << " targets in one launch";
        for (size_t i = 0; i < count; ++i)
          EXPECT_TRUE(testing::bitwise_equal(joined[i].to_host().t(), alone[i].to_host().t()))
              << "target " << i << " of " << count;
      }
    }
  }
  // A 4-bit and an 8-bit weight: two launches, the same bits.
  const QuantFixture f4(300, K, 4, 64, DType::BF16, 93), f8(200, K, 8, 64, DType::BF16, 94);
  const DeviceQuant d4(f4), d8(f8);
  const Weight w4 = Weight::quantized(d4.q), w8 = Weight::quantized(d8.q);
  Owned x(DType::F32, {3, K});
  testing::fill_uniform(x, 95);
  OnDevice dx(x), y4(DType::F32, {3, 300}), y8(DType::F32, {3, 200});
  const Tensor no_bias;
  const MatmulTarget mixed[] = {{&w4, &no_bias, &y4.t()}, {&w8, &no_bias, &y8.t()}};
  const int64_t before = cuda::quant_mma_count();
  matmul_many(dx.t(), mixed);
  EXPECT_EQ(cuda::quant_mma_count(), before + 2);
  OnDevice a4(DType::F32, {3, 300});
  matmul(dx.t(), w4, no_bias, a4.t());
  EXPECT_TRUE(testing::bitwise_equal(y4.to_host().t(), a4.to_host().t()));
}

// The default row-group limit follows the device's DRAM bandwidth (quant_mma.h): the device
// reports its memory clock and bus width (a zero would quietly take the H100's rule everywhere),
// and the limit is 128 rows below kQuantMmaWideGroupsMaxGbps, 64 above, 64 without wide groups.
TEST(CudaQuantMma, GroupedRowLimitFollowsTheDramBandwidth) {
  RINGLM_REQUIRE_GPU();
  const double gbps = cuda::dram_peak_gbps();
  RecordProperty("dram_peak_gbps", std::to_string(gbps));
  EXPECT_GT(gbps, 500.0);               // every GPU ringlm targets (H100 ~3,350, H200 ~4,800)
  cuda::set_quant_mma_grouped_rows(0);  // the default, whatever the environment asked
  {
    const SwitchFor wide(cuda::quant_mma_wide_groups, cuda::set_quant_mma_wide_groups, true);
    EXPECT_EQ(cuda::quant_mma_grouped_rows(), gbps < cuda::kQuantMmaWideGroupsMaxGbps
                                                  ? cuda::kQuantMmaDefaultWideGroupedRows
                                                  : cuda::kQuantMmaDefaultGroupedRows);
  }
  {
    const SwitchFor narrow(cuda::quant_mma_wide_groups, cuda::set_quant_mma_wide_groups, false);
    EXPECT_EQ(cuda::quant_mma_grouped_rows(), cuda::kQuantMmaDefaultGroupedRows);
    cuda::set_quant_mma_grouped_rows(80);  // an override holds whatever the width
    EXPECT_EQ(cuda::quant_mma_grouped_rows(), 80);
    cuda::set_quant_mma_grouped_rows(cuda::kQuantMmaMaxGroupedRows + 1);  // out of range: default
    EXPECT_EQ(cuda::quant_mma_grouped_rows(), cuda::kQuantMmaDefaultGroupedRows);
  }
  cuda::set_quant_mma_grouped_rows(0);
}

// 4-bit codes dequantized as bf16 subnormals times the scale scaled by 2^133 (1-8 rows, chunks
// whose scales all lie in [2^-126, 2^-5)) give the bits of the usual 128 + q path: scales in
// ±0.03 (every chunk takes it) and with a zero, a large and a negative scale planted (the chunks
// of those rows fall back), at 1 row (warp-private pages), 2 and 8 rows, with and without splits.
TEST(CudaQuantMma, SubnormalCodesChangeNoBits) {
  RINGLM_REQUIRE_GPU();
  for (int group : kGroups) {
    for (const Case& c : {Case{1, 4096, 1024}, Case{2, 512, 1000}, Case{8, 14336, 64}}) {
      for (bool planted : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "group=" << group << " M=" << c.M << " K=" << c.K
                                          << " N=" << c.N << (planted ? " planted scales" : ""));
        QuantFixture f(c.N, c.K, 4, group, DType::BF16, static_cast<uint32_t>(group + c.M));
        testing::fill_uniform(f.scales, 141, -0.03f, 0.03f);
        if (planted) {
          const int64_t groups = c.K / group;
          f.scales.set(0, 0.0f);
          f.scales.set((c.N / 2) * groups + 1, 0.5f);
          f.scales.set((c.N - 1) * groups + groups - 1, -0.25f);
        }
        const DeviceQuant dw(f);
        Owned x(DType::F32, {c.M, c.K});
        testing::fill_uniform(x, 142);
        ASSERT_TRUE(same_bits_either_way(cuda::quant_mma_subnormal_codes,
                                         cuda::set_quant_mma_subnormal_codes, cuda::quant_mma_count,
                                         OnDevice(x), dw.q));
      }
    }
  }
}

// One-row calls with each warp's scales and biases copied into shared memory with its x pages
// (quant_mma_warp_scales) give the bits of the per-lane loads: both widths, every group size, with
// and without splits of K, N off the 64-row tiles (a warp's rows past N copy row N - 1), scales
// small enough for the subnormal codes and not.
TEST(CudaQuantMma, WarpScalesChangeNoBits) {
  RINGLM_REQUIRE_GPU();
  ASSERT_TRUE(cuda::quant_mma_warp_x());
  for (int bits : {4, 8}) {
    for (int group : kGroups) {
      for (const Case& c : {Case{1, 4096, 1024}, Case{1, 768, 200}, Case{1, 14336, 64}}) {
        for (bool small_scales : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "bits=" << bits << " group=" << group << " K=" << c.K << " N=" << c.N
                       << (small_scales ? " small scales" : ""));
          QuantFixture f(c.N, c.K, bits, group, DType::BF16,
                         static_cast<uint32_t>(bits + group + c.K));
          if (small_scales) testing::fill_uniform(f.scales, 161, -0.03f, 0.03f);
          const DeviceQuant dw(f);
          // 4-byte aligned scales and biases: the per-warp copies apply.
          ASSERT_EQ(reinterpret_cast<uintptr_t>(dw.q.scales.data) % 4, 0u);
          ASSERT_EQ(reinterpret_cast<uintptr_t>(dw.q.biases.data) % 4, 0u);
          Owned x(DType::F32, {c.M, c.K});
          testing::fill_uniform(x, 162);
          ASSERT_TRUE(same_bits_either_way(cuda::quant_mma_warp_scales,
                                           cuda::set_quant_mma_warp_scales,
                                           cuda::quant_mma_warp_x_count, OnDevice(x), dw.q));
        }
      }
    }
  }
}

// One-row calls with each warp's codes through its shared-memory ring (quant_mma_smem_codes) give
// the bits of the register ring: both widths, every group size, blocks of fewer chunks than the
// ring (one page; three), many splits of K (down: 64 × 14336), N off the 64-row tiles, with the
// scales per lane and per warp (the two layouts of the warp's shared memory).
TEST(CudaQuantMma, SmemCodesChangeNoBits) {
  RINGLM_REQUIRE_GPU();
  ASSERT_TRUE(cuda::quant_mma_warp_x());
  for (int bits : {4, 8}) {
    for (int group : kGroups) {
      for (const Case& c :
           {Case{1, 256, 1}, Case{1, 768, 200}, Case{1, 4096, 1024}, Case{1, 14336, 64}}) {
        for (bool warp_scales : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "bits=" << bits << " group=" << group << " K=" << c.K
                                            << " N=" << c.N << (warp_scales ? " warp scales" : ""));
          const QuantFixture f(c.N, c.K, bits, group, DType::BF16,
                               static_cast<uint32_t>(bits + group + c.K + c.N));
          const DeviceQuant dw(f);
          Owned x(DType::F32, {c.M, c.K});
          testing::fill_uniform(x, 171);
          const SwitchFor scales(cuda::quant_mma_warp_scales, cuda::set_quant_mma_warp_scales,
                                 warp_scales);
          ASSERT_TRUE(same_bits_either_way(cuda::quant_mma_smem_codes,
                                           cuda::set_quant_mma_smem_codes,
                                           cuda::quant_mma_smem_codes_count, OnDevice(x), dw.q));
        }
      }
    }
  }
}

// Row groups (17-64 rows, 128 with wide groups on an H100; quant_mma_row_groups(): on by default):
// each group of 16 rows — or of 32 with wide groups, where they pay — runs a 16-row (32-row) call's
// blocks, so the rows are the bits of 16-row calls over them (the last group shorter) — with and
// without splits of K, with staged and per-lane scales, both widths — and match the CPU. The
// limit is the kernel's bound (256 rows) here whatever the device and width, so the 80- to
// 256-row cases run everywhere.
TEST(CudaQuantMma, RowGroupsAreTheBitsOfSixteenRowCalls) {
  RINGLM_REQUIRE_GPU();
  const SwitchFor groups(cuda::quant_mma_row_groups, cuda::set_quant_mma_row_groups, true);
  const testing::SettingFor limit(cuda::set_quant_mma_grouped_rows, cuda::kQuantMmaMaxGroupedRows);
  for (int bits : {4, 8}) {
    for (const Case& c :
         {Case{17, 4096, 1024}, Case{40, 512, 1000}, Case{64, 14336, 64}, Case{80, 512, 1000},
          Case{128, 512, 130}, Case{200, 1024, 70}, Case{256, 512, 130}}) {
      for (bool wide : {false, true}) {
        const SwitchFor wide_groups(cuda::quant_mma_wide_groups, cuda::set_quant_mma_wide_groups,
                                    wide);
        // 40 rows: three 16-row groups beat two of 32 (the rule); the others take 32-row ones.
        const bool expect_wide = wide && c.M != 40;
        SCOPED_TRACE(::testing::Message() << "bits=" << bits << " M=" << c.M << " K=" << c.K
                                          << " N=" << c.N << (wide ? " wide groups" : ""));
        const QuantFixture f(c.N, c.K, bits, 64, DType::BF16, static_cast<uint32_t>(c.M + bits));
        const DeviceQuant dw(f);
        const Weight w = Weight::quantized(dw.q);
        Owned x(DType::F32, {c.M, c.K});
        testing::fill_uniform(x, 121, -2.0f, 2.0f);
        OnDevice dx(x);
        for (bool staged : {true, false}) {
          SCOPED_TRACE(staged ? "staged scales" : "per-lane scales");
          const SwitchFor staging(cuda::quant_mma_staged_scales, cuda::set_quant_mma_staged_scales,
                                  staged);
          OnDevice all(DType::F32, {c.M, c.N});
          const int64_t before = cuda::quant_mma_count();
          const int64_t wide_before = cuda::quant_mma_wide_group_count();
          matmul(dx.t(), w, Tensor(), all.t());
          ASSERT_EQ(cuda::quant_mma_count(), before + 1) << "the row groups did not run";
          ASSERT_EQ(cuda::quant_mma_wide_group_count(), wide_before + (expect_wide ? 1 : 0));
          const Owned got = all.to_host();
          for (int64_t m0 = 0; m0 < c.M; m0 += 16) {
            const int64_t rows = std::min<int64_t>(16, c.M - m0);
            OnDevice y(DType::F32, {rows, c.N});
            matmul(dx.t().slice_rows(m0, m0 + rows), w, Tensor(), y.t());
            ASSERT_EQ(std::memcmp(y.to_host().t().data, got.t().ptr<float>() + m0 * c.N,
                                  rows * c.N * sizeof(float)),
                      0)
                << "rows " << m0 << ".." << m0 + rows;
          }
        }
        QuantPath path = QuantPath::Gemv;
        testing::expect_matches_cpu(f, c.M, true, static_cast<uint32_t>(c.N), &path);
        ASSERT_EQ(path, QuantPath::Mma);
      }
    }
  }
}

// x already rounded to bf16 (ops::matmul_input_dtype from 9 rows) gives the bits of its f32
// values: quant_mma's bf16 kernels at 9-16 rows and in row groups of 16 and 32 (the limit set to
// 128 rows: the 80- and 128-row cases everywhere), the dequantized tiles past the limit — the same
// mma operands, or the same GEMM. Strided x rows (8 bf16 apart beyond K) too.
TEST(CudaQuantMma, HalfXIsTheBitsOfItsF32Values) {
  RINGLM_REQUIRE_GPU();
  const testing::SettingFor limit(cuda::set_quant_mma_grouped_rows,
                                  cuda::kQuantMmaDefaultWideGroupedRows);
  const SwitchFor half_x(cuda::quant_mma_half_x, cuda::set_quant_mma_half_x, true);
  ASSERT_TRUE(cuda::quant_mma_row_groups() && cuda::quant_mma_wide_groups());
  for (int bits : {4, 8}) {
    for (const Case& c :
         {Case{9, 4096, 1024}, Case{16, 512, 1000}, Case{17, 14336, 64}, Case{40, 512, 1000},
          Case{64, 4096, 333}, Case{80, 512, 1000}, Case{128, 512, 130}, Case{129, 512, 200}}) {
      for (int64_t pad : {int64_t{0}, int64_t{8}}) {
        // Past the limit (tiles): x contiguous, as the f32 path's rounded copy is (cuBLAS may
        // pick its algorithm by the leading dimension).
        if (pad > 0 && c.M > cuda::kQuantMmaDefaultWideGroupedRows) continue;
        SCOPED_TRACE(::testing::Message() << "bits=" << bits << " M=" << c.M << " K=" << c.K
                                          << " N=" << c.N << " x row pad=" << pad);
        const QuantFixture f(c.N, c.K, bits, 64, DType::BF16, static_cast<uint32_t>(c.M + c.N));
        const DeviceQuant dw(f);
        const Weight w = Weight::quantized(dw.q);
        ASSERT_EQ(matmul_input_dtype(w, c.M), DType::BF16);
        Owned xh(DType::BF16, {c.M, c.K + pad}), xf(DType::F32, {c.M, c.K + pad});
        testing::fill_uniform(xh, 131, -2.0f, 2.0f);
        for (int64_t i = 0; i < xh.t().numel(); ++i) xf.set(i, xh.f(i));
        OnDevice dxh(xh), dxf(xf), from_f32(DType::F32, {c.M, c.N}),
            from_half(DType::F32, {c.M, c.N});
        const auto rows = [&](OnDevice& x) {  // [M, K] inside [M, K + pad]
          Tensor v = x.t();
          v.shape[1] = c.K;
          return v;
        };
        matmul(rows(dxf), w, Tensor(), from_f32.t());
        const int64_t mma_before = cuda::quant_mma_count();
        const int64_t half_before = cuda::quant_mma_half_x_count();
        matmul(rows(dxh), w, Tensor(), from_half.t());
        const bool by_mma = c.M <= cuda::quant_mma_grouped_rows();
        EXPECT_EQ(cuda::quant_mma_count(), mma_before + (by_mma ? 1 : 0));
        EXPECT_EQ(cuda::quant_mma_half_x_count(), half_before + (by_mma ? 1 : 0));
        ASSERT_TRUE(testing::bitwise_equal(from_half.to_host().t(), from_f32.to_host().t()));
      }
    }
  }
}

// x and y as row views inside wider buffers (x rows 4 floats apart beyond K: the kernel's 16-byte
// copies; 5: declined, the GEMV or tiles run); y's padding stays untouched. Small integers: exact.
TEST(CudaQuantMma, StridedRows) {
  RINGLM_REQUIRE_GPU();
  const int64_t K = 512, N = 70;
  for (int bits : {4, 8}) {
    QuantFixture f(N, K, bits, 64, DType::BF16, 71);
    testing::fill_small_ints(f.scales, 72, 1);
    testing::fill_small_ints(f.biases, 73, 1);
    const DeviceQuant dw(f);
    for (int64_t x_pad : {int64_t{4}, int64_t{5}}) {
      for (int64_t M : {int64_t{3}, int64_t{11}}) {
        SCOPED_TRACE(::testing::Message() << "bits=" << bits << " x_pad=" << x_pad << " M=" << M);
        const int64_t before = cuda::quant_mma_count();
        ASSERT_TRUE(testing::strided_rows_match(
            {M, K, N, x_pad, 74, 75},
            [&](const Tensor& x, Tensor& y) { matmul(x, Weight::quantized(dw.q), Tensor(), y); },
            [&](const Tensor& x, Tensor& y) { matmul(x, Weight::quantized(f.q), Tensor(), y); }));
        EXPECT_EQ(cuda::quant_mma_count(), before + (x_pad == 4 ? 1 : 0));
      }
    }
  }
}

// What the kernel declines (other widths, non-bf16 scales, more than 16 rows — more than
// quant_mma_grouped_rows() with row groups — K not a multiple of 256, the kernel switched off) runs
// the other paths and still matches the CPU.
TEST(CudaQuantMma, DeclinedShapesTakeTheOtherPaths) {
  RINGLM_REQUIRE_GPU();
  struct Declined {
    int bits;
    DType scales;
    int64_t M, K;
  };
  for (const Declined& d :
       {Declined{3, DType::BF16, 4, 512}, Declined{4, DType::F16, 4, 512},
        Declined{8, DType::F32, 4, 512},
        Declined{4, DType::BF16,
                 cuda::quant_mma_row_groups() ? cuda::quant_mma_grouped_rows() + 1 : 17, 512},
        Declined{8, DType::BF16, 4, 384}}) {
    SCOPED_TRACE(::testing::Message() << "bits=" << d.bits << " " << testing::dtype_label(d.scales)
                                      << " M=" << d.M << " K=" << d.K);
    const QuantFixture f(90, d.K, d.bits, 64, d.scales, 81);
    QuantPath path = QuantPath::Mma;
    testing::expect_matches_cpu(f, d.M, true, 82, &path);
    EXPECT_NE(path, QuantPath::Mma);
  }
  const QuantFixture f(90, 512, 4, 64, DType::BF16, 83);
  const testing::QuantMmaOff off;
  QuantPath path = QuantPath::Mma;
  testing::expect_matches_cpu(f, 4, true, 84, &path);
  EXPECT_EQ(path, QuantPath::Gemv);
}

}  // namespace
}  // namespace ringlm::ops
