// Matmul and embedding with MLX affine-quantized weights (ops/weight.h) against the scalar
// reference and against the dense kernel on the dequantized matrix (bit for bit), on every SIMD
// target, every bits / group size / scale dtype, odd shapes; batch invariance; argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "op_test_util.h"
#include "ops/ops.h"
#include "ops/reference.h"
#include "ops/weight.h"
#include "quant_fixture.h"

namespace ringlm::ops {
namespace {

using testing::for_each_simd_target;
using testing::kEps;
using testing::Owned;
using testing::QuantFixture;

const int kBits[] = {2, 3, 4, 5, 6, 8};
const int kGroups[] = {32, 64, 128};
const DType kScaleTypes[] = {DType::F32, DType::BF16, DType::F16};

struct Shape {
  int64_t M, K, N;
};
// K a multiple of 128 (every group size), N around the register tiles, M across the 4-row tile.
const std::vector<Shape> kShapes = {{1, 128, 1}, {2, 128, 5}, {7, 384, 33}, {33, 256, 9}};

TEST(QuantMatmul, MatchesReferenceAndDenseKernelOnDequantizedWeights) {
  for_each_simd_target([](const std::string&) {
    for (int bits : kBits) {
      for (int group : kGroups) {
        for (DType sd : kScaleTypes) {
          for (const Shape& s : kShapes) {
            SCOPED_TRACE(::testing::Message()
                         << "bits=" << bits << " group=" << group << " " << testing::dtype_label(sd)
                         << " M=" << s.M << " K=" << s.K << " N=" << s.N);
            const QuantFixture w(s.N, s.K, bits, group, sd, 7u * static_cast<uint32_t>(bits));
            const Owned dense = w.dense();
            Owned x(DType::F32, {s.M, s.K}), b(DType::BF16, {s.N});
            Owned y(DType::F32, {s.M, s.N}), ref(DType::F32, {s.M, s.N});
            Owned y_dense(DType::F32, {s.M, s.N});
            testing::fill_uniform(x, 1);
            testing::fill_uniform(b, 2);
            matmul(x.t(), Weight::quantized(w.q), b.t(), y.t());
            reference::matmul_quantized(x.t(), w.q, b.t(), ref.t());
            matmul(x.t(), dense.t(), b.t(), y_dense.t());
            ASSERT_TRUE(testing::bitwise_equal(y.t(), y_dense.t()));
            for (int64_t m = 0; m < s.M; ++m) {
              for (int64_t n = 0; n < s.N; ++n) {
                double mag = std::fabs(b.f(n));
                for (int64_t k = 0; k < s.K; ++k)
                  mag += std::fabs(double{x.f(m * s.K + k)} * dense.f(n * s.K + k));
                const double tol = static_cast<double>(s.K + 2) * kEps * mag + 1e-30;
                ASSERT_NEAR(y.f(m * s.N + n), ref.f(m * s.N + n), tol) << "m=" << m << " n=" << n;
              }
            }
          }
        }
      }
    }
  });
}

// A row's output is bitwise the same alone or in batches of 7 and 33, under 1, 2 or 3 threads
// (column and row splits, every tile shape).
TEST(QuantMatmul, BatchInvariant) {
  for_each_simd_target([](const std::string&) {
    for (int bits : {3, 4, 8}) {
      for (auto [K, N] : {std::pair<int64_t, int64_t>{256, 257}, {128, 5}}) {
        const int64_t M = 33;
        SCOPED_TRACE(::testing::Message() << "bits=" << bits << " K=" << K << " N=" << N);
        const QuantFixture w(N, K, bits, 64, DType::BF16, 3);
        const Weight weight = Weight::quantized(w.q);
        Owned x(DType::F32, {M, K});
        testing::fill_uniform(x, 4);
        std::vector<Owned> alone;
        {
          testing::ScopedThreads threads(1);
          for (int64_t m = 0; m < M; ++m) {
            alone.emplace_back(DType::F32, std::initializer_list<int64_t>{1, N});
            matmul(x.t().slice_rows(m, m + 1), weight, Tensor(), alone.back().t());
          }
        }
        for (int threads : {1, 2, 3}) {
          testing::ScopedThreads scoped(threads);
          for (int64_t batch : {int64_t{7}, M}) {
            for (int64_t start = 0; start + batch <= M; start += batch) {
              Owned y(DType::F32, {batch, N});
              matmul(x.t().slice_rows(start, start + batch), weight, Tensor(), y.t());
              for (int64_t m = 0; m < batch; ++m)
                ASSERT_TRUE(testing::bitwise_equal(y.t().slice_rows(m, m + 1),
                                                   alone[static_cast<size_t>(start + m)].t()))
                    << "threads=" << threads << " batch=" << batch << " row=" << start + m;
            }
          }
        }
      }
    }
  });
}

// x and y as row views inside wider buffers.
TEST(QuantMatmul, StridedRows) {
  const int64_t M = 5, K = 64, N = 7;
  const QuantFixture w(N, K, 4, 32, DType::F16, 9);
  Owned xbuf(DType::F32, {M, K + 3}), ybuf(DType::F32, {M, N + 2}), ref(DType::F32, {M, N});
  testing::fill_uniform(xbuf, 10);
  Tensor x = xbuf.t(), y = ybuf.t();
  x.shape[1] = K;
  y.shape[1] = N;
  matmul(x, Weight::quantized(w.q), Tensor(), y);
  const Owned dense = w.dense();
  matmul(x, dense.t(), Tensor(), ref.t());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) ASSERT_EQ(y.row<float>(m)[n], ref.f(m * N + n));
}

// matmul_many (the decoder's q/k/v and gate/up) equals separate matmul calls bit for bit, dense
// and quantized weights mixed, and reports a bad target as matmul does.
TEST(MatmulMany, EqualsSeparateMatmulsAndChecksEachTarget) {
  const int64_t M = 3, K = 128;
  const QuantFixture q(9, K, 4, 64, DType::BF16, 21);
  Owned x(DType::F32, {M, K}), dense(DType::BF16, {5, K}), bias(DType::F32, {9});
  testing::fill_uniform(x, 22);
  testing::fill_uniform(dense, 23);
  testing::fill_uniform(bias, 24);
  const Weight wq = Weight::quantized(q.q), wd(dense.t());
  const Tensor no_bias, b = bias.t();
  Owned y0(DType::F32, {M, 9}), y1(DType::F32, {M, 5}), s0(DType::F32, {M, 9}),
      s1(DType::F32, {M, 5});
  Tensor t0 = y0.t(), t1 = y1.t();
  const MatmulTarget targets[] = {{&wq, &b, &t0}, {&wd, &no_bias, &t1}};
  matmul_many(x.t(), targets);
  matmul(x.t(), wq, b, s0.t());
  matmul(x.t(), wd, no_bias, s1.t());
  EXPECT_TRUE(testing::bitwise_equal(y0.t(), s0.t()));
  EXPECT_TRUE(testing::bitwise_equal(y1.t(), s1.t()));

  Owned wrong(DType::F32, {M, 4});
  Tensor bad = wrong.t();
  const MatmulTarget bad_targets[] = {{&wq, &b, &t0}, {&wd, &no_bias, &bad}};
  EXPECT_THROW(matmul_many(x.t(), bad_targets), Error);
}

TEST(QuantEmbedding, DequantizesTheLookedUpRowsExactly) {
  for (int bits : kBits) {
    for (int group : kGroups) {
      for (DType sd : kScaleTypes) {
        SCOPED_TRACE(::testing::Message()
                     << "bits=" << bits << " group=" << group << " " << testing::dtype_label(sd));
        const int64_t V = 11, H = 256;
        const QuantFixture table(V, H, bits, group, sd, 21);
        Owned ids(DType::I32, {6});
        for (int64_t i = 0; i < 6; ++i) ids.p<int32_t>()[i] = static_cast<int32_t>((i * 7) % V);
        for (float scale : {1.0f, 3.5f}) {
          Owned out(DType::F32, {6, H}), ref(DType::F32, {6, H});
          embedding(ids.t(), Weight::quantized(table.q), scale, out.t());
          reference::embedding_quantized(ids.t(), table.q, scale, ref.t());
          ASSERT_TRUE(testing::bitwise_equal(out.t(), ref.t())) << "scale=" << scale;
        }
      }
    }
  }
}

// A tied LM head reads the quantized embedding table as its matmul weight.
TEST(QuantEmbedding, TiedHeadIsTheTableAsMatmulWeight) {
  const int64_t V = 37, H = 128;
  const QuantFixture table(V, H, 4, 64, DType::BF16, 5);
  Owned h(DType::F32, {3, H}), logits(DType::F32, {3, V}), ref(DType::F32, {3, V});
  testing::fill_uniform(h, 6);
  const Weight head = Weight::quantized(table.q);
  matmul(h.t(), head, Tensor(), logits.t());
  // Row v of the head is embedding(v): the dense matmul over the looked-up rows gives the same.
  Owned ids(DType::I32, {V}), rows(DType::F32, {V, H});
  for (int64_t v = 0; v < V; ++v) ids.p<int32_t>()[v] = static_cast<int32_t>(v);
  embedding(ids.t(), head, 1.0f, rows.t());
  matmul(h.t(), rows.t(), Tensor(), ref.t());
  ASSERT_TRUE(testing::bitwise_equal(logits.t(), ref.t()));
}

TEST(QuantMatmul, RejectsBadArguments) {
  const QuantFixture w(4, 64, 4, 32, DType::BF16, 1);
  Owned x(DType::F32, {2, 64}), y(DType::F32, {2, 4});
  auto call = [&](QuantizedMatrix q) { matmul(x.t(), Weight::quantized(q), Tensor(), y.t()); };
  QuantizedMatrix bad = w.q;
  bad.bits = 7;
  EXPECT_THROW(call(bad), Error);
  bad = w.q;
  bad.group_size = 16;
  EXPECT_THROW(call(bad), Error);
  bad = w.q;
  bad.scales = w.q.scales.reshape({4, 2}).slice_rows(0, 3);  // wrong row count
  EXPECT_THROW(call(bad), Error);
  bad = w.q;
  bad.biases.dtype = DType::F16;  // differs from scales
  EXPECT_THROW(call(bad), Error);
  bad = w.q;
  bad.bits = 8;  // codes now hold 32 values per row: x's K = 64 does not match
  bad.group_size = 32;
  EXPECT_THROW(call(bad), Error);
  Owned x_short(DType::F32, {2, 32});
  EXPECT_THROW(matmul(x_short.t(), Weight::quantized(w.q), Tensor(), y.t()), Error);
  // bf16 x (a CUDA-only input, ops::matmul_input_dtype) is refused on the CPU, and the CPU never
  // asks for it.
  Owned x_bf16(DType::BF16, {2, 64});
  EXPECT_THROW(matmul(x_bf16.t(), Weight::quantized(w.q), Tensor(), y.t()), Error);
  EXPECT_EQ(matmul_input_dtype(Weight::quantized(w.q), 64), DType::F32);
  Owned ids(DType::I32, {1}), out(DType::F32, {1, 64});
  ids.p<int32_t>()[0] = 4;  // vocabulary is [0, 4)
  EXPECT_THROW(embedding(ids.t(), Weight::quantized(w.q), 1.0f, out.t()), Error);
}

}  // namespace
}  // namespace ringlm::ops
