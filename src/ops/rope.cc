// Dispatch for rope.
#include <cmath>
#include <cstdint>

#include "backends/cpu/cpu_ops.h"
#ifdef RINGLM_HAS_CUDA
#include "backends/cuda/cuda_ops.h"
#endif
#include "ops/check.h"
#include "ops/ops.h"

namespace ringlm::ops {

namespace detail {
void check_rope(const Tensor& x, const Tensor& positions, const RopeTable& table) {
  check_dtype(x, DType::F32, "rope x");
  check_shape(x, {-1, -1, -1}, "rope x");
  detail::check_contiguous(x, "rope x");
  check_dtype(positions, DType::I32, "rope positions");
  check_shape(positions, {x.shape[0]}, "rope positions");
  detail::check_contiguous(positions, "rope positions");
  const int64_t head_dim = x.shape[2];
  RINGLM_CHECK(table.rotary_dim > 0 && table.rotary_dim % 2 == 0 && table.rotary_dim <= head_dim,
               "rope: rotary_dim ", table.rotary_dim, " must be even, > 0 and <= head_dim ",
               head_dim);
  RINGLM_CHECK(table.inv_freq.size() == static_cast<size_t>(table.rotary_dim / 2),
               "rope: inv_freq has ", table.inv_freq.size(),
               " entries, rotary_dim / 2 = ", table.rotary_dim / 2);
  RINGLM_CHECK(std::isfinite(table.attention_scaling), "rope: attention_scaling is not finite");
}
}  // namespace detail

void rope(Tensor& x, const Tensor& positions, const RopeTable& table) {
  [[maybe_unused]] const Device dev = detail::device_of("rope", {&x, &positions});
  detail::check_rope(x, positions, table);
  // CUDA positions live on the device: the kernel checks them (reported by cuda::synchronize()).
  for (int64_t t = 0; dev == Device::CPU && t < positions.shape[0]; ++t) {
    const int32_t p = positions.ptr<const int32_t>()[t];
    RINGLM_CHECK(p >= 0, "rope: position ", p, " at index ", t, " is negative");
  }
#ifdef RINGLM_HAS_CUDA
  if (dev == Device::CUDA) return cuda::rope(x, positions, table);
#endif
  cpu::rope(x, positions, table);
}

}  // namespace ringlm::ops
