// Helpers for the GPU op tests: device copies of host tensors, poisoned outputs, and a guard that
// skips a test on machines without a GPU (CI builds the suite; the H200 runs it).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device_buffer.h"
#include "ops/op_test_util.h"

// Skips the calling test when there is no CUDA device.
#define RINGLM_REQUIRE_GPU()                                                        \
  do {                                                                              \
    if (!::ringlm::cuda::device_available()) GTEST_SKIP() << "no CUDA device here"; \
  } while (0)

namespace ringlm::ops::testing {

// A device tensor with its own storage: a copy of a host tensor, or poisoned (every byte 0xFF:
// NaN for float dtypes, -1 for I32) so that an element a kernel fails to write shows up.
class OnDevice {
 public:
  explicit OnDevice(const Owned& host)
      : buffer_(std::max<size_t>(host.t().nbytes(), 1)), t_(host.t()) {
    t_.data = buffer_.data();
    t_.device = Device::CUDA;
    cuda::copy_to_device(t_.data, host.t().data, host.t().nbytes());
  }
  OnDevice(DType dtype, std::initializer_list<int64_t> dims)
      : buffer_(std::max<size_t>(Tensor(nullptr, dtype, dims).nbytes(), 1)),
        t_(buffer_.data(), dtype, dims, Device::CUDA) {
    cuda::fill_device(t_.data, 0xff, t_.nbytes());
  }
  Tensor& t() { return t_; }
  const Tensor& t() const { return t_; }
  // A host copy (same dtype and shape); waits for the GPU and throws device-side errors.
  Owned to_host() const {
    Owned out = empty_like();
    cuda::copy_to_host(out.t().data, t_.data, t_.nbytes());
    return out;
  }

 private:
  Owned empty_like() const {
    switch (t_.ndim) {
      case 1:
        return Owned(t_.dtype, {t_.shape[0]});
      case 2:
        return Owned(t_.dtype, {t_.shape[0], t_.shape[1]});
      case 3:
        return Owned(t_.dtype, {t_.shape[0], t_.shape[1], t_.shape[2]});
      default:
        return Owned(t_.dtype, {t_.shape[0], t_.shape[1], t_.shape[2], t_.shape[3]});
    }
  }
  cuda::DeviceBuffer buffer_;
  Tensor t_;
};

// Copy of a host tensor (one for the op, one for the reference).
inline Owned copy_of(const Owned& src) {
  const Tensor& t = src.t();
  Owned out = t.ndim == 1   ? Owned(t.dtype, {t.shape[0]})
              : t.ndim == 2 ? Owned(t.dtype, {t.shape[0], t.shape[1]})
              : t.ndim == 3 ? Owned(t.dtype, {t.shape[0], t.shape[1], t.shape[2]})
                            : Owned(t.dtype, {t.shape[0], t.shape[1], t.shape[2], t.shape[3]});
  std::memcpy(out.t().data, t.data, t.nbytes());
  return out;
}

// cuda::synchronize() throws an error whose message contains `needle` (a value a kernel rejected).
// A rope table of `rotary_dim` as transformers' default rope builds it: inv_freq[i] =
// base^(-2i / rotary_dim), cos and sin times `scaling`.
inline RopeTable make_rope_table(int rotary_dim, float scaling, double base) {
  RopeTable t;
  t.rotary_dim = rotary_dim;
  t.attention_scaling = scaling;
  for (int i = 0; i < rotary_dim / 2; ++i)
    t.inv_freq.push_back(static_cast<float>(1.0 / std::pow(base, 2.0 * i / rotary_dim)));
  return t;
}

inline void expect_sync_error(const std::string& needle) {
  try {
    cuda::synchronize();
    ADD_FAILURE() << "expected an error containing \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Sets a backend switch (cuda_ops.h, quant_mma.h) for a scope and gives back the value it had (the
// suite may run with a switch set in the environment), also when an assertion returns early.
class SwitchFor {
 public:
  SwitchFor(bool (*get)(), void (*set)(bool), bool value) : set_(set), before_(get()) {
    set_(value);
  }
  ~SwitchFor() { set_(before_); }
  SwitchFor(const SwitchFor&) = delete;
  SwitchFor& operator=(const SwitchFor&) = delete;

 private:
  void (*set_)(bool);
  bool before_;
};

// Sets an integer backend setting (quant_mma.h, cuda_ops.h: 0 = its default) for a scope and puts
// it back to its default after, also when an assertion returns early.
class SettingFor {
 public:
  SettingFor(void (*set)(int64_t), int64_t value) : set_(set) { set_(value); }
  ~SettingFor() { set_(0); }
  SettingFor(const SettingFor&) = delete;
  SettingFor& operator=(const SettingFor&) = delete;

 private:
  void (*set_)(int64_t);
};

}  // namespace ringlm::ops::testing
