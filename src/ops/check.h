// Argument checks shared by the op dispatchers (ops/*.cc). Each throws ringlm::Error naming the
// op and the argument.
#pragma once

#include <initializer_list>

#include "core/tensor.h"

namespace ringlm::ops {
struct RopeTable;
struct KvLayerView;
struct RmsNormConfig;
struct AttentionInputs;
struct QkTransform;
}  // namespace ringlm::ops

namespace ringlm::ops::detail {

// The device of the (non-empty) tensors, which must all share it; a CUDA tensor gets a clear error
// when the CUDA backend is not built (RINGLM_HAS_CUDA).
Device device_of(const char* op, std::initializer_list<const Tensor*> tensors);
// dtype is F32, BF16 or F16 (weights keep their checkpoint dtype).
void check_float_storage(const Tensor& t, const char* what);
// Row-major with contiguous rows; rows may be further apart than their length (row views).
void check_rows(const Tensor& t, const char* what);
void check_contiguous(const Tensor& t, const char* what);
// The byte ranges of a and b do not overlap (for outputs that must not alias an input).
void check_no_overlap(const Tensor& a, const Tensor& b, const char* what);
// matmul's argument checks (ops/matmul.cc); returns the tensors' device.
Device check_matmul(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y);
// rms_norm's checks of its input (ops/elementwise.cc): x F32[M, K] with rows, weight [K]
// contiguous floats, eps finite and >= 0; `op` names the op in the errors.
void check_rms_norm_input(const Tensor& x, const Tensor& weight, const RmsNormConfig& config,
                          const char* op);
// rope's argument checks (ops/rope.cc), for x F32[T, heads, head_dim].
void check_rope(const Tensor& x, const Tensor& positions, const RopeTable& table);
// kv_write's argument checks but the CPU slot range (ops/attention.cc).
void check_kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, const KvLayerView& kv);
// prepare_attention's checks (ops/attention_inputs.cc); returns the tensors' device. On the CPU
// only what every backend needs (the ops it runs check the rest).
Device check_prepare_attention(const AttentionInputs& in, const QkTransform& transform,
                               const KvLayerView* kv);
// a and b are the same view (in-place use), or do not overlap.
void check_same_or_disjoint(const Tensor& a, const Tensor& b, const char* what);

}  // namespace ringlm::ops::detail
