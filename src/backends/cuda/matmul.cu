// matmul on the GPU through cuBLAS: y = x · wᵀ (+ bias), row-major, as cuda_ops.h documents.
//
// Row-major y[M, N] = x[M, K] · w[N, K]ᵀ is column-major yᵀ (N×M) = op_T(w as K×N) · xᵀ (K×M),
// so one cublasGemmEx(T, N) with m = N, n = M reads both operands in place. The bias is written
// into y first and the GEMM accumulates onto it (beta = 1): any bias dtype, no extra pass.
// Low-precision weights: x is rounded to the weights' dtype into scratch, then a tensor-core GEMM
// with f32 accumulation (CUBLAS_COMPUTE_32F) writes f32 y. Up to kGemvMaxRows rows of BF16/F16
// weights go to the decode GEMV instead (gemv.h), and the decode rows above them on Hopper to
// stream_gemm.h: same contract, each with its own fixed summation order.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <span>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/pdl.cuh"
#include "backends/cuda/gemv.h"
#include "backends/cuda/stream_gemm.h"

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
GemmInput gemm_input(const Tensor& x,  // F32[M, K] (or already weight_dtype), rows may be strided
                     DType weight_dtype) {
  const int64_t M = x.shape[0], K = x.shape[1], ldx = leading_dim(x);
  if (weight_dtype == DType::F32 || x.dtype != DType::F32) {
    RINGLM_CHECK(x.dtype == weight_dtype, "matmul: ", dtype_name(x.dtype), " x with ",
                 dtype_name(weight_dtype), " weights");
    return {x.data, ldx};
  }
  void* dst = Context::get().scratch(Scratch::MatmulInput, static_cast<size_t>(M * K) * 2);
  Tensor rounded(dst, weight_dtype, {M, K}, Device::CUDA);
  round_rows(x, rounded);
  return {dst, K};
}

}  // namespace

void round_rows(const Tensor& x, Tensor& out) {
  const int64_t M = x.shape[0], K = x.shape[1];
  if (M == 0 || K == 0) return;
  RINGLM_CHECK(x.dtype == DType::F32 && (out.dtype == DType::BF16 || out.dtype == DType::F16) &&
                   out.ndim == 2 && out.shape[0] == M && out.shape[1] == K && out.is_contiguous(),
               "round_rows: ", x.describe(), " into ", out.describe());
  const int64_t ldx = leading_dim(x);
  const bool quads = K % 4 == 0 && ldx % 4 == 0 && reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
  cudaStream_t stream = Context::get().stream();
  device::dispatch_float(out.dtype, [&]<typename T>(T*) {
    if (quads) {
      convert_rows_kernel<T><<<device::grid_for(M * K / 4), device::kThreads, 0, stream>>>(
          x.ptr<float>(), ldx, M, K, static_cast<T*>(out.data));
    } else {
      convert_rows_scalar_kernel<T><<<device::grid_for(M * K), device::kThreads, 0, stream>>>(
          x.ptr<float>(), ldx, M, K, static_cast<T*>(out.data));
    }
  });
  check_launch("convert_rows_kernel");
}

namespace {

// y[m, n] = bias[n] (0 when empty) over M rows and the N columns of `y` from `y0`.
void fill_bias(float* y0, int64_t ldy, int64_t M, int64_t N, const Tensor& bias) {
  fill_bias_kernel<<<device::grid_for(M * N), device::kThreads, 0, Context::get().stream()>>>(
      y0, ldy, M, N, AnyFloat{bias.empty() ? nullptr : bias.data, bias.dtype});
  check_launch("fill_bias_kernel");
}

// y (+)= b · wᵀ for M rows of the prepared input b (accumulate: onto y's bias).
void gemm(const GemmInput& b, int64_t M, int64_t K, const Tensor& w, float* y, int64_t ldy,
          bool accumulate) {
  const int64_t N = w.shape[0];
  const StreamGemm own{b.data, b.ld, w.data, w.dtype, M, N, K, y, ldy, accumulate};
  if (stream_gemm_applies(own)) return stream_gemm(own);  // 16-bit decode rows: stream_gemm.h
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const cudaDataType_t wt = cuda_type(w.dtype);
  RINGLM_CUBLAS_CHECK(cublasGemmEx(Context::get().cublas(), CUBLAS_OP_T, CUBLAS_OP_N,
                                   static_cast<int>(N), static_cast<int>(M), static_cast<int>(K),
                                   &alpha, w.data, wt, static_cast<int>(K), b.data, wt,
                                   static_cast<int>(b.ld), &beta, y, CUDA_R_32F,
                                   static_cast<int>(ldy), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// y = b · wᵀ (+ bias): the bias is written first and the GEMM accumulates onto it.
void gemm_with_bias(const GemmInput& b, int64_t M, int64_t K, const Tensor& w, const Tensor& bias,
                    Tensor& y) {
  const bool with_bias = !bias.empty();
  if (with_bias || K == 0) fill_bias(y.ptr<float>(), leading_dim(y), M, w.shape[0], bias);
  if (K > 0) gemm(b, M, K, w, y.ptr<float>(), leading_dim(y), with_bias);
}

// Up to this many rows, matmuls over adjacent weights (WeightStore::place_together) run as one
// GEMM into scratch holding all their outputs, M·ΣN floats (7 MB for gate/up of an 8B model).
// H200, 8B bf16, 512 context, joined up to 256 rows vs separate: batch 8 +5.7 %, 32 +1.6 %,
// 64 -1 %, 128 -5 %, 256 -6.6 % (cuBLAS's kernels for the wider N lose there).
// RINGLM_CUDA_JOINED_GEMM_MAX_ROWS sets another bound at start-up (same-binary A/B runs).
constexpr int64_t kJoinedGemmMaxRows = 64;
int64_t joined_gemm_max_rows() {
  static const int64_t rows =
      env_positive_int("RINGLM_CUDA_JOINED_GEMM_MAX_ROWS", kJoinedGemmMaxRows);
  return rows;
}

// Whether the weights lie back to back (one dtype and K): [w_0; w_1; ...] is one matrix.
bool adjacent(std::span<const GemvTarget> targets) {
  for (size_t i = 1; i < targets.size(); ++i) {
    const Tensor &a = *targets[i - 1].w, &b = *targets[i].w;
    if (b.dtype != a.dtype || b.shape[1] != a.shape[1] || !a.is_contiguous() ||
        !b.is_contiguous() || static_cast<const std::byte*>(a.data) + a.nbytes() != b.data)
      return false;
  }
  return true;
}

bool joined_applies(const Tensor& x, std::span<const GemvTarget> targets) {
  return x.shape[0] <= joined_gemm_max_rows() && x.shape[1] > 0 && adjacent(targets);
}

// x · [w_0; w_1; ...]ᵀ + [bias_0, bias_1, ...] as one GEMM: F32[M, ΣN_i] in scratch.
Tensor joined_gemm(const GemmInput& b, int64_t M, int64_t K, std::span<const GemvTarget> targets) {
  int64_t total = 0;
  bool any_bias = false;
  for (const GemvTarget& t : targets) {
    total += t.w->shape[0];
    any_bias = any_bias || !t.bias->empty();
  }
  RINGLM_CHECK(total <= INT_MAX, "matmul: joined weights of ", total, " rows");
  auto* y = static_cast<float*>(Context::get().scratch(
      Scratch::MatmulOutput, static_cast<size_t>(M * total) * sizeof(float)));
  int64_t column = 0;
  for (const GemvTarget& t : targets) {
    if (any_bias) fill_bias(y + column, total, M, t.w->shape[0], *t.bias);
    column += t.w->shape[0];
  }
  const Tensor& w0 = *targets[0].w;
  Tensor all(w0.data, w0.dtype, {total, K}, Device::CUDA);
  gemm(b, M, K, all, y, total, any_bias);
  Tensor out(y, DType::F32, {M, total}, Device::CUDA);
  return out;
}

// Column slices of a joined output into each target's y (up to kGemvMaxTargets): block row y is
// row m, each thread copies `vec` (4 when every offset and stride allows 16-byte accesses, else 1)
// consecutive columns.
struct SplitColumns {
  const float* src;
  int64_t ld_src, total;
  int parts, vec;
  float* dst[kGemvMaxTargets];
  int64_t ld_dst[kGemvMaxTargets], first[kGemvMaxTargets + 1];
};

__global__ void split_columns_kernel(const SplitColumns a) {
  static_assert(kGemvMaxTargets == 3, "split_columns_kernel selects among three parts");
  device::wait_prior_grid();
  device::launch_dependents();
  const int64_t m = blockIdx.y;
  const int64_t n = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * a.vec;
  if (n >= a.total) return;
  // The part holding column n by selects: indexing the parameter arrays with a run-time value
  // made every thread copy the parameters to local memory (a 112-byte stack frame: more bytes
  // than the copy itself moves).
  const bool in1 = a.parts > 1 && n >= a.first[1], in2 = a.parts > 2 && n >= a.first[2];
  float* const part = in2 ? a.dst[2] : (in1 ? a.dst[1] : a.dst[0]);
  const int64_t ld = in2 ? a.ld_dst[2] : (in1 ? a.ld_dst[1] : a.ld_dst[0]);
  const int64_t first = in2 ? a.first[2] : (in1 ? a.first[1] : a.first[0]);
  const float* src = a.src + m * a.ld_src + n;
  float* dst = part + m * ld + (n - first);
  if (a.vec == 4) {
    *reinterpret_cast<float4*>(dst) = *reinterpret_cast<const float4*>(src);
  } else {
    *dst = *src;
  }
}

}  // namespace

void matmul(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  const int64_t M = x.shape[0], K = x.shape[1];
  if (M == 0 || w.shape[0] == 0) return;
  if (gemv_applies(x, w)) return gemv(x, w, bias, y);  // decode: gemv.h
  check_gemm_dims(x, w, y);
  gemm_with_bias(K == 0 ? GemmInput{nullptr, 0} : gemm_input(x, w.dtype), M, K, w, bias, y);
}

bool matmul_shared_input_applies(const Tensor& x, std::span<const GemvTarget> targets) {
  if (targets.size() < 2 || targets.size() > static_cast<size_t>(kGemvMaxTargets)) return false;
  for (const GemvTarget& t : targets)
    if (t.w->dtype == DType::F32 || t.w->dtype != targets[0].w->dtype || gemv_applies(x, *t.w))
      return false;
  return x.dtype == DType::F32 || x.dtype == targets[0].w->dtype;
}

void matmul_shared_input(const Tensor& x, std::span<const GemvTarget> targets) {
  const int64_t M = x.shape[0], K = x.shape[1];
  if (M == 0 || targets.empty()) return;
  RINGLM_CHECK(
      matmul_shared_input_applies(x, targets),
      "matmul_shared_input: needs 2 to 3 16-bit weights of one dtype, above the GEMV's rows");
  for (const GemvTarget& t : targets) check_gemm_dims(x, *t.w, *t.y);
  const GemmInput b = K == 0 ? GemmInput{nullptr, 0} : gemm_input(x, targets[0].w->dtype);
  if (!joined_applies(x, targets)) {
    for (const GemvTarget& t : targets)
      if (t.w->shape[0] > 0) gemm_with_bias(b, M, K, *t.w, *t.bias, *t.y);
    return;
  }
  const Tensor joined = joined_gemm(b, M, K, targets);
  SplitColumns split{joined.ptr<const float>(),
                     joined.shape[1],
                     joined.shape[1],
                     static_cast<int>(targets.size()),
                     4,
                     {},
                     {},
                     {}};
  int64_t column = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    const Tensor& y = *targets[i].y;
    split.dst[i] = y.ptr<float>();
    split.ld_dst[i] = leading_dim(y);
    split.first[i] = column;
    column += targets[i].w->shape[0];
    if (column % 4 != 0 || split.ld_dst[i] % 4 != 0 || reinterpret_cast<uintptr_t>(y.data) % 16)
      split.vec = 1;
  }
  split.first[targets.size()] = column;
  const dim3 grid(
      static_cast<unsigned>((column / split.vec + device::kThreads - 1) / device::kThreads),
      static_cast<unsigned>(M));
  launch_pdl(split_columns_kernel, grid, dim3(device::kThreads), 0, Context::get().stream(), split);
  check_launch("split_columns_kernel");
}

bool matmul_joined_applies(const Tensor& x, std::span<const GemvTarget> targets) {
  return matmul_shared_input_applies(x, targets) && joined_applies(x, targets);
}

Tensor matmul_joined(const Tensor& x, std::span<const GemvTarget> targets) {
  RINGLM_CHECK(matmul_joined_applies(x, targets),
               "matmul_joined: needs 2 to 3 adjacent 16-bit weights and at most ",
               joined_gemm_max_rows(), " rows above the GEMV's");
  for (const GemvTarget& t : targets) check_gemm_dims(x, *t.w, *t.y);
  return joined_gemm(gemm_input(x, targets[0].w->dtype), x.shape[0], x.shape[1], targets);
}

bool gemm_gated_applies(const Tensor& x, const GemvTarget& gate, const GemvTarget& up) {
  const GemvTarget both[] = {gate, up};
  return matmul_shared_input_applies(x, both) && gate.w->shape[0] == up.w->shape[0] &&
         joined_applies(x, both);
}

void gemm_gated(const Tensor& x, const GemvTarget& gate, const GemvTarget& up,
                ops::Activation activation, Tensor& out) {
  const int64_t M = x.shape[0], K = x.shape[1], N = gate.w->shape[0];
  if (M == 0 || N == 0) return;
  const GemvTarget both[] = {gate, up};
  RINGLM_CHECK(gemm_gated_applies(x, gate, up),
               "gemm_gated: needs adjacent 16-bit gate and up weights of one shape");
  check_gemm_dims(x, *gate.w, out);
  const Tensor joined = joined_gemm(gemm_input(x, gate.w->dtype), M, K, both);
  Tensor gate_part(joined.data, DType::F32, {M, N}, Device::CUDA);
  Tensor up_part(joined.ptr<float>() + N, DType::F32, {M, N}, Device::CUDA);
  gate_part.strides[0] = up_part.strides[0] = 2 * N;
  cuda::gated_activation(gate_part, up_part, activation, out);
}

}  // namespace ringlm::cuda
