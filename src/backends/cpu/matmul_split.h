// How the CPU matmuls (dense and affine-quantized weights) share one call among the threads, and
// the f32 bias both widen once per call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/cpu/scalar.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace ringlm::cpu {

// The bias (any float dtype, [N]) in f32; empty for no bias.
inline std::vector<float> bias_in_f32(const Tensor& bias, size_t N) {
  std::vector<float> out;
  if (!bias.empty()) {
    out.resize(N);
    widen_to_f32(bias.dtype, bias.data, N, out.data());
  }
  return out;
}

// Runs run(task) on parts of `base` (rows [m0, m1) × columns [n0, n1) of an M × N output) on the
// global pool: split by columns (each thread streams its own part of w) unless there are too few
// columns to share and enough rows: then by rows, in multiples of the 4-row tile.
template <typename Task, typename Run>
void run_split(const Task& base, size_t M, size_t N, const Run& run) {
  ThreadPool& pool = ThreadPool::global();
  const auto threads = static_cast<size_t>(pool.num_threads());
  if (N >= 16 * threads || M < 8) {
    pool.parallel_for(static_cast<int64_t>(N), 8, [&](int64_t begin, int64_t end) {
      Task t = base;
      t.n0 = static_cast<size_t>(begin);
      t.n1 = static_cast<size_t>(end);
      run(t);
    });
  } else {
    pool.parallel_for(static_cast<int64_t>(M), 4, [&](int64_t begin, int64_t end) {
      Task t = base;
      t.m0 = static_cast<size_t>(begin);
      t.m1 = static_cast<size_t>(end);
      run(t);
    });
  }
}

}  // namespace ringlm::cpu
