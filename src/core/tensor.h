// Tensor: a non-owning view of memory (pointer, dtype, shape, strides, device). Ownership lives
// elsewhere: weights in a mapped file, KV in the block pool, activations in the per-step arena.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace ringlm {

enum class Device : uint8_t { CPU, CUDA };

constexpr int kMaxDims = 4;

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::F32;
  Device device = Device::CPU;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};
  std::array<int64_t, kMaxDims> strides{};  // in elements

  Tensor() = default;
  // A contiguous row-major view.
  Tensor(void* data, DType dtype, std::initializer_list<int64_t> dims, Device device = Device::CPU);
  static Tensor contiguous(void* data, DType dtype, const int64_t* dims, int ndim,
                           Device device = Device::CPU);

  int64_t numel() const;
  int64_t size(int dim) const { return shape[static_cast<size_t>(normalize_dim(dim))]; }
  int64_t stride(int dim) const { return strides[static_cast<size_t>(normalize_dim(dim))]; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool is_contiguous() const;
  bool empty() const { return data == nullptr; }

  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data);
  }
  // Pointer to the first element of index i along dim 0.
  template <typename T>
  T* row(int64_t i) const {
    return static_cast<T*>(data) + i * strides[0];
  }

  // A view of rows [begin, end) along dim 0.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  // Same memory, new contiguous shape (requires a contiguous tensor and the same element count).
  Tensor reshape(std::initializer_list<int64_t> dims) const;

  std::string describe() const;  // "BF16[4096, 128]" for messages

 private:
  int normalize_dim(int dim) const;
};

// Shape checks used at op boundaries: dims given as {d0, d1, ...}; -1 matches any size.
void check_shape(const Tensor& t, std::initializer_list<int64_t> dims, const char* what);
void check_dtype(const Tensor& t, DType dtype, const char* what);

}  // namespace ringlm
