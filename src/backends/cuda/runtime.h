// Per-thread CUDA state of the backend: one stream, a cuBLAS handle, growable scratch buffers and
// the device-side error record that kernels write when they reject a value (cuda_ops.h).
// Internal to backends/cuda (includes CUDA headers).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/error.h"

// Throws ringlm::Error naming the failed CUDA runtime call and its error string.
#define RINGLM_CUDA_CHECK(expr)                                                                 \
  do {                                                                                          \
    const cudaError_t ringlm_cuda_status_ = (expr);                                             \
    if (ringlm_cuda_status_ != cudaSuccess) [[unlikely]]                                        \
      ::ringlm::detail::throw_error(                                                            \
          #expr, __FILE__, __LINE__,                                                            \
          ::ringlm::detail::concat("CUDA error: ", cudaGetErrorName(ringlm_cuda_status_), ": ", \
                                   cudaGetErrorString(ringlm_cuda_status_)));                   \
  } while (0)

#define RINGLM_CUBLAS_CHECK(expr)                                                                \
  do {                                                                                           \
    const cublasStatus_t ringlm_cublas_status_ = (expr);                                         \
    if (ringlm_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                             \
      ::ringlm::detail::throw_error(                                                             \
          #expr, __FILE__, __LINE__,                                                             \
          ::ringlm::detail::concat("cuBLAS error: ", cublasGetStatusName(ringlm_cublas_status_), \
                                   ": ", cublasGetStatusString(ringlm_cublas_status_)));         \
  } while (0)

namespace ringlm::cuda {

// What a kernel rejected (the first one wins; later ones are dropped until synchronize()).
enum class DeviceErrorCode : int { None = 0, EmbeddingId = 1, RopePosition = 2, KvSlot = 3 };
struct DeviceErrorRecord {
  int code;  // DeviceErrorCode
  int unused;
  long long index;  // the element (token) that carried the bad value
  long long value;
  long long bound;  // the exclusive upper bound it broke (0 when only >= 0 was required)
};

enum class Scratch {
  MatmulInput,
  MatmulOutput,
  Rows,
  AttentionPartials,
  DequantTile,
  Reduce,
  MergeTickets,
  SampleJobs,
  SampleWeights,
  QuantPartials,
  QuantTickets,
  GemmPartials,
  GemmTickets,
  TokenFeeds,
  AttentionOutput,
  Count
};

class Context {
 public:
  // The calling thread's context, created on first use on the current device.
  static Context& get();
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  DeviceErrorRecord* errors() const { return errors_; }
  // At least `bytes` of device memory for one purpose. Reuse is stream-ordered: work queued
  // earlier on stream() may still read the previous contents; growing waits for it first.
  // `zeroed`: a new buffer starts as zeros (counters that their users return to zero).
  void* scratch(Scratch slot, size_t bytes, bool zeroed = false);
  // Changes whenever a scratch buffer moves (CUDA graphs captured before then are stale).
  uint64_t scratch_generation() const { return scratch_generation_; }
  // Waits for stream(), then throws for a recorded device-side error (and clears it).
  void synchronize();
  // Queues a host -> device copy on stream(), through pinned staging memory when it fits: from
  // pageable memory the driver may wait for the stream's earlier work first, which would hold
  // the host while a launched step runs (engine/runner.h launch/collect). The staging memory is
  // two halves used in turn; while a stream capture is under way the copy reads `src` directly
  // (a captured copy would re-read the staging bytes on every replay).
  void copy_to_device(void* dst, const void* src, size_t bytes);
  // Moves the staging to its other half (once per launched step): the copies made from that half
  // two steps ago are waited for (they have long finished when steps are collected in turn).
  void next_staging_half();

 private:
  Context();
  struct Buffer {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceErrorRecord* errors_ = nullptr;
  std::array<Buffer, static_cast<size_t>(Scratch::Count)> scratch_{};
  uint64_t scratch_generation_ = 0;
  void* cublas_workspace_ = nullptr;  // fixed, so cuBLAS calls can be captured into graphs
  struct Staging {
    unsigned char* pinned = nullptr;  // two halves of kStagingHalf bytes
    int half = 0;
    size_t used = 0;
    cudaEvent_t done[2] = {nullptr, nullptr};  // recorded when the stream left each half
    bool recorded[2] = {false, false};
  };
  Staging staging_;
};

// The current device's SM count (read once per process).
int sm_count();
// The current device's peak DRAM bandwidth in GB/s from its memory clock and bus width (read once
// per process; H100 SXM ~3,350, H200 ~4,800); 0 where the device does not report them.
double dram_peak_gbps();

// A run-time switch read from the environment (same-binary A/B): NAME=0 turns it off, NAME=1 on;
// unset (or anything else) leaves it at `by_default`.
bool env_switch_on(const char* name, bool by_default = true);
// The process-wide flag of such a switch (on unless kByDefault is false), read from the
// environment once; its owner's set_ function (tests, A/Bs) flips it. Name: a constexpr char
// array, one per switch.
template <const char* Name, bool kByDefault = true>
std::atomic<bool>& switch_flag() {
  static std::atomic<bool> on{env_switch_on(Name, kByDefault)};
  return on;
}
// A positive integer setting read from the environment (same-binary A/B): `by_default` when NAME
// is unset or not a positive integer.
int64_t env_positive_int(const char* name, int64_t by_default);

// Whether launch_pdl (device/pdl.cuh) lets kernels overlap their predecessor: true unless the
// environment sets RINGLM_CUDA_PDL=0, or set_pdl_enabled(false) (tests; CUDA graphs captured
// before keep what they were captured with).
bool pdl_enabled();
void set_pdl_enabled(bool enabled);

// After a kernel launch: throws if the launch itself failed (bad configuration, no device).
void check_launch(const char* kernel);

}  // namespace ringlm::cuda
