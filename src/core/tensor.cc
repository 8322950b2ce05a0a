#include "core/tensor.h"

#include <sstream>

namespace ringlm {

Tensor::Tensor(void* data_ptr, DType type, std::initializer_list<int64_t> dims, Device dev) {
  RINGLM_CHECK(dims.size() <= kMaxDims, "too many dims: ", dims.size());
  *this = contiguous(data_ptr, type, dims.begin(), static_cast<int>(dims.size()), dev);
}

Tensor Tensor::contiguous(void* data_ptr, DType type, const int64_t* dims, int rank, Device dev) {
  RINGLM_CHECK(rank >= 0 && rank <= kMaxDims, "bad rank ", rank);
  Tensor t;
  t.data = data_ptr;
  t.dtype = type;
  t.device = dev;
  t.ndim = rank;
  int64_t step = 1;
  for (int d = rank - 1; d >= 0; --d) {
    RINGLM_CHECK(dims[d] >= 0, "negative dim ", dims[d]);
    t.shape[static_cast<size_t>(d)] = dims[d];
    t.strides[static_cast<size_t>(d)] = step;
    step *= dims[d];
  }
  return t;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[static_cast<size_t>(d)];
  return n;
}

bool Tensor::is_contiguous() const {
  int64_t step = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    const auto i = static_cast<size_t>(d);
    if (shape[i] != 1 && strides[i] != step) return false;
    step *= shape[i];
  }
  return true;
}

int Tensor::normalize_dim(int dim) const {
  const int d = dim < 0 ? dim + ndim : dim;
  RINGLM_CHECK(d >= 0 && d < ndim, "dim ", dim, " out of range for ", describe());
  return d;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  RINGLM_CHECK(ndim >= 1 && begin >= 0 && begin <= end && end <= shape[0], "bad row slice [", begin,
               ", ", end, ") of ", describe());
  Tensor t = *this;
  t.data = static_cast<char*>(data) + static_cast<size_t>(begin * strides[0]) * dtype_size(dtype);
  t.shape[0] = end - begin;
  return t;
}

Tensor Tensor::reshape(std::initializer_list<int64_t> dims) const {
  RINGLM_CHECK(is_contiguous(), "reshape needs a contiguous tensor: ", describe());
  Tensor t = contiguous(data, dtype, dims.begin(), static_cast<int>(dims.size()), device);
  RINGLM_CHECK(t.numel() == numel(), "reshape of ", describe(), " to ", t.describe());
  return t;
}

std::string Tensor::describe() const {
  std::ostringstream os;
  os << dtype_name(dtype) << "[";
  for (int d = 0; d < ndim; ++d) os << (d ? ", " : "") << shape[static_cast<size_t>(d)];
  os << "]";
  return os.str();
}

void check_shape(const Tensor& t, std::initializer_list<int64_t> dims, const char* what) {
  bool ok = t.ndim == static_cast<int>(dims.size());
  int d = 0;
  for (int64_t want : dims) {
    if (ok && want >= 0 && t.shape[static_cast<size_t>(d)] != want) ok = false;
    ++d;
  }
  if (!ok) {
    std::ostringstream os;
    os << what << ": shape " << t.describe() << " does not match [";
    int i = 0;
    for (int64_t want : dims)
      os << (i++ ? ", " : "") << (want < 0 ? std::string("*") : std::to_string(want));
    os << "]";
    RINGLM_FAIL(os.str());
  }
}

void check_dtype(const Tensor& t, DType type, const char* what) {
  RINGLM_CHECK(t.dtype == type, what, ": dtype ", dtype_name(t.dtype), ", expected ",
               dtype_name(type));
}

}  // namespace ringlm
