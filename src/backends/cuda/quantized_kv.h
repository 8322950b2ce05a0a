// The CUDA backend's quantized-KV pieces that the dense entry points (kv_write.cu, attention.cu)
// call into: quantizing writes (kv_write_quantized.cu), the TurboQuant output un-rotation
// (turbo_rotation.cu) and the device copies of kv/turbo_codec's tables (turbo_tables.cc).
// Plain C++ (no CUDA headers). Shapes and formats were checked by ops::kv_write / ops::attention.
#pragma once

#include "core/tensor.h"
#include "ops/ops.h"

namespace ringlm::cuda {

// kv_write for an affine (bits 4/8, group 32/64) or TurboQuant view: the same bytes as
// cpu::kv_write for finite inputs (non-finite ones give garbage groups, as on the CPU, but not
// necessarily the same garbage). A slot outside the cache skips the token and is reported by
// cuda::synchronize().
void kv_write_quantized(const Tensor& k,      // F32[T, kv_heads, head_dim]
                        const Tensor& v,      // F32[T, kv_heads, head_dim]
                        const Tensor& slots,  // I32[T]
                        ops::KvLayerView& kv);

// The tokens of a step whose positions are in [begin, end), from the step's device row tables
// (ops::AttentionRows layout); every token when query_start is null.
struct TokenPositions {
  const int32_t* query_start = nullptr;  // [num_rows + 1]
  const int32_t* context_len = nullptr;  // [num_rows]
  int num_rows = 0;
  int32_t begin = 0, end = INT32_MAX;
};

// x = signs_d ⊙ H(x)/√d for every row of x of the tokens in `only` (the deferred inverse
// rotation of TurboQuant values), bit for bit kv::turbo_unrotate per row. d a power of two in
// [32, 512].
void turbo_unrotate_rows(Tensor& x,  // F32[T, heads, d] contiguous
                         const TokenPositions& only = {});

// Every (slot, kv head) row of `kv` decoded through the attention kernels' reader
// (device/kv_readers.cuh), `dims_per_read` (1, 4 or 8) dims per key<N>/value<N> call: keys as
// attention scores them, values in the accumulation domain (TurboQuant: rotated). For tests of
// the readers against the codecs (kv_decode.cu).
void decode_kv_rows(const ops::KvLayerView& kv, int dims_per_read,
                    Tensor& keys,     // F32[num_blocks·block_tokens·kv_heads, head_dim]
                    Tensor& values);  // F32[num_blocks·block_tokens·kv_heads, head_dim]

// Device copies of kv/turbo_codec's tables on the current device, uploaded on first use (a
// synchronous copy: the first, eager, step of a model does it before any graph capture).
const float* turbo_centroids_on_device(int bits);   // F32[2^bits]
const float* turbo_boundaries_on_device(int bits);  // F32[2^bits − 1]
const float* turbo_signs_on_device(int head_dim);   // F32[head_dim], ±1

}  // namespace ringlm::cuda
