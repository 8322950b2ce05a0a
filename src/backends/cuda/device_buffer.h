// DeviceBuffer: owns one cudaMalloc allocation (weights, KV pools, arenas and tests put CUDA
// tensors in it) and the host<->device copies that go with it. Plain C++ header.
#pragma once

#include <cstddef>
#include <initializer_list>

#include "core/tensor.h"

namespace ringlm::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);  // throws ringlm::Error when the device is out of memory
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  size_t size() const { return bytes_; }
  // A contiguous Device::CUDA view at the start of the buffer (must fit).
  Tensor view(DType dtype, std::initializer_list<int64_t> dims) const;

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// cudaMalloc / cudaFree (throws ringlm::Error when the device is out of memory; device_free waits
// for work that uses the memory).
void* device_malloc(size_t bytes);
void device_free(void* ptr);

// The current device's free and total memory in bytes (cudaMemGetInfo).
void device_memory_info(size_t* free_bytes, size_t* total_bytes);

// Device -> device on the backend stream.
void copy_on_device(void* dst, const void* src, size_t bytes);
// Host -> device on the backend stream, through pinned staging (Context::copy_to_device): it
// does not wait for the stream's earlier work; src may be reused as soon as this returns.
void copy_to_device(void* dst, const void* src, size_t bytes);
// Device -> host: waits for the stream (cuda::synchronize(), so device-side errors throw here).
void copy_to_host(void* dst, const void* src, size_t bytes);
// Sets `bytes` bytes to `value` on the backend stream.
void fill_device(void* dst, int value, size_t bytes);

}  // namespace ringlm::cuda
