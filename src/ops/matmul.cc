// matmul: checks, then the backend of the tensors' device.
#include "backends/cpu/cpu_ops.h"
#ifdef RINGLM_HAS_CUDA
#include "backends/cuda/cuda_ops.h"
#endif
#include "ops/check.h"
#include "ops/ops.h"

namespace ringlm::ops {

namespace detail {

Device check_matmul(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) {
  const Device dev = device_of("matmul", {&x, &w, &bias, &y});
  // x F32, or on CUDA already rounded to the weights' 16-bit dtype (matmul_input_dtype).
  const bool rounded_input = dev == Device::CUDA && x.dtype != DType::F32 &&
                             (w.dtype == DType::BF16 || w.dtype == DType::F16);
  check_dtype(x, rounded_input ? w.dtype : DType::F32, "matmul x");
  check_shape(x, {-1, -1}, "matmul x");
  check_float_storage(w, "matmul w");
  check_shape(w, {-1, x.shape[1]}, "matmul w");
  check_contiguous(w, "matmul w");
  const int64_t n = w.shape[0];
  if (!bias.empty()) {
    check_float_storage(bias, "matmul bias");
    check_shape(bias, {n}, "matmul bias");
    check_contiguous(bias, "matmul bias");
  }
  check_dtype(y, DType::F32, "matmul y");
  check_shape(y, {x.shape[0], n}, "matmul y");
  check_rows(x, "matmul x");
  check_rows(y, "matmul y");
  check_no_overlap(y, x, "matmul y");
  check_no_overlap(y, w, "matmul y");
  return dev;
}

}  // namespace detail

void matmul(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  [[maybe_unused]] const Device dev = detail::check_matmul(x, w, bias, y);
#ifdef RINGLM_HAS_CUDA
  if (dev == Device::CUDA) return cuda::matmul(x, w, bias, y);
#endif
  cpu::matmul(x, w, bias, y);
}

}  // namespace ringlm::ops
