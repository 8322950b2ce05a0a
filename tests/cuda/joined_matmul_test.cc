// Matmuls over weights placed back to back on the GPU (WeightStore::place_together: a model's
// q/k/v and gate/up): above the GEMV's rows they run as one cuBLAS GEMM into scratch, then the
// columns go to each output (matmul_many) or straight into the gated activation (gated_matmul).
// Oracles: the double-precision reference within the matmul bound (op_checks.h) — a wrong
// column offset, bias slice or row stride fails it — and the store's placement itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../io/io_test_util.h"
#include "cuda_test_util.h"
#include "io/safetensors.h"
#include "op_checks.h"
#include "ops/ops.h"
#include "ops/reference.h"
#include "ops/weight.h"

namespace ringlm::ops {
namespace {

using testing::OnDevice;
using testing::Owned;

// A device view of rows [first, first + rows) of a contiguous device matrix [*, K].
Tensor rows_of(const OnDevice& all, int64_t first, int64_t rows) {
  const Tensor t = all.t();
  const int64_t K = t.shape[1];
  return Tensor(static_cast<std::byte*>(t.data) + first * K * dtype_size(t.dtype), t.dtype,
                {rows, K}, Device::CUDA);
}

// Host copy of rows [first, first + rows) of a host matrix [*, K].
Owned host_rows(const Owned& all, int64_t first, int64_t rows) {
  const int64_t K = all.t().shape[1];
  Owned out(all.t().dtype, {rows, K});
  std::memcpy(out.t().data,
              static_cast<const std::byte*>(all.t().data) + first * K * dtype_size(all.t().dtype),
              out.t().nbytes());
  return out;
}

// q/k/v-like targets (N = 2048, an odd 37, 512) in one weight buffer, biases on the first and
// last: joined up to 64 rows, shared-input GEMMs above; each output within the matmul bound.
TEST(CudaJoinedMatmul, ManyOverAdjacentWeightsMatchesReference) {
  RINGLM_REQUIRE_GPU();
  const int64_t K = 1032, sizes[] = {2048, 37, 512}, first[] = {0, 2048, 2085}, total = 2597;
  for (DType wt : {DType::BF16, DType::F16}) {
    Owned w(wt, {total, K}), b0(DType::BF16, {2048}), b2(DType::F32, {512});
    testing::fill_uniform(w, 41);
    testing::fill_uniform(b0, 42);
    testing::fill_uniform(b2, 43);
    const OnDevice dw(w), db0(b0), db2(b2);
    const Owned* host_bias[] = {&b0, nullptr, &b2};
    const Tensor biases[] = {db0.t(), Tensor(), db2.t()};
    for (int64_t M : {int64_t{3}, int64_t{33}, int64_t{64}, int64_t{65}}) {
      SCOPED_TRACE(::testing::Message() << testing::dtype_label(wt) << " M=" << M);
      Owned x(DType::F32, {M, K});
      testing::fill_uniform(x, static_cast<uint32_t>(M));
      const OnDevice dx(x);
      std::vector<Weight> weights;
      std::vector<std::unique_ptr<OnDevice>> ys;
      for (int i = 0; i < 3; ++i) {
        weights.emplace_back(rows_of(dw, first[i], sizes[i]));
        ys.push_back(
            std::make_unique<OnDevice>(DType::F32, std::initializer_list<int64_t>{M, sizes[i]}));
      }
      std::vector<MatmulTarget> targets;
      for (size_t i = 0; i < 3; ++i) targets.push_back({&weights[i], &biases[i], &ys[i]->t()});
      matmul_many(dx.t(), targets);
      for (int i = 0; i < 3; ++i) {
        const Owned wi = host_rows(w, first[i], sizes[i]);
        Owned ref(DType::F32, {M, sizes[i]});
        reference::matmul(x.t(), wi.t(), host_bias[i] ? host_bias[i]->t() : Tensor(), ref.t());
        const Owned y = ys[static_cast<size_t>(i)]->to_host();
        for (int64_t m = 0; m < M; ++m) {
          for (int64_t n = 0; n < sizes[i]; ++n) {
            const double mag = testing::matmul_magnitude(x, wi, host_bias[i], m, n);
            ASSERT_NEAR(y.f(m * sizes[i] + n), ref.f(m * sizes[i] + n),
                        testing::matmul_tolerance(wt, K, mag))
                << "target " << i << " m=" << m << " n=" << n;
          }
        }
      }
    }
  }
}

// gate and up back to back, both activations, biases: out within the bound that the two matmul
// bounds give through the activation (|act'| <= 1.13, |act(g)| <= |g|).
TEST(CudaJoinedMatmul, GatedOverAdjacentWeightsMatchesReference) {
  RINGLM_REQUIRE_GPU();
  const int64_t K = 520, N = 300;
  Owned w(DType::BF16, {2 * N, K}), bg(DType::BF16, {N}), bu(DType::F32, {N});
  testing::fill_uniform(w, 51);
  testing::fill_uniform(bg, 52);
  testing::fill_uniform(bu, 53);
  const OnDevice dw(w), dbg(bg), dbu(bu);
  const Owned wg = host_rows(w, 0, N), wu = host_rows(w, N, N);
  const Weight gate(rows_of(dw, 0, N)), up(rows_of(dw, N, N));
  const Tensor gate_bias = dbg.t(), up_bias = dbu.t();
  for (Activation act : {Activation::SiLU, Activation::GeluTanh}) {
    for (int64_t M : {int64_t{3}, int64_t{64}, int64_t{65}}) {
      SCOPED_TRACE(::testing::Message() << "act=" << static_cast<int>(act) << " M=" << M);
      Owned x(DType::F32, {M, K}), g(DType::F32, {M, N}), u(DType::F32, {M, N}),
          ref(DType::F32, {M, N});
      testing::fill_uniform(x, static_cast<uint32_t>(60 + M));
      const OnDevice dx(x);
      OnDevice gate_y(DType::F32, {M, N}), up_y(DType::F32, {M, N}), out(DType::F32, {M, N});
      Tensor gy = gate_y.t(), uy = up_y.t(), o = out.t();
      gated_matmul(dx.t(), {&gate, &gate_bias, &gy}, {&up, &up_bias, &uy}, act, o);
      reference::matmul(x.t(), wg.t(), bg.t(), g.t());
      reference::matmul(x.t(), wu.t(), bu.t(), u.t());
      reference::gated_activation(g.t(), u.t(), act, ref.t());
      const Owned got = out.to_host();
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
          const int64_t i = m * N + n;
          const double tol_g = testing::matmul_tolerance(
                           DType::BF16, K, testing::matmul_magnitude(x, wg, &bg, m, n)),
                       tol_u = testing::matmul_tolerance(
                           DType::BF16, K, testing::matmul_magnitude(x, wu, &bu, m, n));
          const double bound = 1.13 * (std::fabs(u.f(i)) + tol_u) * tol_g +
                               (std::fabs(g.f(i)) + tol_g) * tol_u +
                               4 * testing::kEps * std::fabs(ref.f(i)) + 1e-30;
          ASSERT_NEAR(got.f(i), ref.f(i), bound) << "m=" << m << " n=" << n;
        }
      }
    }
  }
}

// WeightStore::place_together on the GPU: the named tensors come back adjacent with their bytes;
// a tensor already uploaded, a dtype mismatch, a size that would misalign the next tensor, a
// missing name, or the CPU leave the store as it was.
TEST(CudaJoinedMatmul, StorePlacesTensorsBackToBack) {
  RINGLM_REQUIRE_GPU();
  io::testing::TempDir dir;
  std::vector<uint16_t> a(4 * 64), b(2 * 64), odd(3 * 8);
  std::vector<float> c(2 * 64);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint16_t>(i * 7 + 1);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint16_t>(i * 3 + 2);
  io::write_safetensors(dir.file("model.safetensors"), {{"a", DType::BF16, {4, 64}, a.data()},
                                                        {"b", DType::BF16, {2, 64}, b.data()},
                                                        {"c", DType::F32, {2, 64}, c.data()},
                                                        {"odd", DType::BF16, {3, 8}, odd.data()},
                                                        {"d", DType::BF16, {2, 64}, b.data()}});
  io::WeightStore cpu(dir.path());
  EXPECT_FALSE(cpu.place_together({"a", "b"}));

  io::WeightStore store(dir.path());
  store.set_device(Device::CUDA);
  EXPECT_FALSE(store.place_together({"a", "missing"}));
  EXPECT_FALSE(store.place_together({"d", "c"}));    // dtypes differ
  EXPECT_FALSE(store.place_together({"odd", "d"}));  // 48 bytes: d would start misaligned
  ASSERT_TRUE(store.place_together({"a", "b"}));
  const Tensor ta = store.get("a"), tb = store.get("b");
  EXPECT_EQ(static_cast<const std::byte*>(ta.data) + ta.nbytes(), tb.data);
  std::vector<uint16_t> back(a.size() + b.size());
  copy_bytes(back.data(), Device::CPU, ta.data, Device::CUDA, back.size() * 2);
  EXPECT_EQ(std::memcmp(back.data(), a.data(), a.size() * 2), 0);
  EXPECT_EQ(std::memcmp(back.data() + a.size(), b.data(), b.size() * 2), 0);
  EXPECT_FALSE(store.place_together({"b", "d"}));  // b is uploaded already
}

}  // namespace
}  // namespace ringlm::ops
