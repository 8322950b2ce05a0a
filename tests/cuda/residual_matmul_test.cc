// The residual-stream matmuls on the GPU (ops/residual_matmul.h): the decode GEMV with the RMSNorm
// fused into its input and the residual add into its output, against the unfused ops bit for bit
// (the same call with RINGLM_CUDA_FUSED_NORMS off), at 1 and 2 rows, bf16 and f16, q/k/v-like and
// gated launches, biases, Gemma's unit offset and strided rows. A poisoned `normed` / `scratch`
// buffer tells which path ran: the fused one never writes it.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/gemv.h"
#include "cuda_test_util.h"
#include "ops/ops.h"
#include "ops/residual_matmul.h"
#include "ops/weight.h"

namespace ringlm::ops {
namespace {

using testing::OnDevice;
using testing::Owned;

const DType kGemvTypes[] = {DType::BF16, DType::F16};

// Turns the fused norms off for its lifetime.
struct UnfusedNorms {
  UnfusedNorms() { cuda::set_gemv_fused_norms(false); }
  ~UnfusedNorms() { cuda::set_gemv_fused_norms(true); }
  UnfusedNorms(const UnfusedNorms&) = delete;
  UnfusedNorms& operator=(const UnfusedNorms&) = delete;
};

// Every byte still 0xFF (OnDevice's poison): no kernel wrote the buffer.
bool untouched(const OnDevice& t) {
  const Owned h = t.to_host();
  const auto* bytes = static_cast<const unsigned char*>(h.t().data);
  for (size_t i = 0; i < h.t().nbytes(); ++i) {
    if (bytes[i] != 0xff) return false;
  }
  return true;
}

// The residual stream: M rows of K floats, x_pad floats apart beyond K (a row view).
struct Stream {
  Owned host;
  OnDevice dev;
  Tensor view;
  Stream(int64_t M, int64_t K, int64_t x_pad, uint32_t seed)
      : host(make(M, K + x_pad, seed)), dev(host), view(dev.t()) {
    view.shape[1] = K;
  }
  static Owned make(int64_t M, int64_t cols, uint32_t seed) {
    Owned o(DType::F32, {M, cols});
    testing::fill_uniform(o, seed, -2.0f, 2.0f);
    return o;
  }
};

// q/k/v-like projections of the normalized stream: three targets (one with a bias).
struct Projections {
  static constexpr int64_t kN[3] = {37, 8, 130};
  std::vector<Owned> w;
  std::vector<OnDevice> dw;
  Owned bias;
  OnDevice dbias;
  Projections(DType wt, int64_t K, uint32_t seed) : bias(make_bias(seed)), dbias(bias) {
    for (int i = 0; i < 3; ++i) {
      w.emplace_back(wt, std::initializer_list<int64_t>{kN[i], K});
      testing::fill_uniform(w.back(), seed + 1 + static_cast<uint32_t>(i));
    }
    for (const Owned& o : w) dw.emplace_back(o);
  }
  static Owned make_bias(uint32_t seed) {
    Owned b(DType::BF16, {kN[0]});
    testing::fill_uniform(b, seed);
    return b;
  }
  // ys[i] = (normed x) · w[i]ᵀ (+ bias for i = 0): fused or not as the switch says.
  std::vector<Owned> run(const NormedRows& in, OnDevice& normed) {
    const Weight weights[3] = {dw[0].t(), dw[1].t(), dw[2].t()};
    const Tensor none;
    std::vector<OnDevice> ys;
    const int64_t M = in.x->shape[0];
    for (int64_t n : kN) ys.emplace_back(DType::F32, std::initializer_list<int64_t>{M, n});
    const MatmulTarget targets[3] = {{&weights[0], &dbias.t(), &ys[0].t()},
                                     {&weights[1], &none, &ys[1].t()},
                                     {&weights[2], &none, &ys[2].t()}};
    matmul_many(in, normed.t(), targets);
    std::vector<Owned> out;
    for (const OnDevice& y : ys) out.push_back(y.to_host());
    return out;
  }
};

TEST(CudaResidualMatmul, NormedProjectionsEqualNormThenGemv) {
  RINGLM_REQUIRE_GPU();
  for (DType wt : kGemvTypes) {
    for (int64_t M = 1; M <= cuda::kGemvMaxRows; ++M) {
      // K: one float4 per norm thread or several; from 8200 the norm's layout has more threads
      // than the GEMV's block (its warps play two or more of them).
      for (int64_t K : {int64_t{8}, int64_t{264}, int64_t{1032}, int64_t{4096}, int64_t{8200},
                        int64_t{10240}}) {
        for (int64_t x_pad : {int64_t{0}, int64_t{4}}) {
          for (bool unit_offset : {false, true}) {
            SCOPED_TRACE(::testing::Message()
                         << testing::dtype_label(wt) << " M=" << M << " K=" << K
                         << " x_pad=" << x_pad << " unit_offset=" << unit_offset);
            const auto seed = static_cast<uint32_t>(K + M);
            Stream x(M, K, x_pad, seed);
            Owned g(wt, {K});
            testing::fill_uniform(g, seed + 7);
            OnDevice dg(g);
            Projections p(wt, K, seed + 11);
            const NormedRows in{&x.view, &dg.t(), {1e-5f, unit_offset}};
            const Weight w0(p.dw[0].t());
            const Weight* weights[] = {&w0};
            EXPECT_TRUE(residual_fusion_applies(in, weights));
            OnDevice normed_fused(DType::F32, {M, K}), normed_plain(DType::F32, {M, K});
            const std::vector<Owned> fused = p.run(in, normed_fused);
            EXPECT_TRUE(untouched(normed_fused)) << "the fused GEMV did not run";
            std::vector<Owned> plain;
            {
              const UnfusedNorms off;
              plain = p.run(in, normed_plain);
            }
            EXPECT_FALSE(untouched(normed_plain));
            for (size_t i = 0; i < fused.size(); ++i)
              EXPECT_TRUE(testing::bitwise_equal(fused[i].t(), plain[i].t())) << "target " << i;
          }
        }
      }
    }
  }
}

TEST(CudaResidualMatmul, NormedGatedMatmulEqualsNormThenGatedGemv) {
  RINGLM_REQUIRE_GPU();
  for (DType wt : kGemvTypes) {
    for (int64_t M = 1; M <= cuda::kGemvMaxRows; ++M) {
      for (Activation act : {Activation::SiLU, Activation::GeluTanh}) {
        SCOPED_TRACE(::testing::Message()
                     << testing::dtype_label(wt) << " M=" << M << " act=" << static_cast<int>(act));
        const int64_t K = 1032, N = 131;
        Stream x(M, K, 4, 21);
        Owned g(wt, {K}), gate(wt, {N, K}), up(wt, {N, K}), ub(DType::F32, {N});
        testing::fill_uniform(g, 22);
        testing::fill_uniform(gate, 23);
        testing::fill_uniform(up, 24);
        testing::fill_uniform(ub, 25);
        OnDevice dg(g), dgate(gate), dup(up), dub(ub);
        const Weight wg(dgate.t()), wu(dup.t());
        const Tensor none;
        const NormedRows in{&x.view, &dg.t(), {1e-6f, false}};
        auto run = [&](OnDevice& normed) {
          OnDevice gy(DType::F32, {M, N}), uy(DType::F32, {M, N}), out(DType::F32, {M, N});
          gated_matmul(in, normed.t(), {&wg, &none, &gy.t()}, {&wu, &dub.t(), &uy.t()}, act,
                       out.t());
          return out.to_host();
        };
        OnDevice normed_fused(DType::F32, {M, K}), normed_plain(DType::F32, {M, K});
        const Owned fused = run(normed_fused);
        EXPECT_TRUE(untouched(normed_fused)) << "the fused GEMV did not run";
        Owned plain = [&] {
          const UnfusedNorms off;
          return run(normed_plain);
        }();
        EXPECT_FALSE(untouched(normed_plain));
        EXPECT_TRUE(testing::bitwise_equal(fused.t(), plain.t()));
      }
    }
  }
}

// acc += x · wᵀ (+ bias) against matmul then add_inplace, at the GEMV's rows (fused: scratch
// untouched) and above them (cuBLAS, then the add).
TEST(CudaResidualMatmul, AccumulateEqualsMatmulThenAdd) {
  RINGLM_REQUIRE_GPU();
  for (DType wt : kGemvTypes) {
    for (int64_t M : {int64_t{1}, int64_t{2}, int64_t{3}}) {
      for (int64_t N : {int64_t{37}, int64_t{4096}}) {
        for (bool with_bias : {false, true}) {
          SCOPED_TRACE(::testing::Message() << testing::dtype_label(wt) << " M=" << M << " N=" << N
                                            << " bias=" << with_bias);
          const int64_t K = 1032;
          Owned x(DType::F32, {M, K}), w(wt, {N, K}), b(wt, {N}), acc(DType::F32, {M, N});
          testing::fill_uniform(x, 31);
          testing::fill_uniform(w, 32);
          testing::fill_uniform(b, 33);
          testing::fill_uniform(acc, 34, -4.0f, 4.0f);
          OnDevice dx(x), dw(w), db(b), acc_fused(acc), acc_plain(acc);
          OnDevice scratch(DType::F32, {M, N}), y(DType::F32, {M, N});
          const Tensor bias = with_bias ? db.t() : Tensor();
          matmul_accumulate(dx.t(), Weight(dw.t()), bias, scratch.t(), acc_fused.t());
          EXPECT_EQ(untouched(scratch), M <= cuda::kGemvMaxRows);
          matmul(dx.t(), dw.t(), bias, y.t());
          add_inplace(acc_plain.t(), y.t());
          EXPECT_TRUE(testing::bitwise_equal(acc_fused.to_host().t(), acc_plain.to_host().t()));
        }
      }
    }
  }
}

// Where the GEMV cannot fuse the norm (a row longer than the norm's one-pass kernel takes, rows
// whose normalized copy would not fit 40 KB of shared memory, a misaligned row, a norm weight of
// another dtype, more rows than the GEMV takes, the switch off), the ops run unfused and
// residual_fusion_applies says so.
TEST(CudaResidualMatmul, DeclinedShapesRunUnfused) {
  RINGLM_REQUIRE_GPU();
  struct Case {
    const char* what;
    int64_t M, K;
    int64_t x_offset;  // floats from the buffer's start: 1 breaks 16-byte rows
    DType norm_dtype;
    bool fuses;
  };
  const Case cases[] = {{"fused", 1, 1032, 0, DType::BF16, true},
                        {"two rows", 2, 1032, 0, DType::BF16, true},
                        {"K over the layout", 1, 16392, 0, DType::BF16, false},
                        {"one row of the layout's longest", 1, 16384, 0, DType::BF16, true},
                        {"two rows over 40 KB normalized", 2, 12288, 0, DType::BF16, false},
                        {"misaligned rows", 1, 1032, 1, DType::BF16, false},
                        {"f32 norm weight", 1, 1032, 0, DType::F32, false},
                        {"three rows", 3, 1032, 0, DType::BF16, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Owned xbuf(DType::F32, {c.M, c.K + 4}), g(c.norm_dtype, {c.K});
    testing::fill_uniform(xbuf, 41, -2.0f, 2.0f);
    testing::fill_uniform(g, 42);
    OnDevice dxbuf(xbuf), dg(g);
    Tensor x = dxbuf.t();
    x.data = static_cast<float*>(x.data) + c.x_offset;
    x.shape[1] = c.K;
    Projections p(DType::BF16, c.K, 43);
    const NormedRows in{&x, &dg.t(), {1e-5f, false}};
    const Weight w0(p.dw[0].t()), w1(p.dw[1].t());
    const Weight* weights[] = {&w0, &w1};
    EXPECT_EQ(residual_fusion_applies(in, weights), c.fuses);
    OnDevice normed_a(DType::F32, {c.M, c.K}), normed_b(DType::F32, {c.M, c.K});
    const std::vector<Owned> a = p.run(in, normed_a);
    EXPECT_EQ(untouched(normed_a), c.fuses);
    std::vector<Owned> b;
    {
      const UnfusedNorms off;
      EXPECT_FALSE(residual_fusion_applies(in, weights));
      b = p.run(in, normed_b);
    }
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(testing::bitwise_equal(a[i].t(), b[i].t())) << "target " << i;
  }
}

}  // namespace
}  // namespace ringlm::ops
