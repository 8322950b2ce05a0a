// The gated activation's arithmetic, act(g) · u, shared by the elementwise kernel (activation.cu)
// and the decode GEMV that applies it to gate and up in its epilogue (gemv.cu), so both give the
// same bits. Spelled out with __f*_rn: the compiler's contraction of `a * b + c` may differ
// between kernels.
#pragma once

#include <cuda_runtime.h>

#include "ops/ops.h"

namespace ringlm::cuda::device {

__device__ __forceinline__ float gated_value(ops::Activation act, float g, float u) {
  float a;
  if (act == ops::Activation::SiLU) {
    a = __fdiv_rn(g, __fadd_rn(1.0f, expf(-g)));
  } else {  // GeluTanh: 0.5 · g · (1 + tanh(√(2/π) · (g + 0.044715 · g³)))
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    const float g3 = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, g), g), g);
    const float t = tanhf(__fmul_rn(kSqrt2OverPi, __fadd_rn(g, g3)));
    a = __fmul_rn(__fmul_rn(0.5f, g), __fadd_rn(1.0f, t));
  }
  return __fmul_rn(a, u);
}

}  // namespace ringlm::cuda::device
