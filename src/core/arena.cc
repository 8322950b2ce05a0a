#include "core/arena.h"

namespace ringlm {

Arena::Arena(size_t capacity_bytes, Device device)
    : memory_(device, (capacity_bytes + kAlignment - 1) / kAlignment * kAlignment + kAlignment),
      capacity_(capacity_bytes) {}

void* Arena::alloc_bytes(size_t bytes) {
  const size_t start = (used_ + kAlignment - 1) / kAlignment * kAlignment;
  RINGLM_CHECK(start + bytes <= capacity_, "activation arena exhausted: need ", bytes,
               " bytes at offset ", start, " of ", capacity_);
  used_ = start + bytes;
  if (used_ > high_water_) high_water_ = used_;
  return memory_.data() + start;
}

Tensor Arena::alloc(DType dtype, std::initializer_list<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  void* p = alloc_bytes(static_cast<size_t>(n) * dtype_size(dtype));
  return Tensor::contiguous(p, dtype, dims.begin(), static_cast<int>(dims.size()),
                            memory_.device());
}

}  // namespace ringlm
