#include "backends/cuda/device_buffer.h"

#include <utility>

#include "backends/cuda/runtime.h"

namespace ringlm::cuda {

void* device_malloc(size_t bytes) {
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, bytes);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    RINGLM_FAIL("cudaMalloc of ", bytes, " bytes failed: ", cudaGetErrorString(status));
  }
  return ptr;
}

void device_memory_info(size_t* free_bytes, size_t* total_bytes) {
  RINGLM_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
}

void device_free(void* ptr) {
  if (ptr != nullptr) (void)cudaFree(ptr);  // cudaFree waits for work that uses it
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  try {
    ptr_ = device_malloc(bytes);
  } catch (...) {
    bytes_ = 0;
    throw;
  }
}

DeviceBuffer::~DeviceBuffer() {
  device_free(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

Tensor DeviceBuffer::view(DType dtype, std::initializer_list<int64_t> dims) const {
  Tensor t(ptr_, dtype, dims, Device::CUDA);
  RINGLM_CHECK(t.nbytes() <= bytes_, "DeviceBuffer::view: ", t.describe(), " needs ", t.nbytes(),
               " bytes, the buffer has ", bytes_);
  return t;
}

void copy_to_device(void* dst, const void* src, size_t bytes) {
  Context::get().copy_to_device(dst, src, bytes);
}

void copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  RINGLM_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, Context::get().stream()));
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
  Context& ctx = Context::get();
  if (bytes > 0)
    RINGLM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx.stream()));
  ctx.synchronize();
}

void fill_device(void* dst, int value, size_t bytes) {
  if (bytes == 0) return;
  RINGLM_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, Context::get().stream()));
}

}  // namespace ringlm::cuda
