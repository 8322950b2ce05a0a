// Dispatch for prepare_attention (ops.h): the CPU runs the composition it is defined as
// (rms_norm, rope, kv_write); CUDA runs it as one kernel (backends/cuda/attention_inputs.cu).
#include <cmath>
#include <cstdint>

#ifdef RINGLM_HAS_CUDA
#include "backends/cuda/cuda_ops.h"
#endif
#include "ops/check.h"
#include "ops/ops.h"

namespace ringlm::ops {

namespace {

bool has(const Tensor* t) {
  return t != nullptr && !t->empty();
}

// The per-head RMS norm of x (F32[T, heads, head_dim]) in place.
void norm_heads(Tensor& x, const Tensor& weight, const RmsNormConfig& config) {
  Tensor rows = x.reshape({x.shape[0] * x.shape[1], x.shape[2]});
  rms_norm(rows, weight, config, rows);
}

void check_norm(const Tensor* weight, int64_t head_dim, const char* what) {
  if (!has(weight)) return;
  detail::check_float_storage(*weight, what);
  check_shape(*weight, {head_dim}, what);
  detail::check_contiguous(*weight, what);
}

}  // namespace

namespace detail {

Device check_prepare_attention(const AttentionInputs& in, const QkTransform& transform,
                               const KvLayerView* kv) {
  RINGLM_CHECK(transform.rope != nullptr, "prepare_attention: no rope table");
  const bool writes_kv = !in.k.empty();
  RINGLM_CHECK(writes_kv == (kv != nullptr) && in.k.empty() == in.v.empty(),
               "prepare_attention: k, v and the KV view go together");
  const Tensor none;
  const Device dev =
      detail::device_of("prepare_attention", {&in.q, &in.k, &in.v, &in.positions, &in.slots,
                                              has(transform.q_norm) ? transform.q_norm : &none,
                                              has(transform.k_norm) ? transform.k_norm : &none});
  if (dev != Device::CUDA) return dev;  // the CPU's ops check their own arguments
  detail::check_rope(in.q, in.positions, *transform.rope);
  const int64_t head_dim = in.q.shape[2];
  check_norm(transform.q_norm, head_dim, "prepare_attention q_norm");
  if (writes_kv) {
    detail::device_of("prepare_attention", {&in.q, &kv->k, &kv->v, &kv->k_scales, &kv->k_biases,
                                            &kv->v_scales, &kv->v_biases});
    detail::check_rope(in.k, in.positions, *transform.rope);
    detail::check_kv_write(in.k, in.v, in.slots, *kv);
    RINGLM_CHECK(in.k.shape[2] == head_dim, "prepare_attention: q head_dim ", head_dim,
                 " and k head_dim ", in.k.shape[2], " differ");
    check_norm(transform.k_norm, head_dim, "prepare_attention k_norm");
  }
  RINGLM_CHECK(transform.norm.eps >= 0.0f && std::isfinite(transform.norm.eps),
               "prepare_attention: eps ", transform.norm.eps, " must be finite and >= 0");
  return dev;
}

}  // namespace detail

void prepare_attention(AttentionInputs& in, const QkTransform& transform, KvLayerView* kv) {
  [[maybe_unused]] const Device dev = detail::check_prepare_attention(in, transform, kv);
#ifdef RINGLM_HAS_CUDA
  if (dev == Device::CUDA) return cuda::prepare_attention(in, transform, kv);
#endif
  const bool writes_kv = !in.k.empty();
  if (has(transform.q_norm)) norm_heads(in.q, *transform.q_norm, transform.norm);
  rope(in.q, in.positions, *transform.rope);
  if (!writes_kv) return;
  if (has(transform.k_norm)) norm_heads(in.k, *transform.k_norm, transform.norm);
  rope(in.k, in.positions, *transform.rope);
  kv_write(in.k, in.v, in.slots, *kv);
}

}  // namespace ringlm::ops
