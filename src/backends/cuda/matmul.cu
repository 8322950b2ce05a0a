// matmul on the GPU through cuBLAS: y = x · wᵀ (+ bias), row-major, as cuda_ops.h documents.
//
// Row-major y[M, N] = x[M, K] · w[N, K]ᵀ is column-major yᵀ (N×M) = op_T(w as K×N) · xᵀ (K×M),
// so one cublasGemmEx(T, N) with m = N, n = M reads both operands in place. The bias is written
// into y first and the GEMM accumulates onto it (beta = 1): any bias dtype, no extra pass.
// Low-precision weights: x is rounded to the weights' dtype into scratch, then a tensor-core GEMM
// with f32 accumulation (CUBLAS_COMPUTE_32F) writes f32 y. Up to kGemvMaxRows rows of BF16/F16
// weights go to the decode GEMV instead (gemv.h): same contract, its own fixed summation order.
#include <climits>
#include <cstdint>
#include <span>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/gemv.h"

namespace ringlm::cuda {

namespace {

using device::AnyFloat;

// y[m, n] = bias[n] (or 0).
__global__ void fill_bias_kernel(float* y, int64_t ldy, int64_t M, int64_t N, AnyFloat bias) {
  const int64_t total = M * N;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t m = i / N, n = i % N;
    y[m * ldy + n] = bias.p == nullptr ? 0.0f : bias[n];
  }
}

// dst[m, k] = round(x[m, k]) into a contiguous [M, K] buffer of T, 4 elements per thread
// (K and ldx multiples of 4: 16-byte loads, 8-byte stores).
template <typename T>
__global__ void convert_rows_kernel(const float* x, int64_t ldx, int64_t M, int64_t K, T* dst) {
  const int64_t quads = K / 4, total = M * quads;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t m = i / quads, k = 4 * (i % quads);
    const float4 v = *reinterpret_cast<const float4*>(x + m * ldx + k);
    T* out = dst + m * K + k;
    out[0] = device::from_f32<T>(v.x);
    out[1] = device::from_f32<T>(v.y);
    out[2] = device::from_f32<T>(v.z);
    out[3] = device::from_f32<T>(v.w);
  }
}

// The same for any K and ldx, one element per thread.
template <typename T>
__global__ void convert_rows_scalar_kernel(const float* x, int64_t ldx, int64_t M, int64_t K,
                                           T* dst) {
  const int64_t total = M * K;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t m = i / K, k = i % K;
    dst[i] = device::from_f32<T>(x[m * ldx + k]);
  }
}

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return CUDA_R_32F;
    case DType::BF16:
      return CUDA_R_16BF;
    case DType::F16:
      return CUDA_R_16F;
    default:
      RINGLM_FAIL("matmul: unsupported weight dtype ", dtype_name(dtype));
  }
}

void check_gemm_dims(const Tensor& x, const Tensor& w, const Tensor& y) {
  RINGLM_CHECK(x.shape[0] <= INT_MAX && w.shape[0] <= INT_MAX && x.shape[1] <= INT_MAX &&
                   leading_dim(x) <= INT_MAX && leading_dim(y) <= INT_MAX,
               "matmul: dimensions beyond cuBLAS's int range: x ", x.describe(), " w ",
               w.describe());
}

// cuBLAS's B operand: x itself for F32 weights, else x rounded to `weight_dtype` into scratch.
struct GemmInput {
  const void* data;
  int64_t ld;
};
GemmInput gemm_input(const Tensor& x,  // F32[M, K], rows may be strided
                     DType weight_dtype) {
  const int64_t M = x.shape[0], K = x.shape[1], ldx = leading_dim(x);
  if (weight_dtype == DType::F32) return {x.data, ldx};
  Context& ctx = Context::get();
  void* dst = ctx.scratch(Scratch::MatmulInput, static_cast<size_t>(M * K) * 2);
  const bool quads = K % 4 == 0 && ldx % 4 == 0 && reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
  device::dispatch_float(weight_dtype, [&]<typename T>(T*) {
    if (quads) {
      convert_rows_kernel<T><<<device::grid_for(M * K / 4), device::kThreads, 0, ctx.stream()>>>(
          x.ptr<float>(), ldx, M, K, static_cast<T*>(dst));
    } else {
      convert_rows_scalar_kernel<T><<<device::grid_for(M * K), device::kThreads, 0, ctx.stream()>>>(
          x.ptr<float>(), ldx, M, K, static_cast<T*>(dst));
    }
  });
  check_launch("convert_rows_kernel");
  return {dst, K};
}

// y = b · wᵀ (+ bias) for M rows of the prepared input b.
void gemm(const GemmInput& b, int64_t M, int64_t K, const Tensor& w, const Tensor& bias,
          Tensor& y) {
  Context& ctx = Context::get();
  const int64_t N = w.shape[0], ldy = leading_dim(y);
  const bool with_bias = !bias.empty();
  if (with_bias || K == 0) {
    fill_bias_kernel<<<device::grid_for(M * N), device::kThreads, 0, ctx.stream()>>>(
        y.ptr<float>(), ldy, M, N, AnyFloat{with_bias ? bias.data : nullptr, bias.dtype});
    check_launch("fill_bias_kernel");
  }
  if (K == 0) return;
  const float alpha = 1.0f, beta = with_bias ? 1.0f : 0.0f;
  const cudaDataType_t wt = cuda_type(w.dtype);
  RINGLM_CUBLAS_CHECK(cublasGemmEx(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N),
                                   static_cast<int>(M), static_cast<int>(K), &alpha, w.data, wt,
                                   static_cast<int>(K), b.data, wt, static_cast<int>(b.ld), &beta,
                                   y.data, CUDA_R_32F, static_cast<int>(ldy), CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
}

}  // namespace

void matmul(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  const int64_t M = x.shape[0], K = x.shape[1];
  if (M == 0 || w.shape[0] == 0) return;
  if (gemv_applies(x, w)) return gemv(x, w, bias, y);  // decode: gemv.h
  check_gemm_dims(x, w, y);
  gemm(K == 0 ? GemmInput{nullptr, 0} : gemm_input(x, w.dtype), M, K, w, bias, y);
}

bool matmul_shared_input_applies(const Tensor& x, std::span<const GemvTarget> targets) {
  if (targets.size() < 2) return false;
  for (const GemvTarget& t : targets)
    if (t.w->dtype == DType::F32 || t.w->dtype != targets[0].w->dtype || gemv_applies(x, *t.w))
      return false;
  return true;
}

void matmul_shared_input(const Tensor& x, std::span<const GemvTarget> targets) {
  const int64_t M = x.shape[0], K = x.shape[1];
  if (M == 0 || targets.empty()) return;
  const DType dtype = targets[0].w->dtype;
  for (const GemvTarget& t : targets) {
    RINGLM_CHECK(t.w->dtype == dtype, "matmul_shared_input: weights of different dtypes (",
                 dtype_name(dtype), ", ", dtype_name(t.w->dtype), ")");
    check_gemm_dims(x, *t.w, *t.y);
  }
  const GemmInput b = K == 0 ? GemmInput{nullptr, 0} : gemm_input(x, dtype);
  for (const GemvTarget& t : targets)
    if (t.w->shape[0] > 0) gemm(b, M, K, *t.w, *t.bias, *t.y);
}

}  // namespace ringlm::cuda
