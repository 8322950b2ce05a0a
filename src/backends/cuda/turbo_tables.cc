// Device copies of the TurboQuant tables (Lloyd-Max codebooks, Hadamard signs): computed once on
// the host by kv/turbo_codec and uploaded per device on first use. They live as long as the
// process (a few KiB per device).
#include <cuda_runtime.h>

#include <array>
#include <map>
#include <mutex>
#include <vector>

#include "backends/cuda/quantized_kv.h"
#include "backends/cuda/runtime.h"
#include "kv/turbo_codec.h"

namespace ringlm::cuda {

namespace {

enum class Table { Centroids, Boundaries, Signs };

// One device buffer per (device, table, width or head_dim), never freed.
const float* upload_once(Table table, int key, const std::vector<float>& host) {
  static std::mutex mutex;
  static std::map<std::array<int, 3>, float*> uploaded;
  int device = 0;
  RINGLM_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  float*& ptr = uploaded[{device, static_cast<int>(table), key}];
  if (ptr == nullptr) {
    float* p = nullptr;
    RINGLM_CUDA_CHECK(cudaMalloc(&p, host.size() * sizeof(float)));
    RINGLM_CUDA_CHECK(
        cudaMemcpy(p, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
    ptr = p;
  }
  return ptr;
}

}  // namespace

const float* turbo_centroids_on_device(int bits) {
  return upload_once(Table::Centroids, bits, kv::lloyd_max_centroids(bits));
}
const float* turbo_boundaries_on_device(int bits) {
  return upload_once(Table::Boundaries, bits, kv::lloyd_max_boundaries(bits));
}
const float* turbo_signs_on_device(int head_dim) {
  return upload_once(Table::Signs, head_dim, kv::turbo_signs(head_dim));
}

}  // namespace ringlm::cuda
