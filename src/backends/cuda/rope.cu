// Rotary embedding on the GPU, NeoX "rotate_half" layout, as backends/cpu/rope.cc: the angle is
// pos · inv_freq[i] in f32, cos and sin in f32 (full-range cosf/sinf, not the fast intrinsics)
// times attention_scaling; x1 = x[i], x2 = x[i + d/2] become x1·cos − x2·sin and x2·cos + x1·sin.
// One block per token: the token's cos/sin go to shared memory once, then every head uses them.
#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/rope_norm.cuh"

namespace ringlm::cuda {

namespace {

struct RopeArgs {
  int heads, head_dim, half;
  float scaling;
  float inv_freq[kMaxRopeHalf];  // travels in the kernel's parameter space (graph-capturable)
};

__global__ void rope_kernel(float* x, const int32_t* positions, const RopeArgs args,
                            DeviceErrorRecord* errors) {
  __shared__ float cs[kMaxRopeHalf], sn[kMaxRopeHalf];
  const int64_t t = blockIdx.x;
  const int32_t p = positions[t];
  if (p < 0) {  // leave the token as it is and report
    if (threadIdx.x == 0) device::report_error(errors, DeviceErrorCode::RopePosition, t, p, 0);
    return;
  }
  const auto pos = static_cast<float>(p);
  for (int i = threadIdx.x; i < args.half; i += blockDim.x)
    device::rope_cos_sin(pos, args.inv_freq[i], args.scaling, cs[i], sn[i]);
  __syncthreads();
  float* row = x + t * args.heads * args.head_dim;
  const int pairs = args.heads * args.half;
  for (int e = threadIdx.x; e < pairs; e += blockDim.x) {
    const int h = e / args.half, i = e % args.half;
    float* v = row + h * args.head_dim;
    float x1 = v[i], x2 = v[i + args.half];
    device::rope_rotate(x1, x2, cs[i], sn[i]);
    v[i] = x1;
    v[i + args.half] = x2;
  }
}

}  // namespace

void rope(Tensor& x, const Tensor& positions, const ops::RopeTable& table) {
  const int64_t T = x.shape[0];
  if (T == 0 || x.shape[1] == 0) return;
  RINGLM_CHECK(table.rotary_dim / 2 <= kMaxRopeHalf, "rope: rotary_dim ", table.rotary_dim,
               " is above the CUDA backend's limit of ", 2 * kMaxRopeHalf);
  RINGLM_CHECK(T <= INT32_MAX && x.shape[1] * x.shape[2] <= INT32_MAX, "rope: ", x.describe(),
               " is too large");
  RopeArgs args{};
  args.heads = static_cast<int>(x.shape[1]);
  args.head_dim = static_cast<int>(x.shape[2]);
  args.half = table.rotary_dim / 2;
  args.scaling = table.attention_scaling;
  for (int i = 0; i < args.half; ++i) args.inv_freq[i] = table.inv_freq[static_cast<size_t>(i)];
  Context& ctx = Context::get();
  rope_kernel<<<static_cast<unsigned>(T), device::row_threads(int64_t{args.heads} * args.half), 0,
                ctx.stream()>>>(x.ptr<float>(), positions.ptr<const int32_t>(), args, ctx.errors());
  check_launch("rope_kernel");
}

}  // namespace ringlm::cuda
