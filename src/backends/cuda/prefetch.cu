// prefetch_l2 (cuda_ops.h): bulk L2 prefetches of weights a later kernel reads, issued while the
// kernels before it leave DRAM idle. At batch 1 a layer's decode attention, its split-K merge and
// prepare_attention read a few MB in ~10 µs, while the o projection after them streams 33.5 MB
// (8B shape): pulled into L2 during those kernels, the o GEMV reads it from there.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/pdl.cuh"

namespace ringlm::cuda {

namespace {

constexpr uint32_t kChunkBytes = 16 << 10;  // one bulk prefetch (a multiple of 16)
constexpr int kThreads = 32;

// Thread i of the grid prefetches chunks i, i + threads, ... of [p, p + bytes) (p 16-byte
// aligned, bytes a multiple of 16). It reads nothing an earlier kernel writes, so it issues
// before waiting; it waits before exiting so that a kernel waiting on it has also waited on
// everything before it (stream order stays transitive under programmatic dependent launch).
__global__ void __launch_bounds__(kThreads) prefetch_l2_kernel(const char* p, uint64_t bytes) {
  device::launch_dependents();
  const uint64_t chunks = (bytes + kChunkBytes - 1) / kChunkBytes;
  for (uint64_t i = blockIdx.x * uint64_t{kThreads} + threadIdx.x; i < chunks;
       i += uint64_t{gridDim.x} * kThreads) {
    const uint64_t offset = i * kChunkBytes;
    const auto size = static_cast<uint32_t>(std::min<uint64_t>(kChunkBytes, bytes - offset));
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + offset), "r"(size)
                 : "memory");
  }
  device::wait_prior_grid();
}

// The most bytes one prefetch_l2 call moves: RINGLM_CUDA_L2_PREFETCH_MB at start-up (0: off),
// else kDefaultLimitMb.
constexpr int64_t kDefaultLimitMb = 0;
std::atomic<int64_t>& limit_bytes() {
  static std::atomic<int64_t> limit{[] {
    const char* v = std::getenv("RINGLM_CUDA_L2_PREFETCH_MB");
    const int64_t mb = v == nullptr ? kDefaultLimitMb : std::atoll(v);
    return std::clamp<int64_t>(mb, 0, 1 << 20) << 20;
  }()};
  return limit;
}

}  // namespace

int64_t l2_prefetch_limit() {
  return limit_bytes().load(std::memory_order_relaxed);
}

void set_l2_prefetch_limit(int64_t bytes) {
  limit_bytes().store(std::max<int64_t>(bytes, 0), std::memory_order_relaxed);
}

void prefetch_l2(const void* p, int64_t bytes) {
  const int64_t limit = l2_prefetch_limit();
  if (p == nullptr || bytes <= 0 || limit == 0) return;
  // Whole 16-byte units inside the range: the instruction's alignment and size rule.
  const auto begin = (reinterpret_cast<uintptr_t>(p) + 15) & ~uintptr_t{15};
  const auto end =
      (reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(bytes)) & ~uintptr_t{15};
  if (end <= begin) return;
  const auto size = std::min<uint64_t>(end - begin, static_cast<uint64_t>(limit));
  const uint64_t chunks = (size + kChunkBytes - 1) / kChunkBytes;
  // Spread over every SM: each issues its share from its own copy engine.
  const auto blocks = static_cast<unsigned>(std::min<uint64_t>(sm_count(), chunks));
  launch_pdl(prefetch_l2_kernel, dim3(blocks), dim3(kThreads), 0, Context::get().stream(),
             reinterpret_cast<const char*>(begin), size);
  check_launch("prefetch_l2_kernel");
}

}  // namespace ringlm::cuda
