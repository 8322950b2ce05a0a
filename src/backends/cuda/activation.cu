// Gated activations on the GPU: out = act(gate) · up, elementwise (out may alias gate or up).
// SiLU: g / (1 + exp(-g)) (exp overflows to inf for g < -88, giving -0 as torch does).
// GELU (tanh approximation): 0.5 · g · (1 + tanh(sqrt(2/π) · (g + 0.044715 · g³))).
// Full-precision expf/tanhf (no fast-math intrinsics).
#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/activation.cuh"
#include "backends/cuda/device/common.cuh"

namespace ringlm::cuda {

namespace {

template <ops::Activation kAct>  // a template argument, so the branch folds away
__global__ void gated_kernel(const float* gate, int64_t ldg, const float* up, int64_t ldu,
                             float* out, int64_t ldo, int64_t M, int64_t I) {
  const int64_t total = M * I;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t m = e / I, i = e % I;
    out[m * ldo + i] = device::gated_value(kAct, gate[m * ldg + i], up[m * ldu + i]);
  }
}

}  // namespace

void gated_activation(const Tensor& gate, const Tensor& up, ops::Activation activation,
                      Tensor& out) {
  const int64_t M = gate.shape[0], I = gate.shape[1];
  if (M == 0 || I == 0) return;
  Context& ctx = Context::get();
  const unsigned blocks = device::grid_for(M * I);
  if (activation == ops::Activation::SiLU) {
    gated_kernel<ops::Activation::SiLU><<<blocks, device::kThreads, 0, ctx.stream()>>>(
        gate.ptr<const float>(), gate.strides[0], up.ptr<const float>(), up.strides[0],
        out.ptr<float>(), out.strides[0], M, I);
  } else {
    gated_kernel<ops::Activation::GeluTanh><<<blocks, device::kThreads, 0, ctx.stream()>>>(
        gate.ptr<const float>(), gate.strides[0], up.ptr<const float>(), up.strides[0],
        out.ptr<float>(), out.strides[0], M, I);
  }
  check_launch("gated_kernel");
}

}  // namespace ringlm::cuda
