#include "core/device_memory.h"

#include <unistd.h>

#include <cstring>
#include <new>
#include <utility>

#ifdef RINGLM_HAS_CUDA
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device_buffer.h"
#endif

namespace ringlm {

namespace {
constexpr size_t kHostAlignment = 64;
}  // namespace

DeviceMemory::DeviceMemory(Device device, size_t bytes) : bytes_(bytes), device_(device) {
  if (bytes == 0) return;
  if (device == Device::CPU) {
    data_ = static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{kHostAlignment}));
    return;
  }
  check_device_usable(device);
#ifdef RINGLM_HAS_CUDA
  data_ = static_cast<std::byte*>(cuda::device_malloc(bytes));
#endif
}

DeviceMemory::~DeviceMemory() {
  release();
}

void DeviceMemory::release() {
  if (data_ == nullptr) return;
  if (device_ == Device::CPU) {
    ::operator delete[](data_, std::align_val_t{kHostAlignment});
  } else {
#ifdef RINGLM_HAS_CUDA
    cuda::device_free(data_);
#endif
  }
  data_ = nullptr;
  bytes_ = 0;
}

DeviceMemory::DeviceMemory(DeviceMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      device_(other.device_) {}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = other.device_;
  }
  return *this;
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == Device::CPU && src_device == Device::CPU) {
    std::memcpy(dst, src, bytes);
    return;
  }
  check_device_usable(Device::CUDA);
#ifdef RINGLM_HAS_CUDA
  if (dst_device == Device::CPU) {
    cuda::copy_to_host(dst, src, bytes);
  } else if (src_device == Device::CPU) {
    cuda::copy_to_device(dst, src, bytes);
  } else {
    cuda::copy_on_device(dst, src, bytes);
  }
#endif
}

void synchronize_device(Device device) {
  if (device == Device::CPU) return;
#ifdef RINGLM_HAS_CUDA
  cuda::synchronize();
#endif
}

void zero_fill(DeviceMemory& memory) {
  if (memory.size() == 0) return;
  if (memory.device() == Device::CPU) {
    std::memset(memory.data(), 0, memory.size());
    return;
  }
#ifdef RINGLM_HAS_CUDA
  cuda::fill_device(memory.data(), 0, memory.size());
#endif
}

MemoryInfo memory_info(Device device) {
  MemoryInfo info;
  if (device == Device::CPU) {
    const long page = sysconf(_SC_PAGESIZE);
    info.free = static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<size_t>(page);
    info.total = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(page);
    return info;
  }
  check_device_usable(device);
#ifdef RINGLM_HAS_CUDA
  cuda::device_memory_info(&info.free, &info.total);
#endif
  return info;
}

void check_device_usable(Device device) {
  if (device == Device::CPU) return;
#ifdef RINGLM_HAS_CUDA
  RINGLM_USER_CHECK(cuda::device_available(),
                    "--device cuda: no CUDA device or driver was found on this machine");
#else
  RINGLM_USER_CHECK(false,
                    "--device cuda: this build has no CUDA backend (configure with "
                    "-DRINGLM_CUDA=ON)");
#endif
}

const char* device_name(Device device) {
  return device == Device::CPU ? "cpu" : "cuda";
}

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::CPU;
  if (name == "cuda") return Device::CUDA;
  RINGLM_USER_CHECK(false, "unknown device '", name, "' (expected cpu or cuda)");
  return Device::CPU;
}

}  // namespace ringlm
