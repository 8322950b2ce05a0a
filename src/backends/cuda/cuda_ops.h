// The CUDA backend: one entry point per op, same contracts as backends/cpu/cpu_ops.h. Callers
// (ops/*.cc) have checked shapes, dtypes and devices; every tensor argument is device memory.
// Values that live on the device (token ids, positions, slots) cannot be checked on the host
// without a sync: kernels check them, leave the affected output NaN/untouched, and record the first
// bad value; cuda::synchronize() then throws ringlm::Error naming the op and the value.
//
// All work is queued on the calling thread's backend stream (runtime.h) and is asynchronous.
// This header is plain C++ (no CUDA headers), so host code compiled by g++ can include it.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "ops/ops.h"
#include "ops/weight.h"

namespace ringlm::cuda {

class DeviceRows;

// Precision: F32 weights run a pure-f32 GEMM (cuBLAS compute 32F, no TF32). BF16 (F16) weights:
// x is rounded to bf16 (f16) and a bf16 (f16) tensor-core GEMM accumulates in f32 into f32 y, so
// each product carries x's rounding (relative ≤ 2^-9 for bf16, 2^-12 for f16). F16 activations
// beyond ±65504 overflow; F16 checkpoints are trained to stay inside that range. x may also come
// already rounded, in the weights' 16-bit dtype (ops::matmul_input_dtype): the same GEMM without
// the rounding pass, bit for bit the F32 x of those values. ops::matmul_input_dtype hands out
// 16-bit inputs while rounded_matmul_inputs() (true unless RINGLM_CUDA_ROUNDED_INPUTS=0 or
// set_rounded_matmul_inputs(false): same-binary A/Bs and the test that the bits do not change;
// CUDA graphs captured before keep theirs).
bool rounded_matmul_inputs();
void set_rounded_matmul_inputs(bool enabled);
void matmul(const Tensor& x,     // F32[M, K] (or BF16|F16 as w), rows may be strided
            const Tensor& w,     // F32|BF16|F16[N, K] contiguous
            const Tensor& bias,  // F32|BF16|F16[N] or empty
            Tensor& y);          // F32[M, N], rows may be strided

// Several matmuls of one x (M <= 2 rows) with BF16/F16 weights of one dtype as one launch of the
// decode GEMV (gemv.cu): bit for bit the separate cuda::matmul calls, which would run the same
// GEMV one matrix at a time (the q, k and v projections of a decode step: one launch instead of
// three, and enough blocks to fill the GPU where k and v alone give half a wave). The caller ran
// ops::detail::check_matmul on each target.
constexpr int kGemvMaxTargets = 3;
struct GemvTarget {
  const Tensor* w;     // BF16|F16[N_i, K] contiguous
  const Tensor* bias;  // F32|BF16|F16[N_i] or empty
  Tensor* y;           // F32[M, N_i], rows may be strided
};
bool gemv_many_applies(const Tensor& x,  // F32[M, K]
                       std::span<const GemvTarget> targets);
// An RMSNorm fused into the GEMV's input: x is the raw residual stream and the GEMV multiplies
// rms_norm(x, weight) — bit for bit cuda::rms_norm into an f32 buffer that the plain GEMV then
// reads, for 16-byte-aligned rows (the norm's one-pass kernel; device/rope_norm.cuh). Applies
// when RINGLM_CUDA_FUSED_NORMS is not 0 (gemv_fused_norms), x's rows are 16-byte aligned with
// K <= 16384 (the norm's one-pass rows) and M·K·2 bytes <= 40 KB (the rows normalized in
// shared memory), and weight is [K] contiguous, 16-byte aligned, of the
// matmul weights' dtype.
struct GemvNorm {
  const Tensor* weight;  // BF16|F16[K], the matmul weights' dtype
  float eps;
  bool unit_offset;  // Gemma: · (1 + weight)
};
bool gemv_norm_applies(const Tensor& x,  // F32[M, K]
                       DType weights, const GemvNorm& norm);
bool gemv_fused_norms();  // the RINGLM_CUDA_FUSED_NORMS switch (tests and A/Bs turn it off)
void set_gemv_fused_norms(bool enabled);
// Rope and the K/V write in the store of a normalizing q/k/v launch: targets are [q, k, v] with
// kv the layer's cache, or [q] alone with kv null; q and k come out rotated as prepare_attention
// rotates them and k and v also go to the cache at each row's slot — bit for bit gemv_many then
// cuda::prepare_attention without q/k norms (device errors included: a negative position, a slot
// out of range). Applies (gemv_rope_applies) when RINGLM_CUDA_FUSED_ROPE=1 (gemv_fused_rope; off
// by default: slower on the H200 so far, docs/benchmarks.md)
// and the norm applies, with full rotary (rotary_dim == head_dim, a multiple of 8: a tile holds
// whole rope pairs) and a dense F32/BF16/F16 cache. The caller ran prepare_attention's checks.
struct GemvRope {
  const ops::RopeTable* table;
  const Tensor* positions;     // I32[M]
  const Tensor* slots;         // I32[M]; unused without kv
  const ops::KvLayerView* kv;  // dense [blocks, block_tokens, kv_heads, head_dim], or null
  int64_t head_dim;
};
bool gemv_rope_applies(const Tensor& x,  // F32[M, K]
                       std::span<const GemvTarget> targets, const GemvNorm& norm,
                       const GemvRope& rope);
bool gemv_fused_rope();  // the RINGLM_CUDA_FUSED_ROPE switch (off by default; tests turn it on)
void set_gemv_fused_rope(bool enabled);
void gemv_many(const Tensor& x,  // F32[M, K], rows may be strided
               std::span<const GemvTarget> targets, const GemvNorm* norm = nullptr,
               const GemvRope* rope = nullptr);
// acc += x · wᵀ (+ bias), one f32 add per element of the GEMV's y: bit for bit gemv into y
// then add_inplace(acc, y) (the residual add after a block's last projection).
void gemv_accumulate(const Tensor& x,     // F32[M, K], M <= kGemvMaxRows
                     const Tensor& w,     // BF16|F16[N, K] contiguous
                     const Tensor& bias,  // F32|BF16|F16[N] or empty
                     Tensor& acc);        // F32[M, N], rows may be strided
// Two or three cuBLAS matmuls of one x (more rows than the GEMV takes) with BF16/F16 weights of
// one dtype: x is rounded to that dtype once, not once per weight — bit for bit the separate
// cuda::matmul calls. When the weights lie back to back in memory (WeightStore::place_together:
// a model's q/k/v, gate/up) and M <= 64, one GEMM over them all into scratch, then its columns
// copied out: within f32 rounding of the separate calls (cuBLAS picks its kernel per shape),
// not bitwise. The caller ran ops::detail::check_matmul on each target.
bool matmul_shared_input_applies(const Tensor& x,  // F32[M, K]
                                 std::span<const GemvTarget> targets);
void matmul_shared_input(const Tensor& x,  // F32[M, K], rows may be strided
                         std::span<const GemvTarget> targets);
// out = x rounded to out's dtype (BF16/F16), row by row: what cuBLAS matmuls of 16-bit weights
// do to an f32 x first.
void round_rows(const Tensor& x,  // F32[M, K], rows may be strided
                Tensor& out);     // BF16|F16[M, K] contiguous

// The joined GEMM of matmul_shared_input alone: x · [w_0; w_1; ...]ᵀ (+ biases) as F32[M, ΣN_i]
// in scratch (valid until the next joined GEMM), the targets' y not written. Applies where
// matmul_shared_input would join (adjacent weights, 3 <= M <= 64).
bool matmul_joined_applies(const Tensor& x,  // F32[M, K]
                           std::span<const GemvTarget> targets);
Tensor matmul_joined(const Tensor& x,  // F32[M, K], rows may be strided
                     std::span<const GemvTarget> targets);
// gated_matmul above the GEMV's rows for adjacent gate and up weights of one shape (M <= 64):
// one GEMM over both into scratch, then gated_activation reading its two halves (gate.y and up.y
// are not written); within f32 rounding of the separate matmuls then gated_activation.
bool gemm_gated_applies(const Tensor& x,  // F32[M, K]
                        const GemvTarget& gate, const GemvTarget& up);
void gemm_gated(const Tensor& x, const GemvTarget& gate, const GemvTarget& up,
                ops::Activation activation, Tensor& out);  // out: F32[M, N]
// out = act(x·gateᵀ + gate bias) · (x·upᵀ + up bias) in one GEMV launch, bit for bit gemv_many
// of the two then gated_activation (gate.y and up.y are not written). out: F32[M, N], may be
// gate.y.
bool gemv_gated_applies(const Tensor& x,  // F32[M, K]
                        const GemvTarget& gate, const GemvTarget& up);
void gemv_gated(const Tensor& x, const GemvTarget& gate, const GemvTarget& up,
                ops::Activation activation, Tensor& out, const GemvNorm* norm = nullptr);

// MLX affine-quantized w (ops/weight.h; the caller ran ops::check_quantized). Precision — not the
// CPU's bit-exact "dense matmul on dequant(w)", but within f32 rounding of it:
//  - M <= 8 (decode, fused GEMV): x stays f32 and the codes q are exact; per 8 codes of a group
//    s·Σ x·q, per 32 codes + b·Σ x, all in f32 in an order fixed by K (batch-invariant). Against
//    the exact Σ_k x_k·(s·q_k + b) the error is within f32 rounding of Σ_k |x_k|·(|s·q_k| + |b|).
//  - M > 8 (prefill): w = s·q + b rounded as MLX (a multiply, then an add), then rounded to the
//    scales' dtype (bf16: relative 2^-9 per weight; exact for F32 scales) into a column tile of
//    scratch, and the dense matmul above runs on it (x rounded to that dtype too).
//  - 4- or 8-bit codes with BF16 scales, M <= 16 (quant_mma.h, taking precedence over both):
//    x and w = bf16(s·q + b) rounded to bf16, exact products, f32 accumulation — the tile path's
//    bound; rows bitwise independent of M.
// So a row's result differs in its last bits between the paths.
// Whether the decode GEMV for quantized weights is the pipelined kernel (more columns per block,
// its first weights loaded before the kernel before it ends, PDL) or the first one: the same
// bits. On unless RINGLM_CUDA_QUANT_GEMV_PIPELINED=0 or a test turns it off.
void set_quant_gemv_pipelined(bool enabled);
bool quant_gemv_pipelined();
// The most MiB of dequantized weight rows one tile of the M > 8 path holds (one cuBLAS GEMM per
// tile): 128 (any 8B-shape weight whole), or RINGLM_CUDA_DEQUANT_TILE_MIB (1..1024) read at
// start-up for A/Bs. Tests set it (set_dequant_tile_mib; 0 = back to the default) to run several
// tiles per weight.
int64_t dequant_tile_mib();
void set_dequant_tile_mib(int64_t mib);
void matmul_quantized(const Tensor& x,                // F32[M, K], rows may be strided
                      const ops::QuantizedMatrix& w,  // [N, K]
                      const Tensor& bias,             // F32|BF16|F16[N] or empty
                      Tensor& y);                     // F32[M, N], rows may be strided

void embedding(const Tensor& ids,          // I32[M] (device-checked against V)
               const Tensor& table,        // F32|BF16|F16[V, H]
               float scale, Tensor& out);  // F32[M, H]
// Same for a quantized table: each looked-up row dequantized in f32 exactly as on the CPU
// (s·q, then + b, then · scale unless scale is 1), so the rows equal the CPU's bit for bit.
void embedding_quantized(const Tensor& ids,                  // I32[M] (device-checked against V)
                         const ops::QuantizedMatrix& table,  // [V, H]
                         float scale, Tensor& out);          // F32[M, H]

// out F32, or BF16/F16 (the f32 result rounded once: a matmul input, ops::matmul_input_dtype).
void rms_norm(const Tensor& x,                                 // F32[M, H]
              const Tensor& weight,                            // F32|BF16|F16[H]
              const ops::RmsNormConfig& config, Tensor& out);  // F32|BF16|F16[M, H], may alias x

// x += residual, then out = rms_norm(x), bit for bit add_inplace then rms_norm; out may alias x
// or residual.
void add_rms_norm(Tensor& x,                                       // F32[M, H]
                  const Tensor& residual,                          // F32[M, H]
                  const Tensor& weight,                            // F32|BF16|F16[H]
                  const ops::RmsNormConfig& config, Tensor& out);  // F32|BF16|F16[M, H]
void add_inplace(Tensor& x,                                        // F32[M, H]
                 const Tensor& y);                                 // F32[M, H]

// rotary_dim / 2 <= kMaxRopeHalf (the frequencies travel in the kernel's parameters).
constexpr int kMaxRopeHalf = 256;
void rope(Tensor& x,                // F32[T, heads, head_dim] contiguous
          const Tensor& positions,  // I32[T] (device-checked >= 0)
          const ops::RopeTable& table);

void gated_activation(const Tensor& gate,                        // F32[M, I]
                      const Tensor& up,                          // F32[M, I]
                      ops::Activation activation, Tensor& out);  // F32|BF16|F16[M, I]

void softmax(Tensor& x);                    // F32[M, N]
void argmax(const Tensor& x, Tensor& out);  // F32[M, N] -> I32[M]

// One choice's token from one logit row (several jobs may share a row): engine/sampler.h's
// steps 5-6 — min_p, top_k, top_p, then the inverse CDF in id order at u; temperature 0 is the
// first largest logit — on the unprocessed row (no penalties, bias or suppression: the engine
// keeps those on the host), and optionally the token's logprob (fill_logprobs' value; top-n lists
// stay on the host). sampling.cu says how; a job's result depends on its row and parameters alone.
struct SampleJob {
  int32_t row;        // logit row
  int32_t top_k;      // >= 0; 0 = off
  float temperature;  // >= 0; 0 = greedy
  float top_p;        // (0, 1]
  float min_p;        // [0, 1]
  double u;           // [0, 1): engine/philox.h's uniform for the choice and token index
  bool want_logprob = false;
};
void sample(const Tensor& logits,  // F32[R, V], rows may be strided
            std::span<const SampleJob> jobs,
            Tensor& tokens,               // I32[jobs]
            Tensor* logprobs = nullptr);  // F32[jobs]; needed when a job wants its logprob
void softcap(Tensor& x, float cap);       // F32[M, N]

// Decode attention splits a row's keys into at most this many parts (split-K); a process-wide
// override of the per-format choice (attention.cu split_rule_for), for benchmarks
// (`ringlm bench --decode-parts`); 0, the default, keeps the per-format choice. Any value keeps
// a row's bits independent of the batch among steps on the same side of wide_decode_rows().
void set_decode_part_limit(int parts);
int decode_part_limit();
// The fewest keys in a decode part (a multiple of 64; RINGLM_CUDA_DECODE_MIN_SPLIT at start-up),
// overriding the per-format choice and the wide rule; any value keeps a row's bits independent
// of the batch.
void set_decode_min_split(int keys);
// Decode rows of at most `keys` keys (a multiple of 64, or 0: none, the default) take one part
// whatever the rest of the rule says (RINGLM_CUDA_DECODE_SINGLE_PART at start-up; thirty-first
// session, for A/Bs with set_decode_direct: a one-part step needs no merge kernel). A function of
// the row's key count: a row's bits stay independent of the batch.
void set_decode_single_part(int keys);
// Decode steps of at least this many decode rows (17 by default; RINGLM_CUDA_DECODE_WIDE_ROWS at
// start-up) split the 16-bit, affine and TurboQuant formats' keys into parts of at least 512 keys
// instead of 256 (attention.cu split_rule_for says why). set_wide_decode_rows(0): never (values
// below 3 mean never; the default keeps the rule off the steps whose matmuls are bitwise
// M-independent). wide_decode_rows(): the threshold in effect (INT_MAX when never).
void set_wide_decode_rows(int rows);
int wide_decode_rows();
// Warps per block (4 or 8) of the 16-bit and TurboQuant k8v3 tensor-core decode kernels in steps
// of fewer decode rows than wide_decode_rows() (RINGLM_CUDA_DECODE_WARPS=8 at start-up; wide
// steps take 4). Eight double the warps per SM of one-row steps (a block or two per SM); the
// warps' summation order differs, so a row's bits depend on this setting, not on the batch.
void set_narrow_decode_warps(int warps);
int narrow_decode_warps();
// Whether the tensor-core decode kernels start loading the first tiles of keys older than the
// query's own before the kernel before them (prepare_attention, which writes q and the step's
// K/V) has finished: bit for bit the same output. On unless the environment sets
// RINGLM_CUDA_DECODE_EARLY=0 or a test turns it off.
void set_decode_early_fetch(bool enabled);
// Whether a decode-only step's split-K merges write a 16-bit attention output themselves (else the
// f32 output is rounded by a pass after the attention): same bits. On unless the environment sets
// RINGLM_CUDA_MERGE_ROUNDED=0 or a test turns it off.
void set_merge_rounded(bool enabled);
bool merge_rounded();
bool decode_early_fetch();
// Whether the tensor-core decode kernel over affine 4-/8-bit K/V (head dims <= 128) loads each
// tile's codes two tiles ahead of its math instead of when it decodes them: same bits. On unless
// the environment sets RINGLM_CUDA_AFFINE_PREFETCH=0 or a test turns it off.
void set_decode_affine_prefetch(bool enabled);
bool decode_affine_prefetch();
// Whether the tensor-core decode kernels merge their split-K parts themselves (the last block of
// a task) instead of a merge kernel after them: bit for bit the same output. On unless the
// environment sets RINGLM_CUDA_MERGE_IN_KERNEL=0 or a test turns it off.
void set_decode_merge_in_kernel(bool enabled);
bool decode_merge_in_kernel();
// Whether a step whose decode rows all have one part (narrow steps to 256 keys, wide steps to 512)
// over 16-bit K/V (quantized formats keep their merge) has the tensor-core decode kernels write
// the outputs themselves — the merge kernel's bits, without its partials and launch. Off unless
// the environment sets RINGLM_CUDA_DECODE_DIRECT=1 or a test turns it on (thirty-first session;
// not yet run on a GPU: wip/README.md). decode_direct_count(): the steps that took it.
void set_decode_direct(bool enabled);
bool decode_direct();
int64_t decode_direct_count();
// Whether rows with several queries (prefill chunks) over quantized K/V (affine, TurboQuant; K/V
// decoded to bf16 tiles shared by a tile's queries and heads) and at head_dim 256 run on the
// tensor-core prefill kernel, as 16-bit K/V at head_dims 64/128 always do, instead of the
// CUDA-core kernel (f32, every key read once per query head). On unless the environment sets
// RINGLM_CUDA_PREFILL_TC_EXTENDED=0 or a test turns it off.
void set_prefill_tc_extended(bool enabled);
bool prefill_tc_extended();

// head_dim <= kMaxHeadDim.
constexpr int kMaxHeadDim = 256;
// `rows` holds host tables (already validated by ops::attention); they are copied to the device
// on each call. Prefer the overload below, with the tables uploaded once per step.
void attention(const Tensor& q,  // F32[T, q_heads, head_dim] contiguous
               const ops::KvLayerView& kv, const ops::AttentionRows& rows,
               const ops::AttentionParams& params,
               Tensor& out);  // F32[T, q_heads, head_dim] contiguous (may alias q)
// Same, reading the tables from `device_rows` (an upload of the same `rows`); only the queries
// at positions in [query_pos_begin, query_pos_end) (rows.query_pos_begin / end) are computed,
// the other rows of `out` are left as they are.
void attention(const Tensor& q,  // F32[T, q_heads, head_dim] contiguous
               const ops::KvLayerView& kv, const DeviceRows& device_rows,
               const ops::AttentionParams& params,
               Tensor& out,  // F32[T, q_heads, head_dim] contiguous (may alias q)
               int32_t query_pos_begin = 0, int32_t query_pos_end = INT32_MAX);

void kv_write(const Tensor& k,      // F32[T, kv_heads, head_dim]
              const Tensor& v,      // F32[T, kv_heads, head_dim]
              const Tensor& slots,  // I32[T] (device-checked against the cache's capacity)
              ops::KvLayerView& kv);

// ops::prepare_attention (attention_inputs.cu); arguments checked by the op.
void prepare_attention(ops::AttentionInputs& in, const ops::QkTransform& transform,
                       ops::KvLayerView* kv);  // null exactly when in.k is empty
// ops::matmul_many(x, qkv) then ops::prepare_attention with the projections' joined GEMM
// (matmul_joined) read by prepare_attention's kernel: it takes q, k and v from the GEMM's rows and
// writes q and k rotated, and v, into in.q / in.k / in.v — no kernel that splits the columns. Bit
// for bit the two ops (a negative position leaves that token's q/k/v unwritten instead of
// unrotated: the step fails either way). Applies (matmul_prepare_attention_applies) for
// [q, k, v] targets whose y are in.q / in.k / in.v where matmul_joined applies, the kernel takes
// the shapes and the cache is not TurboQuant, unless RINGLM_CUDA_PREPARE_JOINED=0 or
// set_prepare_joined(false). The caller ran the ops' checks.
bool matmul_prepare_attention_applies(const Tensor& x,  // F32[M, K]
                                      std::span<const GemvTarget> qkv,
                                      const ops::AttentionInputs& in, const ops::KvLayerView& kv);
void matmul_prepare_attention(const Tensor& x,  // F32[M, K], rows may be strided
                              std::span<const GemvTarget> qkv, ops::AttentionInputs& in,
                              const ops::QkTransform& transform, ops::KvLayerView* kv);
bool prepare_joined();
void set_prepare_joined(bool enabled);

// True when a CUDA device and driver are present (false on build machines without a GPU).
bool device_available();
// Waits for the calling thread's backend stream; throws ringlm::Error for a failed launch or a
// value a kernel rejected since the last call (and clears that record).
void synchronize();

}  // namespace ringlm::cuda
