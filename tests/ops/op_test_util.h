// Helpers for the op tests: owned tensors, seeded random fills, SIMD-target sweeps.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/simd_targets.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace ringlm::ops::testing {

// Unit roundoff of f32 (2^-24): the relative error of one correctly rounded f32 operation.
constexpr double kEps = 1.0 / (1 << 24);

// A tensor that owns its (64-byte aligned) storage.
class Owned {
 public:
  Owned() = default;
  Owned(const Owned&) = delete;  // t() points into storage_: moving keeps it valid, copying not
  Owned& operator=(const Owned&) = delete;
  Owned(Owned&&) noexcept = default;
  Owned& operator=(Owned&&) noexcept = default;
  Owned(DType dtype, std::initializer_list<int64_t> dims) {
    Tensor shape_only(nullptr, dtype, dims);
    const size_t bytes = std::max<size_t>(shape_only.nbytes(), 1);
    storage_.assign((bytes + 63) / 64 + 1, Block{});
    t_ = Tensor(storage_.data(), dtype, dims);
  }
  Tensor& t() { return t_; }
  const Tensor& t() const { return t_; }
  template <typename T>
  T* p() const {
    return t_.ptr<T>();
  }
  float f(int64_t i) const;      // element i widened to f32
  void set(int64_t i, float v);  // element i := v rounded to the dtype

 private:
  struct alignas(64) Block {
    char bytes[64];
  };
  std::vector<Block> storage_;
  Tensor t_;
};

inline float Owned::f(int64_t i) const {
  switch (t_.dtype) {
    case DType::F32:
      return p<float>()[i];
    case DType::BF16:
      return bf16_to_f32(p<bf16_t>()[i]);
    case DType::F16:
      return f16_to_f32(p<f16_t>()[i]);
    case DType::I32:
      return static_cast<float>(p<int32_t>()[i]);
    default:
      return 0.0f;
  }
}

inline void Owned::set(int64_t i, float v) {
  switch (t_.dtype) {
    case DType::F32:
      p<float>()[i] = v;
      break;
    case DType::BF16:
      p<bf16_t>()[i] = f32_to_bf16(v);
      break;
    case DType::F16:
      p<f16_t>()[i] = f32_to_f16(v);
      break;
    case DType::I32:
      p<int32_t>()[i] = static_cast<int32_t>(v);
      break;
    default:
      break;
  }
}

// Uniform values in [lo, hi], rounded to the tensor's dtype.
inline void fill_uniform(Owned& o, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < o.t().numel(); ++i) o.set(i, dist(rng));
}

// Small integers in [-r, r]: every product and sum of a few thousand of them is exact in f32, so
// any correct kernel must match the reference bit for bit.
inline void fill_small_ints(Owned& o, uint32_t seed, int r = 2) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-r, r);
  for (int64_t i = 0; i < o.t().numel(); ++i) o.set(i, static_cast<float>(dist(rng)));
}

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

// Runs fn once per SIMD target compiled in and supported here (the dispatch picks each in turn),
// then restores the default choice.
inline void for_each_simd_target(const std::function<void(const std::string&)>& fn) {
  for (const std::string& name : cpu::available_simd_targets()) {
    SCOPED_TRACE("SIMD target " + name);
    cpu::force_simd_target(name);
    fn(name);
  }
  cpu::force_simd_target("");
}

// Sets the global pool's size for a scope (thread-split invariance tests).
class ScopedThreads {
 public:
  explicit ScopedThreads(int n) { ThreadPool::set_global_threads(n); }
  ~ScopedThreads() { ThreadPool::set_global_threads(0); }
};

inline const char* dtype_label(DType d) {
  return d == DType::F32 ? "F32" : d == DType::BF16 ? "BF16" : d == DType::F16 ? "F16" : "?";
}

}  // namespace ringlm::ops::testing
