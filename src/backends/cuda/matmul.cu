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

// dst[m, k] = round(x[m, k]) into a contiguous [M, K] buffer of T.
template <typename T>
__global__ void convert_rows_kernel(const float* x, int64_t ldx, int64_t M, int64_t K, T* dst) {
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

}  // namespace

void matmul(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  const int64_t M = x.shape[0], K = x.shape[1], N = w.shape[0];
  if (M == 0 || N == 0) return;
  if (gemv_applies(x, w)) return gemv(x, w, bias, y);  // decode: gemv.h
  Context& ctx = Context::get();
  const int64_t ldx = leading_dim(x), ldy = leading_dim(y);
  RINGLM_CHECK(M <= INT_MAX && N <= INT_MAX && K <= INT_MAX && ldx <= INT_MAX && ldy <= INT_MAX,
               "matmul: dimensions beyond cuBLAS's int range: x ", x.describe(), " w ",
               w.describe());

  const bool with_bias = !bias.empty();
  if (with_bias || K == 0) {
    fill_bias_kernel<<<device::grid_for(M * N), device::kThreads, 0, ctx.stream()>>>(
        y.ptr<float>(), ldy, M, N, AnyFloat{with_bias ? bias.data : nullptr, bias.dtype});
    check_launch("fill_bias_kernel");
  }
  if (K == 0) return;

  const void* b = x.data;
  int64_t ldb = ldx;
  if (w.dtype != DType::F32) {
    // Round x to the weights' dtype (contiguous [M, K]).
    void* dst = ctx.scratch(Scratch::MatmulInput, static_cast<size_t>(M * K) * 2);
    device::dispatch_float(w.dtype, [&]<typename T>(T*) {
      convert_rows_kernel<T><<<device::grid_for(M * K), device::kThreads, 0, ctx.stream()>>>(
          x.ptr<float>(), ldx, M, K, static_cast<T*>(dst));
    });
    check_launch("convert_rows_kernel");
    b = dst;
    ldb = K;
  }
  const float alpha = 1.0f, beta = with_bias ? 1.0f : 0.0f;
  const cudaDataType_t wt = cuda_type(w.dtype);
  RINGLM_CUBLAS_CHECK(cublasGemmEx(
      ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
      static_cast<int>(K), &alpha, w.data, wt, static_cast<int>(K), b, wt, static_cast<int>(ldb),
      &beta, y.data, CUDA_R_32F, static_cast<int>(ldy), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace ringlm::cuda
