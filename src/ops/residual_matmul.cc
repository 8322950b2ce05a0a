// The residual-stream matmuls (ops/residual_matmul.h): the CUDA GEMV's fused forms where they
// apply, else the ops they stand for.
#include "ops/residual_matmul.h"

#include <cmath>
#include <utility>
#include <vector>

#ifdef RINGLM_HAS_CUDA
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/gemv.h"
#include "backends/cuda/quant_mma.h"
#endif
#include "ops/check.h"

namespace ringlm::ops {

namespace {

#ifdef RINGLM_HAS_CUDA
cuda::GemvNorm gemv_norm(const NormedRows& in) {
  return {in.weight, in.config.eps, in.config.unit_offset};
}

// How the backend runs matmuls of the normalized rows with the norm fused in: the decode GEMV
// (dense 16-bit weights) or the quantized tensor-core GEMM (MLX 4/8-bit weights); both empty:
// not fused.
struct FusedPlan {
  std::vector<cuda::GemvTarget> gemv;
  std::vector<cuda::QuantMma> quant;
  bool empty() const { return gemv.empty() && quant.empty(); }
};

FusedPlan fused_plan(const NormedRows& in, std::span<const MatmulTarget> targets) {
  FusedPlan plan;
  if (in.x->device != Device::CUDA || targets.empty()) return plan;
  const cuda::GemvNorm norm = gemv_norm(in);
  std::vector<cuda::GemvTarget> gemv;
  std::vector<cuda::QuantMma> quant;
  for (const MatmulTarget& t : targets) {
    if (t.w->is_quantized()) {
      quant.push_back({in.x, &t.w->quant(), t.bias, t.y});
    } else {
      gemv.push_back({&t.w->dense(), t.bias, t.y});
    }
  }
  if (gemv.size() == targets.size() && cuda::gemv_many_applies(*in.x, gemv) &&
      cuda::gemv_norm_applies(*in.x, gemv[0].w->dtype, norm)) {
    plan.gemv = std::move(gemv);
  } else if (quant.size() == targets.size() &&
             (quant.size() == 1 ? cuda::quant_mma_applies(quant[0])
                                : cuda::quant_mma_many_applies(quant)) &&
             cuda::quant_mma_norm_applies(quant[0], norm)) {
    plan.quant = std::move(quant);
  }
  return plan;
}

// rms_norm's checks of its input and weight (the fused forms never write `normed`).
void check_normed(const NormedRows& in) {
  const Tensor& x = *in.x;
  check_dtype(x, DType::F32, "normed rows x");
  check_shape(x, {-1, -1}, "normed rows x");
  detail::check_rows(x, "normed rows x");
  detail::check_float_storage(*in.weight, "normed rows weight");
  check_shape(*in.weight, {x.shape[1]}, "normed rows weight");
  detail::check_contiguous(*in.weight, "normed rows weight");
  RINGLM_CHECK(in.config.eps >= 0.0f && std::isfinite(in.config.eps), "normed rows: eps ",
               in.config.eps, " must be finite and >= 0");
}
#endif

}  // namespace

void matmul_many(const NormedRows& in, Tensor& normed, std::span<const MatmulTarget> targets) {
#ifdef RINGLM_HAS_CUDA
  if (const FusedPlan plan = fused_plan(in, targets); !plan.empty()) {
    check_normed(in);
    const cuda::GemvNorm norm = gemv_norm(in);
    if (!plan.gemv.empty()) {
      for (const MatmulTarget& t : targets)
        detail::check_matmul(*in.x, t.w->dense(), *t.bias, *t.y);
      return cuda::gemv_many(*in.x, plan.gemv, &norm);
    }
    for (const MatmulTarget& t : targets)
      detail::check_quantized_matmul(*in.x, t.w->quant(), *t.bias, *t.y);
    return cuda::quant_mma_many(plan.quant, &norm);
  }
#endif
  rms_norm(*in.x, *in.weight, in.config, normed);
  matmul_many(normed, targets);
}

void gated_matmul(const NormedRows& in, Tensor& normed, const MatmulTarget& gate,
                  const MatmulTarget& up, Activation activation, Tensor& out) {
#ifdef RINGLM_HAS_CUDA
  const MatmulTarget both[] = {gate, up};
  const FusedPlan plan = fused_plan(in, both);
  if (!plan.gemv.empty() && cuda::gemv_gated_applies(*in.x, plan.gemv[0], plan.gemv[1])) {
    check_normed(in);
    for (const MatmulTarget& t : both) detail::check_matmul(*in.x, t.w->dense(), *t.bias, *t.y);
    // gated_matmul's checks of out (the GEMV writes f32).
    check_dtype(out, DType::F32, "gated_matmul out");
    check_shape(out, {gate.y->shape[0], gate.y->shape[1]}, "gated_matmul out");
    detail::check_rows(out, "gated_matmul out");
    detail::check_no_overlap(out, *in.x, "gated_matmul out");
    RINGLM_CHECK(activation == Activation::SiLU || activation == Activation::GeluTanh,
                 "gated_matmul: unknown activation ", static_cast<int>(activation));
    const cuda::GemvNorm norm = gemv_norm(in);
    return cuda::gemv_gated(*in.x, plan.gemv[0], plan.gemv[1], activation, out, &norm);
  }
  if (!plan.quant.empty()) {  // as gated_matmul does for quantized weights: both, then act
    matmul_many(in, normed, both);
    return gated_activation(*gate.y, *up.y, activation, out);
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
  if (x.device == Device::CUDA && w.is_quantized()) {
    const cuda::QuantMma g{&x, &w.quant(), &bias, &acc};
    if (cuda::quant_mma_applies(g)) {
      detail::check_quantized_matmul(x, w.quant(), bias, acc);
      return cuda::quant_mma_accumulate(g);
    }
  }
#endif
  matmul(x, w, bias, scratch);
  add_inplace(acc, scratch);
}

bool residual_fusion_applies(const NormedRows& in, std::span<const Weight* const> weights) {
#ifdef RINGLM_HAS_CUDA
  if (in.x->device != Device::CUDA || weights.empty()) return false;
  const cuda::GemvNorm norm = gemv_norm(in);
  const Weight& first = *weights[0];
  if (!first.is_quantized()) {
    for (const Weight* w : weights) {
      if (w->is_quantized() || w->dense().dtype != first.dense().dtype ||
          !cuda::gemv_applies(*in.x, w->dense()))
        return false;
    }
    return cuda::gemv_norm_applies(*in.x, first.dense().dtype, norm);
  }
  const Tensor none;
  for (const Weight* w : weights) {
    if (!w->is_quantized() || w->quant().bits != first.quant().bits ||
        w->quant().group_size != first.quant().group_size ||
        !cuda::quant_mma_applies({in.x, &w->quant(), &none, nullptr}))
      return false;
  }
  return cuda::quant_mma_norm_applies({in.x, &first.quant(), &none, nullptr}, norm);
#else
  (void)in;
  (void)weights;
  return false;
#endif
}

}  // namespace ringlm::ops
