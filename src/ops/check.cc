#include "ops/check.h"

#include <cstdint>

namespace ringlm::ops::detail {

Device device_of(const char* op, std::initializer_list<const Tensor*> tensors) {
  bool cpu = false, cuda = false;
  for (const Tensor* t : tensors) {
    if (t->empty()) continue;
    (t->device == Device::CPU ? cpu : cuda) = true;
  }
#ifndef RINGLM_HAS_CUDA
  if (cuda) RINGLM_FAIL(op, ": CUDA backend not built (an argument is a CUDA tensor)");
#endif
  RINGLM_CHECK(!(cpu && cuda), op, ": arguments on different devices (some CPU, some CUDA)");
  return cuda ? Device::CUDA : Device::CPU;
}

void check_float_storage(const Tensor& t, const char* what) {
  RINGLM_CHECK(t.dtype == DType::F32 || t.dtype == DType::BF16 || t.dtype == DType::F16, what,
               ": dtype ", dtype_name(t.dtype), ", expected F32, BF16 or F16");
}

void check_rows(const Tensor& t, const char* what) {
  const int last = t.ndim - 1;
  bool ok = t.ndim >= 1 && t.strides[static_cast<size_t>(last)] == 1;
  int64_t inner = t.ndim >= 1 ? t.shape[static_cast<size_t>(last)] : 0;
  for (int d = last - 1; ok && d >= 0; --d) {
    const auto i = static_cast<size_t>(d);
    // The outermost dim may have any stride >= the size of what it steps over.
    if (d == 0) {
      ok = t.shape[0] <= 1 || t.strides[0] >= inner;
    } else {
      ok = t.shape[i] <= 1 || t.strides[i] == inner;
      inner *= t.shape[i];
    }
  }
  RINGLM_CHECK(ok, what, ": ", t.describe(), " must have contiguous rows");
}

void check_contiguous(const Tensor& t, const char* what) {
  RINGLM_CHECK(t.is_contiguous(), what, ": ", t.describe(), " must be contiguous");
}

namespace {
// [first byte, one past the last byte] touched by a row-major view.
std::pair<uintptr_t, uintptr_t> byte_range(const Tensor& t) {
  const auto begin = reinterpret_cast<uintptr_t>(t.data);
  int64_t last = 0;
  for (int d = 0; d < t.ndim; ++d) {
    const auto i = static_cast<size_t>(d);
    if (t.shape[i] == 0) return {begin, begin};
    last += (t.shape[i] - 1) * t.strides[i];
  }
  return {begin, begin + static_cast<uintptr_t>(last + 1) * dtype_size(t.dtype)};
}
}  // namespace

void check_no_overlap(const Tensor& a, const Tensor& b, const char* what) {
  const auto ra = byte_range(a), rb = byte_range(b);
  const bool overlap = ra.first < rb.second && rb.first < ra.second;
  RINGLM_CHECK(!overlap, what, ": output must not overlap the input");
}

void check_same_or_disjoint(const Tensor& a, const Tensor& b, const char* what) {
  if (a.data == b.data && a.strides == b.strides && a.shape == b.shape) return;
  check_no_overlap(a, b, what);
}

}  // namespace ringlm::ops::detail
