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

// The same over 4 consecutive elements a thread, a block row per matrix row (blockIdx.y = m): no
// 64-bit division per element and 16-byte loads — where I and the row strides are multiples of 4
// and the rows 16-byte aligned (a 64-row decode step's gate/up: 6.4 µs per layer for 9 MB with
// the kernel above, Nsight Compute, docs/benchmarks.md).
template <ops::Activation kAct, typename O>
__global__ void gated_rows_kernel(const float* gate, int64_t ldg, const float* up, int64_t ldu,
                                  O* out, int64_t ldo, int64_t I) {
  const int64_t m = blockIdx.y;
  const int64_t i = 4 * (blockIdx.x * int64_t{blockDim.x} + threadIdx.x);
  if (i >= I) return;
  const float4 g = *reinterpret_cast<const float4*>(gate + m * ldg + i);
  const float4 u = *reinterpret_cast<const float4*>(up + m * ldu + i);
  O y[4] = {device::from_f32<O>(device::gated_value(kAct, g.x, u.x)),
            device::from_f32<O>(device::gated_value(kAct, g.y, u.y)),
            device::from_f32<O>(device::gated_value(kAct, g.z, u.z)),
            device::from_f32<O>(device::gated_value(kAct, g.w, u.w))};
  if constexpr (sizeof(O) == 4) {
    *reinterpret_cast<float4*>(out + m * ldo + i) = *reinterpret_cast<const float4*>(y);
  } else {
    *reinterpret_cast<uint2*>(out + m * ldo + i) = *reinterpret_cast<const uint2*>(y);
  }
}

bool rows_of_quads(const Tensor& t) {
  return t.strides[0] % 4 == 0 &&
         reinterpret_cast<uintptr_t>(t.data) % (4 * dtype_size(t.dtype)) == 0;
}

}  // namespace

void gated_activation(const Tensor& gate, const Tensor& up, ops::Activation activation,
                      Tensor& out) {
  const int64_t M = gate.shape[0], I = gate.shape[1];
  if (M == 0 || I == 0) return;
  Context& ctx = Context::get();
  const bool quads =
      I % 4 == 0 && M <= 65535 && rows_of_quads(gate) && rows_of_quads(up) && rows_of_quads(out);
  const auto launch = [&]<ops::Activation kAct>() {
    const auto run = [&]<typename O>(O*) {
      if (quads) {
        const dim3 grid(static_cast<unsigned>((I / 4 + device::kThreads - 1) / device::kThreads),
                        static_cast<unsigned>(M));
        gated_rows_kernel<kAct, O><<<grid, device::kThreads, 0, ctx.stream()>>>(
            gate.ptr<const float>(), gate.strides[0], up.ptr<const float>(), up.strides[0],
            static_cast<O*>(out.data), out.strides[0], I);
        return;
      }
      gated_kernel<kAct, O><<<device::grid_for(M * I), device::kThreads, 0, ctx.stream()>>>(
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
