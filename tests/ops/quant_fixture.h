// A random MLX affine-quantized matrix for the quantized op tests (CPU: tests/ops, GPU:
// tests/cuda): random code words, so every code value occurs, and scales and biases in a given
// dtype.
#pragma once

#include <random>

#include "op_test_util.h"
#include "ops/reference.h"
#include "ops/weight.h"

namespace ringlm::ops::testing {

// A random quantized [N, K] matrix (K a multiple of the group size).
struct QuantFixture {
  Owned codes, scales, biases;
  QuantizedMatrix q;
  QuantFixture(int64_t N, int64_t K, int bits, int group, DType sdtype, uint32_t seed)
      : codes(DType::U32, {N, K * bits / 32}),
        scales(sdtype, {N, K / group}),
        biases(sdtype, {N, K / group}) {
    std::mt19937 rng(seed);
    for (int64_t i = 0; i < codes.t().numel(); ++i)
      codes.p<uint32_t>()[i] = static_cast<uint32_t>(rng());
    fill_uniform(scales, seed + 1, -0.1f, 0.1f);
    fill_uniform(biases, seed + 2, -0.5f, 0.5f);
    q = {codes.t(), scales.t(), biases.t(), bits, group};
  }
  // dequant(q) as a dense F32 [N, K] matrix.
  Owned dense() const {
    Owned d(DType::F32, {q.rows(), q.cols()});
    for (int64_t n = 0; n < q.rows(); ++n)
      for (int64_t k = 0; k < q.cols(); ++k)
        d.p<float>()[n * q.cols() + k] = reference::dequantized_at(q, n, k);
    return d;
  }
};

}  // namespace ringlm::ops::testing
