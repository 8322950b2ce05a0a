// Per-step activation arena: one aligned allocation handed out by bumping an offset and reset at
// the start of every step, so a step's buffers sit at the same addresses each time (which is what
// lets a CUDA graph capture a decode step).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>

#include "core/device_memory.h"
#include "core/tensor.h"

namespace ringlm {

class Arena {
 public:
  explicit Arena(size_t capacity_bytes, Device device = Device::CPU);
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  Device device() const { return memory_.device(); }
  // Returns a contiguous tensor inside the arena (on its device); throws when the arena is
  // exhausted.
  Tensor alloc(DType dtype, std::initializer_list<int64_t> dims);
  void* alloc_bytes(size_t bytes);
  void reset() { used_ = 0; }

  size_t used() const { return used_; }
  size_t capacity() const { return capacity_; }
  size_t high_water() const { return high_water_; }

  static constexpr size_t kAlignment = 64;

 private:
  DeviceMemory memory_;
  size_t capacity_ = 0;
  size_t used_ = 0;
  size_t high_water_ = 0;
};

}  // namespace ringlm
