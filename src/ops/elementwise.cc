// Dispatch for the row-wise ops: embedding, rms_norm, add_inplace, gated_activation, softmax,
// argmax, softcap. Checks, then the backend of the tensors' device.
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "backends/cpu/cpu_ops.h"
#ifdef RINGLM_HAS_CUDA
#include "backends/cuda/cuda_ops.h"
#endif
#include "ops/check.h"
#include "ops/ops.h"

namespace ringlm::ops {

namespace {
// F32[M, N] with contiguous rows.
void check_f32_matrix(const Tensor& t, const char* what) {
  check_dtype(t, DType::F32, what);
  check_shape(t, {-1, -1}, what);
  detail::check_rows(t, what);
}

// An output that feeds a matmul: F32, or on CUDA BF16/F16 (the f32 value rounded once, as the
// matmul would round it: matmul_input_dtype), then disjoint from the inputs.
void check_matmul_feed(const Tensor& out, Device dev, std::initializer_list<const Tensor*> inputs,
                       const char* what) {
  if (out.dtype == DType::F32 || dev != Device::CUDA) return check_f32_matrix(out, what);
  RINGLM_CHECK(out.dtype == DType::BF16 || out.dtype == DType::F16, what, " ", out.describe(),
               " must be F32, BF16 or F16");
  check_shape(out, {-1, -1}, what);
  detail::check_rows(out, what);
  for (const Tensor* t : inputs) detail::check_no_overlap(out, *t, what);
}
}  // namespace

namespace detail {

void check_rms_norm_input(const Tensor& x, const Tensor& weight, const RmsNormConfig& config,
                          const char* op) {
  const std::string name(op);
  check_f32_matrix(x, (name + " x").c_str());
  check_float_storage(weight, (name + " weight").c_str());
  check_shape(weight, {x.shape[1]}, (name + " weight").c_str());
  check_contiguous(weight, (name + " weight").c_str());
  RINGLM_CHECK(config.eps >= 0.0f && std::isfinite(config.eps), op, ": eps ", config.eps,
               " must be finite and >= 0");
  RINGLM_CHECK(x.shape[1] > 0 || x.shape[0] == 0, op, ": empty rows");
}

}  // namespace detail

void embedding(const Tensor& ids, const Tensor& table, float scale, Tensor& out) {
  [[maybe_unused]] const Device dev = detail::device_of("embedding", {&ids, &table, &out});
  check_dtype(ids, DType::I32, "embedding ids");
  check_shape(ids, {-1}, "embedding ids");
  detail::check_contiguous(ids, "embedding ids");
  detail::check_float_storage(table, "embedding table");
  check_shape(table, {-1, -1}, "embedding table");
  detail::check_contiguous(table, "embedding table");
  check_f32_matrix(out, "embedding out");
  check_shape(out, {ids.shape[0], table.shape[1]}, "embedding out");
  RINGLM_CHECK(std::isfinite(scale), "embedding: scale ", scale, " is not finite");
  const int64_t vocab = table.shape[0];
  // CUDA ids live on the device: the kernel checks them (reported by cuda::synchronize()).
  for (int64_t m = 0; dev == Device::CPU && m < ids.shape[0]; ++m) {
    const int32_t id = ids.ptr<const int32_t>()[m];
    RINGLM_CHECK(id >= 0 && id < vocab, "embedding: token id ", id, " at index ", m,
                 " is outside the vocabulary [0, ", vocab, ")");
  }
#ifdef RINGLM_HAS_CUDA
  if (dev == Device::CUDA) return cuda::embedding(ids, table, scale, out);
#endif
  cpu::embedding(ids, table, scale, out);
}

void rms_norm(const Tensor& x, const Tensor& weight, const RmsNormConfig& config, Tensor& out) {
  [[maybe_unused]] const Device dev = detail::device_of("rms_norm", {&x, &weight, &out});
  detail::check_rms_norm_input(x, weight, config, "rms_norm");
  check_matmul_feed(out, dev, {&x}, "rms_norm out");
  check_shape(out, {x.shape[0], x.shape[1]}, "rms_norm out");
  detail::check_same_or_disjoint(out, x, "rms_norm out");
#ifdef RINGLM_HAS_CUDA
  if (dev == Device::CUDA) return cuda::rms_norm(x, weight, config, out);
#endif
  cpu::rms_norm(x, weight, config, out);
}

void add_rms_norm(Tensor& x, const Tensor& residual, const Tensor& weight,
                  const RmsNormConfig& config, Tensor& out) {
  [[maybe_unused]] const Device dev =
      detail::device_of("add_rms_norm", {&x, &residual, &weight, &out});
  check_f32_matrix(x, "add_rms_norm x");
  check_f32_matrix(residual, "add_rms_norm residual");
  check_shape(residual, {x.shape[0], x.shape[1]}, "add_rms_norm residual");
  detail::check_same_or_disjoint(residual, x, "add_rms_norm residual");
  // rms_norm's checks, before anything is written.
  detail::check_rms_norm_input(x, weight, config, "add_rms_norm");
  check_matmul_feed(out, dev, {&x, &residual}, "add_rms_norm out");
  check_shape(out, {x.shape[0], x.shape[1]}, "add_rms_norm out");
  detail::check_same_or_disjoint(out, x, "add_rms_norm out");
  detail::check_same_or_disjoint(out, residual, "add_rms_norm out");
#ifdef RINGLM_HAS_CUDA
  if (dev == Device::CUDA) return cuda::add_rms_norm(x, residual, weight, config, out);
#endif
  cpu::add_rms_norm(x, residual, weight, config, out);
}

void add_inplace(Tensor& x, const Tensor& y) {
  [[maybe_unused]] const Device dev = detail::device_of("add_inplace", {&x, &y});
  check_f32_matrix(x, "add_inplace x");
  check_f32_matrix(y, "add_inplace y");
  check_shape(y, {x.shape[0], x.shape[1]}, "add_inplace y");
  detail::check_same_or_disjoint(x, y, "add_inplace x");
#ifdef RINGLM_HAS_CUDA
  if (dev == Device::CUDA) return cuda::add_inplace(x, y);
#endif
  cpu::add_inplace(x, y);
}

void gated_activation(const Tensor& gate, const Tensor& up, Activation activation, Tensor& out) {
  [[maybe_unused]] const Device dev = detail::device_of("gated_activation", {&gate, &up, &out});
  check_f32_matrix(gate, "gated_activation gate");
  check_f32_matrix(up, "gated_activation up");
  check_shape(up, {gate.shape[0], gate.shape[1]}, "gated_activation up");
  check_matmul_feed(out, dev, {&gate, &up}, "gated_activation out");
  check_shape(out, {gate.shape[0], gate.shape[1]}, "gated_activation out");
  RINGLM_CHECK(activation == Activation::SiLU || activation == Activation::GeluTanh,
               "gated_activation: unknown activation ", static_cast<int>(activation));
  detail::check_same_or_disjoint(out, gate, "gated_activation out");
  detail::check_same_or_disjoint(out, up, "gated_activation out");
#ifdef RINGLM_HAS_CUDA
  if (dev == Device::CUDA) return cuda::gated_activation(gate, up, activation, out);
#endif
  cpu::gated_activation(gate, up, activation, out);
}

void softmax(Tensor& x) {
  [[maybe_unused]] const Device dev = detail::device_of("softmax", {&x});
  check_f32_matrix(x, "softmax x");
#ifdef RINGLM_HAS_CUDA
  if (dev == Device::CUDA) return cuda::softmax(x);
#endif
  cpu::softmax(x);
}

void argmax(const Tensor& x, Tensor& out) {
  [[maybe_unused]] const Device dev = detail::device_of("argmax", {&x, &out});
  check_f32_matrix(x, "argmax x");
  RINGLM_CHECK(x.shape[1] > 0 || x.shape[0] == 0, "argmax: rows of x are empty: ", x.describe());
  check_dtype(out, DType::I32, "argmax out");
  check_shape(out, {x.shape[0]}, "argmax out");
  detail::check_contiguous(out, "argmax out");
#ifdef RINGLM_HAS_CUDA
  if (dev == Device::CUDA) return cuda::argmax(x, out);
#endif
  cpu::argmax(x, out);
}

void softcap(Tensor& x, float cap) {
  [[maybe_unused]] const Device dev = detail::device_of("softcap", {&x});
  check_f32_matrix(x, "softcap x");
  RINGLM_CHECK(cap > 0.0f && std::isfinite(cap), "softcap: cap ", cap, " must be finite and > 0");
#ifdef RINGLM_HAS_CUDA
  if (dev == Device::CUDA) return cuda::softcap(x, cap);
#endif
  cpu::softcap(x, cap);
}

}  // namespace ringlm::ops
