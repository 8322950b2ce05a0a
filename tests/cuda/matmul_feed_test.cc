// Matmul inputs written already rounded (ops::matmul_input_dtype): on CUDA above the decode
// GEMV's rows, rms_norm / add_rms_norm / gated_activation may write BF16/F16 and the matmuls take
// that x as it is, skipping their own rounding pass. Oracle: bit for bit the F32 path — the
// 16-bit output is the F32 output rounded once (host round-to-nearest-even), and a matmul of the
// rounded x equals the matmul of F32 x holding the same values (cuBLAS would round it to them).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/gemv.h"
#include "cuda_test_util.h"
#include "ops/ops.h"
#include "ops/weight.h"

namespace ringlm::ops {
namespace {

using testing::OnDevice;
using testing::Owned;

// `src` (F32) rounded to `dtype` element by element on the host.
Owned rounded(const Owned& src, DType dtype) {
  const Tensor& t = src.t();
  Owned out(dtype, {t.shape[0], t.shape[1]});
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = src.f(i);
    if (dtype == DType::BF16)
      out.p<bf16_t>()[i] = f32_to_bf16(v);
    else
      out.p<f16_t>()[i] = f32_to_f16(v);
  }
  return out;
}

// `src` (16-bit) widened to F32: the same values.
Owned widened(const Owned& src) {
  const Tensor& t = src.t();
  Owned out(DType::F32, {t.shape[0], t.shape[1]});
  for (int64_t i = 0; i < t.numel(); ++i) out.p<float>()[i] = src.f(i);
  return out;
}

TEST(CudaMatmulFeed, NormsWriteTheRoundedF32Output) {
  RINGLM_REQUIRE_GPU();
  for (DType half : {DType::BF16, DType::F16}) {
    for (int64_t H : {int64_t{17}, int64_t{64}, int64_t{4096}, int64_t{4099}}) {
      SCOPED_TRACE(::testing::Message() << testing::dtype_label(half) << " H=" << H);
      const int64_t M = 5;
      Owned x(DType::F32, {M, H}), r(DType::F32, {M, H}), w(DType::BF16, {H});
      testing::fill_uniform(x, 7, -3.0f, 3.0f);
      testing::fill_uniform(r, 8, -3.0f, 3.0f);
      testing::fill_uniform(w, 9);
      const RmsNormConfig cfg{1e-5f, false};
      const OnDevice dw(w), dr(r);
      OnDevice dx(x), want(DType::F32, {M, H}), got(half, {M, H});
      rms_norm(dx.t(), dw.t(), cfg, want.t());
      rms_norm(dx.t(), dw.t(), cfg, got.t());
      ASSERT_TRUE(testing::bitwise_equal(got.to_host().t(), rounded(want.to_host(), half).t()));

      OnDevice want_x(x), got_x(x), want_out(DType::F32, {M, H}), got_out(half, {M, H});
      add_rms_norm(want_x.t(), dr.t(), dw.t(), cfg, want_out.t());
      add_rms_norm(got_x.t(), dr.t(), dw.t(), cfg, got_out.t());
      ASSERT_TRUE(testing::bitwise_equal(got_x.to_host().t(), want_x.to_host().t()));
      ASSERT_TRUE(
          testing::bitwise_equal(got_out.to_host().t(), rounded(want_out.to_host(), half).t()));
    }
  }
}

TEST(CudaMatmulFeed, GatedActivationWritesTheRoundedF32Output) {
  RINGLM_REQUIRE_GPU();
  const int64_t M = 6, I = 1000;
  Owned g(DType::F32, {M, I}), u(DType::F32, {M, I});
  testing::fill_uniform(g, 11, -6.0f, 6.0f);
  testing::fill_uniform(u, 12, -2.0f, 2.0f);
  const OnDevice dg(g), du(u);
  for (Activation act : {Activation::SiLU, Activation::GeluTanh}) {
    OnDevice want(DType::F32, {M, I}), got(DType::BF16, {M, I});
    gated_activation(dg.t(), du.t(), act, want.t());
    gated_activation(dg.t(), du.t(), act, got.t());
    ASSERT_TRUE(
        testing::bitwise_equal(got.to_host().t(), rounded(want.to_host(), DType::BF16).t()));
  }
}

// matmul, matmul_many (joined: adjacent weights, up to 64 rows; separate above) and gated_matmul
// with BF16 x against F32 x of the same values: the same bits.
TEST(CudaMatmulFeed, MatmulsOfRoundedXEqualTheF32Path) {
  RINGLM_REQUIRE_GPU();
  const int64_t K = 520, N = 300;
  Owned w(DType::BF16, {3 * N, K}), bias(DType::F32, {N});
  testing::fill_uniform(w, 21);
  testing::fill_uniform(bias, 22);
  const OnDevice dw(w), dbias(bias);
  const auto rows_of = [&](int64_t first) {
    Tensor t = dw.t();
    t.data = static_cast<std::byte*>(t.data) + first * K * 2;
    t.shape[0] = N;
    return Weight(t);
  };
  const Weight a = rows_of(0), b = rows_of(N), c = rows_of(2 * N);
  const Tensor none, with_bias = dbias.t();
  for (int64_t M : {int64_t{3}, int64_t{64}, int64_t{65}, int64_t{130}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << M);
    ASSERT_EQ(matmul_input_dtype(a, M), DType::BF16);
    Owned x32(DType::F32, {M, K});
    testing::fill_uniform(x32, static_cast<uint32_t>(30 + M));
    const Owned x16 = rounded(x32, DType::BF16);
    const OnDevice dx32(widened(x16)), dx16(x16);

    OnDevice want(DType::F32, {M, N}), got(DType::F32, {M, N});
    matmul(dx32.t(), a, with_bias, want.t());
    matmul(dx16.t(), a, with_bias, got.t());
    ASSERT_TRUE(testing::bitwise_equal(got.to_host().t(), want.to_host().t()));

    std::vector<OnDevice> ys;
    for (int i = 0; i < 6; ++i) ys.emplace_back(DType::F32, std::initializer_list<int64_t>{M, N});
    const MatmulTarget want_t[] = {
        {&a, &with_bias, &ys[0].t()}, {&b, &none, &ys[1].t()}, {&c, &none, &ys[2].t()}};
    const MatmulTarget got_t[] = {
        {&a, &with_bias, &ys[3].t()}, {&b, &none, &ys[4].t()}, {&c, &none, &ys[5].t()}};
    matmul_many(dx32.t(), want_t);
    matmul_many(dx16.t(), got_t);
    for (int i = 0; i < 3; ++i)
      ASSERT_TRUE(testing::bitwise_equal(ys[static_cast<size_t>(3 + i)].to_host().t(),
                                         ys[static_cast<size_t>(i)].to_host().t()))
          << "target " << i;

    OnDevice gy(DType::F32, {M, N}), uy(DType::F32, {M, N}), out32(DType::F32, {M, N}),
        out16(DType::BF16, {M, N});
    gated_matmul(dx32.t(), {&a, &with_bias, &gy.t()}, {&b, &none, &uy.t()}, Activation::SiLU,
                 out32.t());
    gated_matmul(dx16.t(), {&a, &with_bias, &gy.t()}, {&b, &none, &uy.t()}, Activation::SiLU,
                 out16.t());
    ASSERT_TRUE(
        testing::bitwise_equal(out16.to_host().t(), rounded(out32.to_host(), DType::BF16).t()));
  }
}

// Which dtype a matmul takes x in: F32 up to the GEMV's rows, for F32 weights; the weights'
// 16-bit dtype above. A 16-bit x that does not match the weights is refused.
TEST(CudaMatmulFeed, InputDtypeAndRefusals) {
  RINGLM_REQUIRE_GPU();
  Owned w16(DType::BF16, {8, 16}), w32(DType::F32, {8, 16});
  testing::fill_uniform(w16, 1);
  testing::fill_uniform(w32, 2);
  const OnDevice d16(w16), d32(w32);
  const Weight bf16(d16.t()), f32(d32.t());
  for (int64_t rows = 1; rows <= cuda::kGemvMaxRows; ++rows)
    EXPECT_EQ(matmul_input_dtype(bf16, rows), DType::F32) << rows;
  EXPECT_EQ(matmul_input_dtype(bf16, cuda::kGemvMaxRows + 1), DType::BF16);
  EXPECT_EQ(matmul_input_dtype(f32, 100), DType::F32);
  OnDevice x16(DType::BF16, {4, 16}), xf16(DType::F16, {4, 16}), y(DType::F32, {4, 8});
  EXPECT_THROW(matmul(x16.t(), f32, Tensor(), y.t()), Error);    // F32 weights take F32 x
  EXPECT_THROW(matmul(xf16.t(), bf16, Tensor(), y.t()), Error);  // F16 x, BF16 weights
  // A 16-bit norm output may not overlap its input.
  Owned norm_w(DType::F32, {16});
  testing::fill_uniform(norm_w, 3);
  const OnDevice x(w32), dnorm_w(norm_w);
  Tensor overlapping(x.t().data, DType::BF16, {8, 16}, Device::CUDA);
  EXPECT_THROW(rms_norm(x.t(), dnorm_w.t(), RmsNormConfig{}, overlapping), Error);
}

}  // namespace
}  // namespace ringlm::ops
