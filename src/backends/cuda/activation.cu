// Gated activations on the GPU: out = act(gate) · up, elementwise (out may alias gate or up).
// SiLU: g / (1 + exp(-g)) (exp overflows to inf for g < -88, giving -0 as torch does).
// GELU (tanh approximation): 0.5 · g · (1 + tanh(sqrt(2/π) · (g + 0.044715 · g³))).
// Full-precision expf/tanhf (no fast-math intrinsics). A 16-bit out gets the f32 value rounded
// once (a matmul input, ops::matmul_input_dtype).
#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/activation.cuh"
#include "backends/cuda/device/common.cuh"

namespace ringlm::cuda {

namespace {

template <ops::Activation kAct, typename O>  // kAct a template argument: the branch folds away
__global__ void gated_kernel(const float* gate, int64_t ldg, const float* up, int64_t ldu, O* out,
                             int64_t ldo, int64_t M, int64_t I) {
  const int64_t total = M * I;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t m = e / I, i = e % I;
    out[m * ldo + i] =
        device::from_f32<O>(device::gated_value(kAct, gate[m * ldg + i], up[m * ldu + i]));
  }
}

}  // namespace

void gated_activation(const Tensor& gate, const Tensor& up, ops::Activation activation,
                      Tensor& out) {
  const int64_t M = gate.shape[0], I = gate.shape[1];
  if (M == 0 || I == 0) return;
  Context& ctx = Context::get();
  const unsigned blocks = device::grid_for(M * I);
  const auto launch = [&]<ops::Activation kAct>() {
    const auto run = [&]<typename O>(O*) {
      gated_kernel<kAct, O><<<blocks, device::kThreads, 0, ctx.stream()>>>(
          gate.ptr<const float>(), gate.strides[0], up.ptr<const float>(), up.strides[0],
          static_cast<O*>(out.data), out.strides[0], M, I);
    };
    if (out.dtype == DType::BF16) return run(static_cast<__nv_bfloat16*>(nullptr));
    if (out.dtype == DType::F16) return run(static_cast<__half*>(nullptr));
    run(static_cast<float*>(nullptr));
  };
  if (activation == ops::Activation::SiLU) {
    launch.template operator()<ops::Activation::SiLU>();
  } else {
    launch.template operator()<ops::Activation::GeluTanh>();
  }
  check_launch("gated_kernel");
}

}  // namespace ringlm::cuda
