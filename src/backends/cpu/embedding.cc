// CPU embedding lookup: out[m] = table[ids[m]] · scale (exact widening, one rounding for scale).
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/scalar.h"
#include "core/thread_pool.h"

namespace ringlm::cpu {

void embedding(const Tensor& ids, const Tensor& table, float scale, Tensor& out) {
  const auto M = ids.shape[0];
  const auto H = static_cast<size_t>(table.shape[1]);
  const size_t row_bytes = H * dtype_size(table.dtype);
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(4096 / std::max<size_t>(H, 1)));
  ThreadPool::global().parallel_for(M, grain, [&](int64_t b, int64_t e) {
    for (int64_t m = b; m < e; ++m) {
      const int32_t id = ids.ptr<const int32_t>()[m];
      const auto* src = static_cast<const char*>(table.data) + static_cast<size_t>(id) * row_bytes;
      float* dst = out.row<float>(m);
      widen_to_f32(table.dtype, src, H, dst);
      if (scale != 1.0f)
        for (size_t i = 0; i < H; ++i) dst[i] *= scale;
    }
  });
}

}  // namespace ringlm::cpu
