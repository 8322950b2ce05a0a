// MLX affine-quantized weights on the GPU (cuda_ops.h: matmul_quantized, embedding_quantized)
// against the CPU kernels (ops/weight.h on host tensors), for every bits / group size / scale
// dtype: the fused GEMV (M <= 8), the dequantized-tile path (M > 8) and, where it applies, the
// tensor-core kernel (quant_mma.h; its own tests: quant_mma_test.cc) within the stated bounds,
// bit for bit on small integers, batch invariance, strided rows, several column tiles; the
// embedding bit for bit. The argument checks at the end need no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kv/affine_codec.h"
#include "op_checks.h"
#include "ops/quant_fixture.h"
#include "ops/weight.h"
#include "quant_checks.h"

namespace ringlm::ops {
namespace {

using testing::DeviceQuant;
using testing::expect_matches_cpu;
using testing::kEps;
using testing::kGemvRows;
using testing::OnDevice;
using testing::Owned;
using testing::QuantFixture;
using testing::QuantPath;

const int kBits[] = {2, 3, 4, 5, 6, 8};
const int kGroups[] = {32, 64, 128};
const DType kScaleTypes[] = {DType::F32, DType::BF16, DType::F16};

TEST(CudaQuantMatmul, MatchesCpuForEveryFormatAcrossTheRowBound) {
  RINGLM_REQUIRE_GPU();
  for (int bits : kBits) {
    for (int group : kGroups) {
      for (DType sd : kScaleTypes) {
        const QuantFixture f(37, 384, bits, group, sd, 5u * static_cast<uint32_t>(bits + group));
        for (int64_t M : {1, 2, 7, 8, 9, 17}) {
          SCOPED_TRACE(::testing::Message() << "bits=" << bits << " group=" << group << " "
                                            << testing::dtype_label(sd) << " M=" << M);
          expect_matches_cpu(f, M, M % 2 == 1, static_cast<uint32_t>(M));
        }
      }
    }
  }
}

// K of 132 chunks of 32 codes: some of the GEMV's 128 threads take two chunks.
TEST(CudaQuantMatmul, MatchesCpuWithLongRows) {
  RINGLM_REQUIRE_GPU();
  for (int bits : {4, 8, 3}) {
    const QuantFixture f(11, 4224, bits, 64, DType::BF16, 3);
    for (int64_t M : {1, 8, 9}) {
      SCOPED_TRACE(::testing::Message() << "bits=" << bits << " M=" << M);
      expect_matches_cpu(f, M, true, 7);
    }
  }
}

// The pipelined GEMV (up to 4 rows; x of a chunk loaded at once up to 2) with its wide tiles (8
// columns per block: codes of up to 4 bits, N above 2048; N = 2053 leaves a partial last tile) with
// rows of 132 and 264 chunks (threads with a second pair of chunks): bit for bit the first kernel's
// sums (both give each thread the same chunks in the same order; the first kernel is checked
// against the CPU above), and one shape against the CPU as well.
TEST(CudaQuantMatmul, PipelinedGemvEqualsTheFirstKernel) {
  RINGLM_REQUIRE_GPU();
  ASSERT_TRUE(cuda::quant_gemv_pipelined());
  const testing::QuantMmaOff mma_off;  // K = 8448 at 4 and 8 bits would take it
  for (int bits : {4, 2, 3, 8}) {
    for (int64_t K : {4224, 8448}) {
      const QuantFixture f(2053, K, bits, 64, DType::BF16, static_cast<uint32_t>(bits + K));
      const DeviceQuant dw(f);
      for (int64_t M : {1, 2, 4}) {
        SCOPED_TRACE(::testing::Message() << "bits=" << bits << " K=" << K << " M=" << M);
        if (M == 4 && K == 4224) expect_matches_cpu(f, M, true, 5);
        Owned x(DType::F32, {M, K});
        testing::fill_uniform(x, static_cast<uint32_t>(M + 40));
        OnDevice dx(x), pipelined(DType::F32, {M, 2053}), first(DType::F32, {M, 2053});
        cuda::matmul_quantized(dx.t(), dw.q, Tensor(), pipelined.t());
        cuda::set_quant_gemv_pipelined(false);
        cuda::matmul_quantized(dx.t(), dw.q, Tensor(), first.t());
        cuda::set_quant_gemv_pipelined(true);
        const Owned a = pipelined.to_host(), b = first.to_host();
        EXPECT_EQ(std::memcmp(a.t().data, b.t().data, a.t().nbytes()), 0);
      }
    }
  }
}

// More columns than one dequantization tile holds (140000 · 256 BF16 = 72 MB in 16 MiB tiles):
// the tiles' y columns and bias slices must line up.
TEST(CudaQuantMatmul, SeveralColumnTiles) {
  RINGLM_REQUIRE_GPU();
  const testing::QuantMmaOff mma_off;  // its row groups would take 17 rows
  // 16 MiB tiles: 32768 of these 512-byte bf16 rows each, so 5 tiles, the last one shorter (the
  // default 128 MiB would hold the whole 71.7 MB weight).
  const testing::SettingFor tiles(cuda::set_dequant_tile_mib, 16);
  const QuantFixture f(140000, 256, 4, 64, DType::BF16, 9);
  QuantPath path = QuantPath::Mma;
  expect_matches_cpu(f, 17, true, 21, &path);  // 17 rows: past the GEMV's 8
  EXPECT_EQ(path, QuantPath::Tiles);
}

// Small-integer scales (|s| <= 1), biases (|b| <= 1) and x: every dequantized weight is an integer
// of magnitude <= 256 (exact in BF16 and F16), every product and partial sum an exact f32
// integer, so both paths equal the CPU bit for bit.
TEST(CudaQuantMatmul, ExactOnSmallIntegers) {
  RINGLM_REQUIRE_GPU();
  for (int bits : kBits) {
    for (int group : kGroups) {
      for (DType sd : kScaleTypes) {
        QuantFixture f(13, 256, bits, group, sd, 17);
        testing::fill_small_ints(f.scales, 18, 1);
        testing::fill_small_ints(f.biases, 19, 1);
        DeviceQuant dw(f);
        for (int64_t M : {1, 3, 8, 9, 12}) {
          SCOPED_TRACE(::testing::Message() << "bits=" << bits << " group=" << group << " "
                                            << testing::dtype_label(sd) << " M=" << M);
          Owned x(DType::F32, {M, 256}), b(DType::F32, {13}), ref(DType::F32, {M, 13});
          testing::fill_small_ints(x, 20);
          testing::fill_small_ints(b, 21, 50);
          matmul(x.t(), Weight::quantized(f.q), b.t(), ref.t());
          OnDevice dx(x), db(b), dy(DType::F32, {M, 13});
          matmul(dx.t(), Weight::quantized(dw.q), db.t(), dy.t());
          ASSERT_TRUE(testing::bitwise_equal(dy.to_host().t(), ref.t()));
        }
      }
    }
  }
}

// Row i of an M-row GEMV call equals the same row alone, bit for bit, for M up to the bound.
TEST(CudaQuantMatmul, GemvIsBatchInvariant) {
  RINGLM_REQUIRE_GPU();
  const testing::QuantMmaOff mma_off;  // its own batch invariance: quant_mma_test.cc
  for (int bits : {4, 8, 5}) {
    const QuantFixture f(67, 512, bits, 64, DType::BF16, 23);
    DeviceQuant dw(f);
    const Weight w = Weight::quantized(dw.q);
    Owned x(DType::F32, {kGemvRows, 512}), b(DType::BF16, {67});
    testing::fill_uniform(x, 24);
    testing::fill_uniform(b, 25);
    OnDevice dx(x), db(b);
    std::vector<Owned> alone;
    for (int64_t i = 0; i < kGemvRows; ++i) {
      OnDevice y1(DType::F32, {1, 67});
      matmul(dx.t().slice_rows(i, i + 1), w, db.t(), y1.t());
      alone.push_back(y1.to_host());
    }
    for (int64_t rows = 1; rows <= kGemvRows; ++rows) {
      OnDevice y(DType::F32, {rows, 67});
      matmul(dx.t().slice_rows(0, rows), w, db.t(), y.t());
      const Owned yh = y.to_host();
      for (int64_t i = 0; i < rows; ++i)
        ASSERT_TRUE(
            testing::bitwise_equal(yh.t().slice_rows(i, i + 1), alone[static_cast<size_t>(i)].t()))
            << "bits=" << bits << " row " << i << " of " << rows;
    }
  }
}

// x and y as row views inside wider buffers (x padded by 4: aligned vector loads; by 5: scalar
// loads); y's padding stays untouched. Small integers: exact on both paths.
TEST(CudaQuantMatmul, StridedRows) {
  RINGLM_REQUIRE_GPU();
  const int64_t K = 128, N = 9;
  QuantFixture f(N, K, 4, 32, DType::BF16, 31);
  testing::fill_small_ints(f.scales, 32, 2);
  testing::fill_small_ints(f.biases, 33, 8);
  DeviceQuant dw(f);
  for (int64_t x_pad : {int64_t{4}, int64_t{5}}) {
    for (int64_t M : {int64_t{3}, int64_t{10}}) {
      SCOPED_TRACE(::testing::Message() << "x_pad=" << x_pad << " M=" << M);
      ASSERT_TRUE(testing::strided_rows_match(
          {M, K, N, x_pad, 34, 35},
          [&](const Tensor& x, Tensor& y) { matmul(x, Weight::quantized(dw.q), Tensor(), y); },
          [&](const Tensor& x, Tensor& y) { matmul(x, Weight::quantized(f.q), Tensor(), y); }));
    }
  }
}

TEST(CudaQuantEmbedding, EqualsCpuBitForBit) {
  RINGLM_REQUIRE_GPU();
  Owned ids(DType::I32, {6});
  const int32_t picks[] = {0, 36, 5, 5, 17, 36};
  for (int i = 0; i < 6; ++i) ids.p<int32_t>()[i] = picks[i];
  for (int bits : kBits) {
    for (int group : kGroups) {
      for (DType sd : kScaleTypes) {
        for (float scale : {1.0f, 1.7f}) {
          SCOPED_TRACE(::testing::Message() << "bits=" << bits << " group=" << group << " "
                                            << testing::dtype_label(sd) << " scale=" << scale);
          const QuantFixture f(37, 384, bits, group, sd, 41);
          Owned ref(DType::F32, {6, 384});
          embedding(ids.t(), Weight::quantized(f.q), scale, ref.t());
          DeviceQuant dt(f);
          OnDevice dids(ids), dout(DType::F32, {6, 384});
          embedding(dids.t(), Weight::quantized(dt.q), scale, dout.t());
          ASSERT_TRUE(testing::bitwise_equal(dout.to_host().t(), ref.t()));
        }
      }
    }
  }
}

TEST(CudaQuantEmbedding, BadIdIsReportedBySynchronize) {
  RINGLM_REQUIRE_GPU();
  const QuantFixture f(5, 64, 4, 32, DType::BF16, 43);
  DeviceQuant dt(f);
  OnDevice dids(testing::ids_with_a_bad_one()), dout(DType::F32, {3, 64});
  embedding(dids.t(), Weight::quantized(dt.q), 1.0f, dout.t());
  const Owned out = testing::expect_bad_id_reported(dout);
  for (int64_t h = 0; h < 64; ++h) EXPECT_EQ(out.f(h), reference::dequantized_at(f.q, 1, h));
}

// ---- argument checks (no GPU needed: the tensors only carry the CUDA tag, never dereferenced)

void expect_error(const std::function<void()>& call, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(CudaQuantArguments, LayoutAndDeviceErrorsComeBeforeAnyLaunch) {
  alignas(64) static uint32_t fake[64];
  auto on_cuda = [](DType dtype, std::initializer_list<int64_t> dims) {
    return Tensor(fake, dtype, dims, Device::CUDA);
  };
  QuantizedMatrix q;
  q.codes = on_cuda(DType::U32, {4, 8});  // [4, 64] at 4 bits
  q.scales = on_cuda(DType::BF16, {4, 2});
  q.biases = on_cuda(DType::BF16, {4, 2});
  q.bits = 4;
  q.group_size = 32;
  Tensor x = on_cuda(DType::F32, {2, 64}), y = on_cuda(DType::F32, {2, 4});
  Tensor host_x(fake, DType::F32, {2, 64});
  expect_error([&] { matmul(host_x, Weight::quantized(q), Tensor(), y); }, "different devices");
  expect_error(
      [&] {
        matmul(on_cuda(DType::F32, {2, 32}), Weight::quantized(q), Tensor(), y);
      },
      "matmul x");
  QuantizedMatrix bad = q;
  bad.scales = on_cuda(DType::BF16, {4, 3});
  expect_error([&] { matmul(x, Weight::quantized(bad), Tensor(), y); }, "scales");
  bad = q;
  bad.biases = on_cuda(DType::F16, {4, 2});
  Tensor ids = on_cuda(DType::I32, {2}), out = on_cuda(DType::F32, {2, 64});
  expect_error([&] { embedding(ids, Weight::quantized(bad), 1.0f, out); }, "biases");
  Tensor narrow = on_cuda(DType::F32, {2, 32});
  expect_error([&] { embedding(ids, Weight::quantized(q), 1.0f, narrow); }, "embedding out");
}

}  // namespace
}  // namespace ringlm::ops
