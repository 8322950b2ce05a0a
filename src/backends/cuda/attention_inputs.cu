// prepare_attention on the GPU (ops.h): per-head RMS norm of q and k, rope, and the K/V write to
// a 16/32-bit cache in one kernel — bit for bit rms_norm (norm.cu), rope (rope.cu) and kv_write
// (kv_write.cu), through the arithmetic they share (device/rope_norm.cuh). One warp per (token,
// head): a decode step's 40 heads are 40 warps on 10 SMs, not a loop on one. TurboQuant caches get
// their quantizing write here too (device/turbo_encode.cuh, the bytes of kv_write): at one row of
// 32k context the separate write kernel was 4 % of a decode step. Affine caches get the norm and
// rope here and their quantizing write after (kv_write_quantized.cu).
#include <atomic>
#include <cstdint>
#include <span>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/pdl.cuh"
#include "backends/cuda/device/rope_norm.cuh"
#include "backends/cuda/device/turbo_encode.cuh"
#include "backends/cuda/quantized_kv.h"

namespace ringlm::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kMaxStagedDim = 512;

struct PrepareArgs {
  float* q;        // [T, heads, dim]
  float* k;        // [T, kv_heads, dim] or null: no K/V
  const float* v;  // [T, kv_heads, dim]
  const int32_t* positions;
  const int32_t* slots;
  void* k_cache;  // [capacity, kv_heads, dim] of cache_dtype, or null: no cache write here
  void* v_cache;
  DType cache_dtype;
  int64_t capacity;                 // slots in the cache
  device::AnyFloat q_norm, k_norm;  // p null: no norm
  float eps;
  bool unit_offset;
  int heads, kv_heads, dim, half;
  // The joined q/k/v GEMM's output (matmul_joined: row t at src + t·src_ld; q, k, v at columns
  // 0, heads·dim, (heads + kv_heads)·dim), read instead of q, k and v; v is copied to v_out. Null:
  // q, k and v are read where they are written.
  const float* src;
  int64_t src_ld;
  float* v_out;  // [T, kv_heads, dim], with src
  float scaling;
  float inv_freq[kMaxRopeHalf];  // in the kernel's parameters (graph-capturable)
};

// Block (t, y): token t, heads y·kWarps ... (q heads first, then k heads); warp w takes one.
// kTurboSlots > 0: the K/V rows go to the TurboQuant planes `turbo` (head_dim 32·kTurboSlots,
// widths as device::turbo_encode_row's), not to a 16/32-bit cache.
template <int kTurboSlots, int kKeyBits, int kValueBits>
__global__ void __launch_bounds__(kWarps * 32)
    prepare_attention_kernel(const PrepareArgs a, const device::TurboPlanes turbo,
                             DeviceErrorRecord* errors) {
  constexpr bool kTurbo = kTurboSlots > 0;
  __shared__ float cs[kMaxRopeHalf], sn[kMaxRopeHalf];
  __shared__ float staged[kWarps][kMaxStagedDim];
  __shared__ float bounds[kTurbo ? device::kMaxTurboBounds : 1];
  if constexpr (kTurbo) device::load_turbo_bounds<kValueBits>(turbo, bounds);  // a constant table
  device::wait_prior_grid();
  device::launch_dependents();
  const int64_t t = blockIdx.x;
  const int32_t p = a.positions[t];
  if (p < 0) {  // as rope: the token is left as it is and reported
    if (blockIdx.y == 0 && threadIdx.x == 0)
      device::report_error(errors, DeviceErrorCode::RopePosition, t, p, 0);
    return;
  }
  const auto pos = static_cast<float>(p);
  for (int i = static_cast<int>(threadIdx.x); i < a.half; i += kWarps * 32)
    device::rope_cos_sin(pos, a.inv_freq[i], a.scaling, cs[i], sn[i]);
  __syncthreads();
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int h = static_cast<int>(blockIdx.y) * kWarps + warp;
  const bool is_q = h < a.heads;
  if (!is_q && (a.k == nullptr || h >= a.heads + a.kv_heads)) return;
  const int kv_head = h - a.heads;
  const int64_t row_at = is_q ? (t * a.heads + h) * a.dim : (t * a.kv_heads + kv_head) * a.dim;
  float* x = (is_q ? a.q : a.k) + row_at;
  const float* src_row = a.src + t * a.src_ld;  // with a joined source
  const float* x_in = a.src == nullptr ? x : src_row + int64_t{h} * a.dim;
  const device::AnyFloat& norm = is_q ? a.q_norm : a.k_norm;
  float* row = staged[warp];
  // As rms_norm_vec_kernel with one warp: lane l holds float4s l, l + 32, ...
  const int n4 = a.dim / 4;
  float sumsq = 0.0f;
  for (int idx = lane; idx < n4; idx += 32) {
    const float4 v4 = reinterpret_cast<const float4*>(x_in)[idx];
    sumsq += device::square_sum(v4);
    reinterpret_cast<float4*>(row)[idx] = v4;
  }
  __syncwarp();
  if (norm.p != nullptr) {
    const float r = device::rms_scale(device::warp_sum(sumsq), static_cast<float>(a.dim), a.eps);
    for (int i = lane; i < a.dim; i += 32)
      row[i] = device::rms_apply(row[i], r, norm[i], a.unit_offset);
    __syncwarp();
  }
  const float* v = a.src == nullptr ? (is_q ? nullptr : a.v + row_at)
                                    : src_row + int64_t{h + a.kv_heads} * a.dim;
  if (a.src != nullptr && !is_q) {
    for (int i = lane; i < a.dim; i += 32) a.v_out[row_at + i] = v[i];
  }
  int64_t slot = -1;
  if (!is_q && (kTurbo || a.k_cache != nullptr)) {
    slot = a.slots[t];
    if (slot < 0 || slot >= a.capacity) {
      if (kv_head == 0 && lane == 0)
        device::report_error(errors, DeviceErrorCode::KvSlot, t, slot, a.capacity);
      slot = -1;
    }
  }
  const bool dense_write = !kTurbo && slot >= 0;
  const int64_t cache_at = (slot * a.kv_heads + kv_head) * a.dim;
  for (int i = lane; i < a.half; i += 32) {
    float x1 = row[i], x2 = row[i + a.half];
    device::rope_rotate(x1, x2, cs[i], sn[i]);
    x[i] = x1;
    x[i + a.half] = x2;
    if (dense_write) {
      device::store_float(a.k_cache, a.cache_dtype, cache_at + i, x1);
      device::store_float(a.k_cache, a.cache_dtype, cache_at + i + a.half, x2);
    }
  }
  for (int i = 2 * a.half + lane; i < a.dim; i += 32) {  // past rotary_dim (partial rotary)
    x[i] = row[i];
    if (dense_write) device::store_float(a.k_cache, a.cache_dtype, cache_at + i, row[i]);
  }
  if (slot < 0) return;
  if constexpr (kTurbo) {
    __syncwarp();  // the warp's lanes stored the roped row's dims in x
    float k[kTurboSlots];
#pragma unroll
    for (int g = 0; g < kTurboSlots; ++g) k[g] = x[32 * g + lane];
    device::turbo_encode_row<kTurboSlots, kKeyBits, kValueBits>(k, v, slot * a.kv_heads + kv_head,
                                                                turbo, bounds);
  } else {
    for (int i = lane; i < a.dim; i += 32)
      device::store_float(a.v_cache, a.cache_dtype, cache_at + i, v[i]);
  }
}

device::AnyFloat any_float(const Tensor* t) {
  if (t == nullptr || t->empty()) return {nullptr, DType::F32};
  return {t->data, t->dtype};
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// Whether prepare_attention_kernel takes these shapes (else the ops it stands for run).
bool kernel_takes(const ops::AttentionInputs& in) {
  const int64_t dim = in.q.shape[2];
  return dim % 4 == 0 && dim <= kMaxStagedDim && aligned16(in.q.data) &&
         (in.k.empty() || aligned16(in.k.data));
}

std::atomic<bool>& prepare_joined_flag() {
  static std::atomic<bool> enabled{env_switch_on("RINGLM_CUDA_PREPARE_JOINED")};
  return enabled;
}

// joined: matmul_joined's output holding q, k and v (kernel_takes(in) holds), or null.
void prepare(ops::AttentionInputs& in, const ops::QkTransform& transform, ops::KvLayerView* kv,
             const Tensor* joined) {
  const int64_t T = in.q.shape[0];
  if (T == 0) return;
  const ops::RopeTable& table = *transform.rope;
  const bool writes_kv = !in.k.empty();
  const bool dense_cache = writes_kv && kv->dense();
  const bool turbo_cache = writes_kv && kv->turbo();
  PrepareArgs a{};
  a.heads = static_cast<int>(in.q.shape[1]);
  a.kv_heads = writes_kv ? static_cast<int>(in.k.shape[1]) : 0;
  a.dim = static_cast<int>(in.q.shape[2]);
  a.half = table.rotary_dim / 2;
  RINGLM_CHECK(a.half <= kMaxRopeHalf, "rope: rotary_dim ", table.rotary_dim,
               " is above the CUDA backend's limit of ", 2 * kMaxRopeHalf);
  RINGLM_CHECK(T <= INT32_MAX, "prepare_attention: too many tokens: ", T);
  if (!kernel_takes(in)) {
    // Shapes the kernel does not take: the ops it stands for, one by one.
    auto norm_heads = [&](Tensor& x, const Tensor* w) {
      if (w == nullptr || w->empty()) return;
      Tensor rows = x.reshape({x.shape[0] * x.shape[1], x.shape[2]});
      cuda::rms_norm(rows, *w, transform.norm, rows);
    };
    norm_heads(in.q, transform.q_norm);
    cuda::rope(in.q, in.positions, table);
    if (!writes_kv) return;
    norm_heads(in.k, transform.k_norm);
    cuda::rope(in.k, in.positions, table);
    return cuda::kv_write(in.k, in.v, in.slots, *kv);
  }
  a.q = in.q.ptr<float>();
  a.k = writes_kv ? in.k.ptr<float>() : nullptr;
  a.v = writes_kv ? in.v.ptr<const float>() : nullptr;
  if (joined != nullptr) {
    a.src = joined->ptr<const float>();
    a.src_ld = joined->shape[1];  // matmul_joined: contiguous rows
    a.v_out = writes_kv ? in.v.ptr<float>() : nullptr;
  }
  a.positions = in.positions.ptr<const int32_t>();
  a.slots = writes_kv ? in.slots.ptr<const int32_t>() : nullptr;
  if (dense_cache) {
    a.k_cache = kv->k.data;
    a.v_cache = kv->v.data;
    a.cache_dtype = kv->k.dtype;
    a.capacity = kv->k.shape[0] * kv->k.shape[1];
  }
  a.q_norm = any_float(transform.q_norm);
  a.k_norm = any_float(transform.k_norm);
  a.eps = transform.norm.eps;
  a.unit_offset = transform.norm.unit_offset;
  a.scaling = table.attention_scaling;
  for (int i = 0; i < a.half; ++i) a.inv_freq[i] = table.inv_freq[static_cast<size_t>(i)];
  Context& ctx = Context::get();
  const auto head_blocks = static_cast<unsigned>((a.heads + a.kv_heads + kWarps - 1) / kWarps);
  const dim3 grid(static_cast<unsigned>(T), head_blocks);
  if (turbo_cache) {
    a.capacity = kv->k.shape[0] * kv->k.shape[1];
    const device::TurboPlanes turbo = device::turbo_planes(*kv);
    device::with_turbo_write(*kv, [&]<int kSlots, int kKeyBits, int kValueBits>() {
      launch_pdl(prepare_attention_kernel<kSlots, kKeyBits, kValueBits>, grid, dim3(kWarps * 32), 0,
                 ctx.stream(), a, turbo, ctx.errors());
    });
    check_launch("prepare_attention_kernel");
    return;
  }
  launch_pdl(prepare_attention_kernel<0, 0, 0>, grid, dim3(kWarps * 32), 0, ctx.stream(), a,
             device::TurboPlanes{}, ctx.errors());
  check_launch("prepare_attention_kernel");
  if (writes_kv && !dense_cache) kv_write_quantized(in.k, in.v, in.slots, *kv);
}

}  // namespace

void prepare_attention(ops::AttentionInputs& in, const ops::QkTransform& transform,
                       ops::KvLayerView* kv) {
  prepare(in, transform, kv, nullptr);
}

bool prepare_joined() {
  return prepare_joined_flag().load(std::memory_order_relaxed);
}

void set_prepare_joined(bool enabled) {
  prepare_joined_flag().store(enabled, std::memory_order_relaxed);
}

bool matmul_prepare_attention_applies(const Tensor& x, std::span<const GemvTarget> qkv,
                                      const ops::AttentionInputs& in, const ops::KvLayerView& kv) {
  // Not for TurboQuant caches: their prepare kernel (the Lloyd-Max bounds staged before its wait)
  // right after the cuBLAS GEMM lost 1.0-2.1 % at 8-16 rows of k8v3 against split + prepare
  // (H100, docs/benchmarks.md, eighteenth session).
  if (!prepare_joined() || kv.turbo() || qkv.size() != 3 || in.k.empty() || in.q.shape[0] == 0 ||
      !kernel_takes(in) || !matmul_joined_applies(x, qkv))
    return false;
  int64_t columns = 0;
  for (const GemvTarget& t : qkv) columns += t.w->shape[0];
  // The kernel's 16-byte loads of the joined rows: their stride and the q/k/v columns (multiples
  // of head_dim, itself a multiple of 4) stay 16-byte aligned.
  return columns % 4 == 0 && qkv[0].y->data == in.q.data && qkv[1].y->data == in.k.data &&
         qkv[2].y->data == in.v.data;
}

void matmul_prepare_attention(const Tensor& x, std::span<const GemvTarget> qkv,
                              ops::AttentionInputs& in, const ops::QkTransform& transform,
                              ops::KvLayerView* kv) {
  RINGLM_CHECK(kv != nullptr && matmul_prepare_attention_applies(x, qkv, in, *kv),
               "matmul_prepare_attention: the joined q/k/v path does not apply");
  const Tensor joined = matmul_joined(x, qkv);
  prepare(in, transform, kv, &joined);
}

}  // namespace ringlm::cuda
