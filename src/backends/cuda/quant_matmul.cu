// matmul with MLX affine-quantized weights on the GPU: y = x · dequant(w)ᵀ (+ bias), as
// cuda_ops.h documents (precision contract there).
//
// 4/8-bit codes with bf16 scales up to 16 rows go to the tensor-core kernel (quant_mma.h) first;
// the kernels below serve the other formats and shapes.
//
// Up to kQuantGemvMaxRows rows (decode): a fused-dequant GEMV that streams the packed codes once.
// A block owns kCols = 4 output columns and all M rows; its 128 threads split K into chunks of 32
// codes (BITS words: one 16-byte load for 4-bit, two for 8-bit), thread t taking chunks
// t, t + 128, ... Per chunk and column it unpacks 8 codes at a time in registers, forms the
// 8-term dot product with x (f32), and folds it in with the group's scale; the bias term
// bias_g·Σx is added once per chunk. Then the block reduces its partial sums in a fixed order
// (device/gemv_common.cuh) — so a row's result depends only on that row (batch invariance).
// The 8-row bound is gemv.h's: FMAs per weight byte grow with M while codes are 4-8× denser.
// Measured (H200, 8B shape, docs/benchmarks.md): these GEMVs are latency-bound, far from the
// bandwidth (k/v projection, Nsight Compute: one chunk per thread at K = 4096, 1.9 warps per
// scheduler, ~11 cycles between a warp's instructions, mostly waiting on L1 for x). Up to 4 rows
// run quant_gemv_pipelined_kernel below: PDL with the first chunks' codes loaded before the wait,
// 8 columns per block for codes of up to 4 bits, x of a chunk loaded at once for up to 2 rows —
// the same sums bit for bit.
//
// More rows (prefill): column tiles of dequant(w), rounded to the scales' dtype, are written into
// a scratch buffer of at most dequant_tile_mib() MiB and handed to the dense cuda::matmul (cuBLAS):
// a weight larger than the scratch is never materialized whole.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/affine_unpack.cuh"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/gemv_common.cuh"
#include "backends/cuda/device/pdl.cuh"
#include "backends/cuda/gemv.h"
#include "backends/cuda/quant_mma.h"

namespace ringlm::cuda {

namespace {

using device::AnyFloat;
using device::kCodesPerChunk;

constexpr int64_t kQuantGemvMaxRows = 8;
constexpr int kThreads = 128;
constexpr int kCols = 4;
constexpr int kSub = 8;  // codes unpacked (and x values loaded) at a time
// The dequantized tiles' scratch: 128 MiB holds any 8B-shape weight (bf16) whole, one cuBLAS
// GEMM per weight. Measured at 512 × 128 / 256 rows of an mlx4 8B (docs/benchmarks.md, 28th
// session): 64 MiB tiles 0.95-0.97× (H100), tiles that fit L2 (16 / 8 MiB) 0.78 / 0.58× (H200) —
// the narrower GEMMs lose more than reading the tile back from L2 gains.
constexpr int64_t kDequantTileMiB = 128;

struct QuantArgs {
  const uint32_t* codes;  // U32[N, row_words]
  int64_t row_words;      // K·bits/32
  AnyFloat scales;        // [N, groups]
  AnyFloat biases;        // [N, groups]
  int64_t groups;
  int chunk_group_shift;  // log2(group_size / 32): chunk index >> shift = group index
  int64_t N, K;
};

struct GemvArgs {
  QuantArgs w;
  const float* x;  // F32[M, K], row stride ldx
  int64_t ldx;
  bool x_vec;     // every x row 16-byte aligned: float4 loads
  AnyFloat bias;  // [N] or null
  float* y;       // F32[M, N], row stride ldy
  int64_t ldy;
};

// acc[m][c] += s_c·Σ_j x[m][FIRST+j]·q_c[FIRST+j] over 8 codes; sx[m] += Σ_j x[m][FIRST+j].
template <int BITS, int M, int FIRST>
__device__ __forceinline__ void accumulate_sub(const GemvArgs& a, const float* x_chunk,
                                               const uint32_t (&words)[kCols][BITS],
                                               const float (&scale)[kCols], float (&sx)[M],
                                               float (&acc)[M][kCols]) {
  float q[kCols][kSub];
#pragma unroll
  for (int c = 0; c < kCols; ++c) device::chunk_codes<BITS, FIRST, kSub>(words[c], q[c]);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float xv[kSub];
    device::load_x8(x_chunk + m * a.ldx + FIRST, a.x_vec, xv);
#pragma unroll
    for (int j = 0; j < kSub; ++j) sx[m] += xv[j];
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      float dot = 0.0f;
#pragma unroll
      for (int j = 0; j < kSub; ++j) dot = fmaf(xv[j], q[c][j], dot);
      acc[m][c] = fmaf(scale[c], dot, acc[m][c]);
    }
  }
}

// The weight rows of the block's output columns n0 .. n0 + C - 1; columns past N (last block
// only) re-read row N - 1 and are never stored.
template <int C>
__device__ __forceinline__ void tile_columns(int64_t n0, int64_t N, int64_t (&col)[C]) {
#pragma unroll
  for (int c = 0; c < C; ++c) col[c] = n0 + c < N ? n0 + c : N - 1;
}

template <int BITS, int M>
__global__ void __launch_bounds__(kThreads, 3) quant_gemv_kernel(GemvArgs a) {
  static_assert(kCodesPerChunk == 4 * kSub);
  __shared__ float partials[(kThreads / 32 + 1) * M * kCols];
  const int64_t n0 = blockIdx.x * int64_t{kCols};
  const int64_t chunks = a.w.K / kCodesPerChunk;
  int64_t col[kCols];
  tile_columns(n0, a.w.N, col);
  float acc[M][kCols];
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[m][c] = 0.0f;
  }
  for (int64_t ch = threadIdx.x; ch < chunks; ch += kThreads) {
    const int64_t g = ch >> a.w.chunk_group_shift;
    uint32_t words[kCols][BITS];
    float scale[kCols], bias[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      device::load_chunk_words<BITS, true>(a.w.codes + col[c] * a.w.row_words + ch * BITS,
                                           words[c]);
      scale[c] = a.w.scales[col[c] * a.w.groups + g];
      bias[c] = a.w.biases[col[c] * a.w.groups + g];
    }
    float sx[M];
#pragma unroll
    for (int m = 0; m < M; ++m) sx[m] = 0.0f;
    const float* x_chunk = a.x + ch * kCodesPerChunk;
    accumulate_sub<BITS, M, 0>(a, x_chunk, words, scale, sx, acc);
    accumulate_sub<BITS, M, 8>(a, x_chunk, words, scale, sx, acc);
    accumulate_sub<BITS, M, 16>(a, x_chunk, words, scale, sx, acc);
    accumulate_sub<BITS, M, 24>(a, x_chunk, words, scale, sx, acc);
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int c = 0; c < kCols; ++c) acc[m][c] = fmaf(bias[c], sx[m], acc[m][c]);
    }
  }
  device::reduce_tile_to_y<M, kCols, kThreads>(acc, partials, n0, a.w.N, a.bias, a.y, a.ldy);
}

// The pipelined GEMV: kWideCols columns per block for codes of up to 4 bits, up to 4 rows and N
// above kNarrowN (more weight bytes in flight per thread; registers bound the rest), every thread's
// first two chunks loaded before waiting for the kernel before it (the weights are no kernel's
// output; launched with PDL), then two chunks loaded together per step as the dense GEMV does;
// 4-bit codes unpacked by a byte permute per code (the nibbles split into two byte-aligned words
// first). Same arithmetic per chunk as quant_gemv_kernel.
constexpr int kWideCols = 8;
// More rows keep quant_gemv_kernel: with two chunks of codes in registers the pipelined kernel
// ran 8 rows 0.91x as fast (H200, 8B mlx4).
constexpr int kPipelinedMaxRows = 4;
constexpr int64_t kNarrowN = 2048;  // N up to this: 4 columns per block (fill the GPU)

template <int BITS, int kC>
struct ChunkTile {
  uint32_t words[kC][BITS];
  float scale[kC], bias[kC];
};

template <int BITS, int kC>
__device__ __forceinline__ void load_tile(const QuantArgs& w, const int64_t (&col)[kC], int64_t ch,
                                          bool valid, ChunkTile<BITS, kC>& t) {
  const int64_t g = ch >> w.chunk_group_shift;
  const int64_t at = valid ? ch : 0;  // past the end: chunk 0 again, never used
#pragma unroll
  for (int c = 0; c < kC; ++c) {
    device::load_chunk_words<BITS, true>(w.codes + col[c] * w.row_words + at * BITS, t.words[c]);
    t.scale[c] = w.scales[col[c] * w.groups + (valid ? g : 0)];
    t.bias[c] = w.biases[col[c] * w.groups + (valid ? g : 0)];
  }
}

// Codes FIRST .. FIRST + 7 of a chunk as exact floats.
template <int BITS, int FIRST>
__device__ __forceinline__ void sub_codes(const uint32_t (&words)[BITS], float (&q)[kSub]) {
  if constexpr (BITS == 4) {
    // Word FIRST / 8 holds the 8 codes; even codes are the low nibbles of its bytes.
    const uint32_t word = words[FIRST / 8];
    const uint32_t even = word & 0x0F0F0F0Fu, odd = (word >> 4) & 0x0F0F0F0Fu;
#pragma unroll
    for (int j = 0; j < kSub; ++j) {
      const uint32_t bits = __byte_perm(j % 2 ? odd : even, 0x4B000000u, 0x7440u | (j / 2));
      q[j] = __uint_as_float(bits) - 8388608.0f;
    }
  } else {
    device::chunk_codes<BITS, FIRST, kSub>(words, q);
  }
}

// x values FIRST .. FIRST + 7 of each row of a chunk.
template <int M, int FIRST>
__device__ __forceinline__ void load_sub_x(const GemvArgs& a, const float* x_chunk,
                                           float (&xv)[M][kSub]) {
#pragma unroll
  for (int m = 0; m < M; ++m) device::load_x8(x_chunk + m * a.ldx + FIRST, a.x_vec, xv[m]);
}

// quant_gemv_kernel's accumulate_sub on x values already loaded.
template <int BITS, int M, int kC, int FIRST>
__device__ __forceinline__ void accumulate_sub2(const ChunkTile<BITS, kC>& t,
                                                const float (&xv)[M][kSub], float (&sx)[M],
                                                float (&acc)[M][kC]) {
  float q[kC][kSub];
#pragma unroll
  for (int c = 0; c < kC; ++c) sub_codes<BITS, FIRST>(t.words[c], q[c]);
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int j = 0; j < kSub; ++j) sx[m] += xv[m][j];
#pragma unroll
    for (int c = 0; c < kC; ++c) {
      float dot = 0.0f;
#pragma unroll
      for (int j = 0; j < kSub; ++j) dot = fmaf(xv[m][j], q[c][j], dot);
      acc[m][c] = fmaf(t.scale[c], dot, acc[m][c]);
    }
  }
}

// One chunk. Up to 2 rows, the chunk's x values are all loaded first (one L1 round trip
// instead of one per 8 codes); more rows load them per 8 codes (registers).
template <int BITS, int M, int kC>
__device__ __forceinline__ void accumulate_chunk(const GemvArgs& a, int64_t ch,
                                                 const ChunkTile<BITS, kC>& t,
                                                 float (&acc)[M][kC]) {
  float sx[M];
#pragma unroll
  for (int m = 0; m < M; ++m) sx[m] = 0.0f;
  const float* x_chunk = a.x + ch * kCodesPerChunk;
  if constexpr (M <= 2) {
    float x0[M][kSub], x1[M][kSub], x2[M][kSub], x3[M][kSub];
    load_sub_x<M, 0>(a, x_chunk, x0);
    load_sub_x<M, 8>(a, x_chunk, x1);
    load_sub_x<M, 16>(a, x_chunk, x2);
    load_sub_x<M, 24>(a, x_chunk, x3);
    accumulate_sub2<BITS, M, kC, 0>(t, x0, sx, acc);
    accumulate_sub2<BITS, M, kC, 8>(t, x1, sx, acc);
    accumulate_sub2<BITS, M, kC, 16>(t, x2, sx, acc);
    accumulate_sub2<BITS, M, kC, 24>(t, x3, sx, acc);
  } else {
    float xv[M][kSub];
    load_sub_x<M, 0>(a, x_chunk, xv);
    accumulate_sub2<BITS, M, kC, 0>(t, xv, sx, acc);
    load_sub_x<M, 8>(a, x_chunk, xv);
    accumulate_sub2<BITS, M, kC, 8>(t, xv, sx, acc);
    load_sub_x<M, 16>(a, x_chunk, xv);
    accumulate_sub2<BITS, M, kC, 16>(t, xv, sx, acc);
    load_sub_x<M, 24>(a, x_chunk, xv);
    accumulate_sub2<BITS, M, kC, 24>(t, xv, sx, acc);
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int c = 0; c < kC; ++c) acc[m][c] = fmaf(t.bias[c], sx[m], acc[m][c]);
  }
}

template <int BITS, int M, int kC>
__global__ void __launch_bounds__(kThreads) quant_gemv_pipelined_kernel(GemvArgs a) {
  __shared__ float partials[(kThreads / 32 + 1) * M * kC];
  const int64_t n0 = blockIdx.x * int64_t{kC};
  const int64_t chunks = a.w.K / kCodesPerChunk;
  int64_t col[kC];
  tile_columns(n0, a.w.N, col);
  ChunkTile<BITS, kC> t0, t1;
  const int64_t first = threadIdx.x;
  load_tile(a.w, col, first, first < chunks, t0);
  load_tile(a.w, col, first + kThreads, first + kThreads < chunks, t1);
  device::wait_prior_grid();
  device::launch_dependents();
  float acc[M][kC];
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int c = 0; c < kC; ++c) acc[m][c] = 0.0f;
  }
  for (int64_t ch = first; ch < chunks; ch += 2 * kThreads) {
    if (ch != first) {
      load_tile(a.w, col, ch, true, t0);
      load_tile(a.w, col, ch + kThreads, ch + kThreads < chunks, t1);
    }
    accumulate_chunk<BITS, M, kC>(a, ch, t0, acc);
    if (ch + kThreads < chunks) accumulate_chunk<BITS, M, kC>(a, ch + kThreads, t1, acc);
  }
  device::reduce_tile_to_y<M, kC, kThreads>(acc, partials, n0, a.w.N, a.bias, a.y, a.ldy);
}

__device__ __forceinline__ uint32_t bits16(__nv_bfloat16 v) {
  return __bfloat16_as_ushort(v);
}
__device__ __forceinline__ uint32_t bits16(__half v) {
  return __half_as_ushort(v);
}

// 32 floats rounded to T into dst (32·sizeof(T) bytes, 16-byte aligned) with 16-byte stores.
template <typename T>
__device__ __forceinline__ void store_chunk(T* dst, const float (&v)[kCodesPerChunk]) {
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int i = 0; i < kCodesPerChunk; i += 4)
      reinterpret_cast<float4*>(dst)[i / 4] = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
  } else {
    uint32_t packed[kCodesPerChunk / 2];
#pragma unroll
    for (int i = 0; i < kCodesPerChunk; i += 2) {
      packed[i / 2] =
          bits16(device::from_f32<T>(v[i])) | (bits16(device::from_f32<T>(v[i + 1])) << 16);
    }
#pragma unroll
    for (int i = 0; i < kCodesPerChunk / 2; i += 4)
      reinterpret_cast<uint4*>(dst)[i / 4] =
          make_uint4(packed[i], packed[i + 1], packed[i + 2], packed[i + 3]);
  }
}

// out[r, :] = T(dequant(w)[n0 + r, :]) for r < rows: one thread per chunk of 32 codes.
template <int BITS, typename T>
__global__ void dequant_rows_kernel(QuantArgs w, int64_t n0, int64_t rows, T* out) {
  const int64_t chunks_per_row = w.K / kCodesPerChunk;
  const int64_t total = rows * chunks_per_row;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / chunks_per_row, ch = i % chunks_per_row, n = n0 + r;
    uint32_t words[BITS];
    device::load_chunk_words<BITS, false>(w.codes + n * w.row_words + ch * BITS, words);
    const int64_t g = n * w.groups + (ch >> w.chunk_group_shift);
    const float scale = w.scales[g], bias = w.biases[g];
    float q[kCodesPerChunk];
    device::chunk_codes<BITS, 0, kCodesPerChunk>(words, q);
#pragma unroll
    for (int j = 0; j < kCodesPerChunk; ++j) q[j] = device::dequant(scale, q[j], bias);
    store_chunk<T>(out + r * w.K + ch * kCodesPerChunk, q);
  }
}

QuantArgs quant_args(const ops::QuantizedMatrix& q) {
  int shift = 0;
  while ((kCodesPerChunk << shift) < q.group_size) ++shift;
  return QuantArgs{q.codes.ptr<const uint32_t>(),
                   q.codes.shape[1],
                   AnyFloat{q.scales.data, q.scales.dtype},
                   AnyFloat{q.biases.data, q.biases.dtype},
                   q.scales.shape[1],
                   shift,
                   q.rows(),
                   q.cols()};
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

std::atomic<bool>& pipelined_flag() {
  static std::atomic<bool> on{env_switch_on("RINGLM_CUDA_QUANT_GEMV_PIPELINED")};
  return on;
}

bool pipelined_gemv() {
  return pipelined_flag().load(std::memory_order_relaxed);
}

template <int BITS>
void launch_gemv(int64_t M, const GemvArgs& a, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((a.w.N + kCols - 1) / kCols);
  const auto wide_blocks = static_cast<unsigned>((a.w.N + kWideCols - 1) / kWideCols);
  auto go = [&]<int R>() {
    if constexpr (R <= kPipelinedMaxRows) {
      if (pipelined_gemv() && (a.w.N <= kNarrowN || BITS > 4)) {
        launch_pdl(quant_gemv_pipelined_kernel<BITS, R, kCols>, dim3(blocks), dim3(kThreads), 0,
                   stream, a);
        return;
      }
      if (pipelined_gemv()) {
        launch_pdl(quant_gemv_pipelined_kernel<BITS, R, kWideCols>, dim3(wide_blocks),
                   dim3(kThreads), 0, stream, a);
        return;
      }
    }
    quant_gemv_kernel<BITS, R><<<blocks, kThreads, 0, stream>>>(a);
  };
  switch (M) {
    case 1:
      return go.template operator()<1>();
    case 2:
      return go.template operator()<2>();
    case 3:
      return go.template operator()<3>();
    case 4:
      return go.template operator()<4>();
    case 5:
      return go.template operator()<5>();
    case 6:
      return go.template operator()<6>();
    case 7:
      return go.template operator()<7>();
    case 8:
      return go.template operator()<8>();
    default:
      RINGLM_FAIL("quantized gemv: ", M, " rows (at most ", kQuantGemvMaxRows, ")");
  }
}

int64_t valid_tile_mib(int64_t mib) {
  return mib >= 1 && mib <= 1024 ? mib : kDequantTileMiB;
}
std::atomic<int64_t>& tile_mib_setting() {
  static std::atomic<int64_t> mib{
      valid_tile_mib(env_positive_int("RINGLM_CUDA_DEQUANT_TILE_MIB", kDequantTileMiB))};
  return mib;
}

// Many rows: dense matmuls over column tiles of dequant(w) in scratch.
void matmul_dequantized_tiles(const Tensor& x, const ops::QuantizedMatrix& q, const Tensor& bias,
                              Tensor& y) {
  Context& ctx = Context::get();
  const QuantArgs w = quant_args(q);
  const DType dtype = q.scales.dtype;
  const size_t row_bytes = static_cast<size_t>(w.K) * dtype_size(dtype);
  int64_t tile_rows = static_cast<int64_t>((size_t{1} << 20) * dequant_tile_mib() / row_bytes);
  if (tile_rows >= 128) tile_rows -= tile_rows % 128;  // whole GEMM tiles for cuBLAS
  tile_rows = std::min<int64_t>(w.N, std::max<int64_t>(1, tile_rows));
  void* scratch = ctx.scratch(Scratch::DequantTile, static_cast<size_t>(tile_rows) * row_bytes);
  const int64_t ldy = leading_dim(y);
  for (int64_t n0 = 0; n0 < w.N; n0 += tile_rows) {
    const int64_t rows = std::min(tile_rows, w.N - n0);
    device::dispatch_bits(q.bits, [&]<int BITS>() {
      device::dispatch_float(dtype, [&]<typename T>(T*) {
        dequant_rows_kernel<BITS, T>
            <<<device::grid_for(rows * (w.K / kCodesPerChunk)), device::kThreads, 0,
               ctx.stream()>>>(w, n0, rows, static_cast<T*>(scratch));
      });
    });
    check_launch("dequant_rows_kernel");
    const Tensor tile(scratch, dtype, {rows, w.K}, Device::CUDA);
    Tensor y_cols = y;  // columns [n0, n0 + rows) of y
    y_cols.data = y.ptr<float>() + n0;
    y_cols.shape[1] = rows;
    y_cols.strides[0] = ldy;
    Tensor bias_cols = bias;
    if (!bias.empty()) {
      bias_cols.data =
          static_cast<char*>(bias.data) + static_cast<size_t>(n0) * dtype_size(bias.dtype);
      bias_cols.shape[0] = rows;
    }
    matmul(x, tile, bias_cols, y_cols);
  }
}

}  // namespace

void set_quant_gemv_pipelined(bool enabled) {
  pipelined_flag().store(enabled, std::memory_order_relaxed);
}

bool quant_gemv_pipelined() {
  return pipelined_gemv();
}

int64_t dequant_tile_mib() {
  return tile_mib_setting().load(std::memory_order_relaxed);
}

void set_dequant_tile_mib(int64_t mib) {
  tile_mib_setting().store(valid_tile_mib(mib), std::memory_order_relaxed);
}

void matmul_quantized(const Tensor& x, const ops::QuantizedMatrix& q, const Tensor& bias,
                      Tensor& y) {
  const int64_t M = x.shape[0], N = q.rows();
  if (M == 0 || N == 0) return;
  if (q.cols() == 0)  // y = bias: the dense path's K = 0 case
    return matmul(x, Tensor(q.codes.data, q.scales.dtype, {N, 0}, Device::CUDA), bias, y);
  RINGLM_CHECK(x.dtype == DType::F32 || x.dtype == q.scales.dtype, "matmul_quantized: x ",
               dtype_name(x.dtype), " with ", dtype_name(q.scales.dtype), " scales");
  const QuantMma mma{&x, &q, &bias, &y};
  if (quant_mma_applies(mma)) return quant_mma(mma);
  const int64_t ldx = leading_dim(x);
  // 16-bit x (quantized_matmul_takes_half_x): the tiles' GEMM in x's dtype.
  if (x.dtype != DType::F32 || M > kQuantGemvMaxRows || !aligned16(q.codes.data))
    return matmul_dequantized_tiles(x, q, bias, y);
  const GemvArgs a{quant_args(q),
                   x.ptr<const float>(),
                   ldx,
                   aligned16(x.data) && ldx % 4 == 0,
                   AnyFloat{bias.empty() ? nullptr : bias.data, bias.dtype},
                   y.ptr<float>(),
                   leading_dim(y)};
  cudaStream_t stream = Context::get().stream();
  device::dispatch_bits(q.bits, [&]<int BITS>() { launch_gemv<BITS>(M, a, stream); });
  check_launch("quant_gemv_kernel");
}

}  // namespace ringlm::cuda
