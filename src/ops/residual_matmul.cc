// The residual-stream matmuls (ops/residual_matmul.h): the CUDA GEMV's fused forms where they
// apply, else the ops they stand for.
#include "ops/residual_matmul.h"

#include <vector>

#ifdef RINGLM_HAS_CUDA
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/gemv.h"
#endif
#include "ops/check.h"

namespace ringlm::ops {

namespace {

#ifdef RINGLM_HAS_CUDA
cuda::GemvNorm gemv_norm(const NormedRows& in) {
  return {in.weight, in.config.eps, in.config.unit_offset};
}

// The GEMV targets of dense weights that the fused norm serves, or empty.
std::vector<cuda::GemvTarget> fused_targets(const NormedRows& in,
                                            std::span<const MatmulTarget> targets) {
  std::vector<cuda::GemvTarget> gemv;
  if (in.x->device != Device::CUDA || targets.empty()) return gemv;
  for (const MatmulTarget& t : targets) {
    if (t.w->is_quantized()) return {};
    gemv.push_back({&t.w->dense(), t.bias, t.y});
  }
  if (!cuda::gemv_many_applies(*in.x, gemv) ||
      !cuda::gemv_norm_applies(*in.x, gemv[0].w->dtype, gemv_norm(in)))
    return {};
  return gemv;
}

#endif

}  // namespace

void matmul_many(const NormedRows& in, Tensor& normed, std::span<const MatmulTarget> targets) {
#ifdef RINGLM_HAS_CUDA
  if (const auto gemv = fused_targets(in, targets); !gemv.empty()) {
    detail::check_rms_norm_input(*in.x, *in.weight, in.config, "rms_norm");
    for (const MatmulTarget& t : targets) detail::check_matmul(*in.x, t.w->dense(), *t.bias, *t.y);
    const cuda::GemvNorm norm = gemv_norm(in);
    return cuda::gemv_many(*in.x, gemv, &norm);
  }
#endif
  rms_norm(*in.x, *in.weight, in.config, normed);
  matmul_many(normed, targets);
}

namespace {

void check_projection_outputs(std::span<const MatmulTarget> qkv, const AttentionInputs& inputs,
                              const KvLayerView* kv) {
  RINGLM_CHECK(
      qkv.size() == (kv != nullptr ? 3u : 1u) && qkv[0].y->data == inputs.q.data &&
          (kv == nullptr || (qkv[1].y->data == inputs.k.data && qkv[2].y->data == inputs.v.data)),
      "matmul_prepare_attention: inputs are not the projections' outputs");
}

}  // namespace

void matmul_prepare_attention(const Tensor& x, std::span<const MatmulTarget> qkv,
                              AttentionInputs& inputs, const QkTransform& transform,
                              KvLayerView* kv) {
  check_projection_outputs(qkv, inputs, kv);
#ifdef RINGLM_HAS_CUDA
  if (x.device == Device::CUDA && kv != nullptr) {
    std::vector<cuda::GemvTarget> gemv;
    for (const MatmulTarget& t : qkv)
      if (!t.w->is_quantized()) gemv.push_back({&t.w->dense(), t.bias, t.y});
    if (gemv.size() == qkv.size() && cuda::matmul_prepare_attention_applies(x, gemv, inputs, *kv)) {
      for (const MatmulTarget& t : qkv) detail::check_matmul(x, t.w->dense(), *t.bias, *t.y);
      detail::check_prepare_attention(inputs, transform, kv);
      return cuda::matmul_prepare_attention(x, gemv, inputs, transform, kv);
    }
  }
#endif
  matmul_many(x, qkv);
  prepare_attention(inputs, transform, kv);
}

void matmul_prepare_attention(const NormedRows& in, Tensor& normed,
                              std::span<const MatmulTarget> qkv, AttentionInputs& inputs,
                              const QkTransform& transform, KvLayerView* kv) {
  check_projection_outputs(qkv, inputs, kv);
#ifdef RINGLM_HAS_CUDA
  const auto has = [](const Tensor* t) { return t != nullptr && !t->empty(); };
  if (const auto gemv = fused_targets(in, qkv);
      !gemv.empty() && !has(transform.q_norm) && !has(transform.k_norm)) {
    const cuda::GemvNorm norm = gemv_norm(in);
    const cuda::GemvRope rope{transform.rope, &inputs.positions, &inputs.slots, kv,
                              inputs.q.size(2)};
    if (transform.rope != nullptr && cuda::gemv_rope_applies(*in.x, gemv, norm, rope)) {
      detail::check_rms_norm_input(*in.x, *in.weight, in.config, "rms_norm");
      for (const MatmulTarget& t : qkv) detail::check_matmul(*in.x, t.w->dense(), *t.bias, *t.y);
      detail::check_prepare_attention(inputs, transform, kv);
      return cuda::gemv_many(*in.x, gemv, &norm, &rope);
    }
  }
#endif
  matmul_many(in, normed, qkv);
  prepare_attention(inputs, transform, kv);
}

void gated_matmul(const NormedRows& in, Tensor& normed, const MatmulTarget& gate,
                  const MatmulTarget& up, Activation activation, Tensor& out) {
#ifdef RINGLM_HAS_CUDA
  const MatmulTarget both[] = {gate, up};
  if (const auto gemv = fused_targets(in, both);
      !gemv.empty() && cuda::gemv_gated_applies(*in.x, gemv[0], gemv[1])) {
    detail::check_rms_norm_input(*in.x, *in.weight, in.config, "rms_norm");
    for (const MatmulTarget& t : both) detail::check_matmul(*in.x, t.w->dense(), *t.bias, *t.y);
    detail::check_gated_out(*in.x, *gate.y, activation, DType::F32, out);  // the GEMV writes f32
    const cuda::GemvNorm norm = gemv_norm(in);
    return cuda::gemv_gated(*in.x, gemv[0], gemv[1], activation, out, &norm);
  }
#endif
  rms_norm(*in.x, *in.weight, in.config, normed);
  gated_matmul(normed, gate, up, activation, out);
}

void matmul_accumulate(const Tensor& x, const Weight& w, const Tensor& bias, Tensor& scratch,
                       Tensor& acc) {
#ifdef RINGLM_HAS_CUDA
  if (x.device == Device::CUDA && !w.is_quantized() && cuda::gemv_applies(x, w.dense())) {
    detail::check_matmul(x, w.dense(), bias, acc);
    return cuda::gemv_accumulate(x, w.dense(), bias, acc);
  }
#endif
  matmul(x, w, bias, scratch);
  add_inplace(acc, scratch);
}

bool residual_fusion_applies(const NormedRows& in, std::span<const Weight* const> weights) {
#ifdef RINGLM_HAS_CUDA
  if (in.x->device != Device::CUDA || weights.empty()) return false;
  for (const Weight* w : weights) {
    if (w->is_quantized() || w->dense().dtype != weights[0]->dense().dtype ||
        !cuda::gemv_applies(*in.x, w->dense()))
      return false;
  }
  return cuda::gemv_norm_applies(*in.x, weights[0]->dense().dtype, gemv_norm(in));
#else
  (void)in;
  (void)weights;
  return false;
#endif
}

}  // namespace ringlm::ops
