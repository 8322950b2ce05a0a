// DeviceMemory: one owning allocation on a device (host memory for Device::CPU, cudaMalloc for
// Device::CUDA), for what a model keeps on its device: uploaded weights, KV pools, the activation
// arena and a step's staged tables. Plus the byte copies between devices that go with it.
#pragma once

#include <cstddef>

#include "core/tensor.h"

namespace ringlm {

class DeviceMemory {
 public:
  DeviceMemory() = default;
  // Throws ringlm::Error when the device is out of memory, or for Device::CUDA when the CUDA
  // backend is not built. CPU memory is left uninitialized (pages are committed when written).
  DeviceMemory(Device device, size_t bytes);
  ~DeviceMemory();
  DeviceMemory(DeviceMemory&& other) noexcept;
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void release();
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_ = Device::CPU;
};

// Copies `bytes` from src (on src_device) to dst (on dst_device). Copies into host memory have
// finished when this returns; copies into device memory are ordered on the backend stream and
// the source may be reused as soon as this returns.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

// Waits until every copy and kernel this thread queued on `device` has finished (so that another
// thread's stream may use the results, e.g. weights uploaded before the engine thread starts).
void synchronize_device(Device device);

// Sets every byte of `memory` to zero (ordered on the backend stream for device memory).
void zero_fill(DeviceMemory& memory);

// A device's memory now, in bytes: for Device::CUDA the current GPU's (cudaMemGetInfo), for
// Device::CPU the machine's available and physical memory.
struct MemoryInfo {
  size_t free = 0;
  size_t total = 0;
};
MemoryInfo memory_info(Device device);

// Throws a clear ringlm::Error unless `device` can be used in this build and on this machine.
void check_device_usable(Device device);
const char* device_name(Device device);        // "cpu", "cuda"
Device parse_device(const std::string& name);  // "cpu" | "cuda"; else ringlm::Error

}  // namespace ringlm
