// CPU rotary embedding, "rotate_half" (NeoX) layout as transformers' Llama.
//
// As transformers: the angle is pos · inv_freq[i] in f32, cos and sin are computed in f32 and
// multiplied by attention_scaling, then out[i] = x1·cos − x2·sin and out[i + d/2] = x2·cos + x1·sin
// with x1 = x[i], x2 = x[i + d/2] for i < d/2 (d = rotary_dim); dims >= d are left as they are.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "core/thread_pool.h"

namespace ringlm::cpu {

void rope(Tensor& x, const Tensor& positions, const ops::RopeTable& table) {
  const auto T = x.shape[0];
  const auto heads = static_cast<size_t>(x.shape[1]);
  const auto head_dim = static_cast<size_t>(x.shape[2]);
  const auto half = static_cast<size_t>(table.rotary_dim / 2);
  const float scaling = table.attention_scaling;
  ThreadPool::global().parallel_for(T, 1, [&](int64_t b, int64_t e) {
    std::vector<float> cs(half), sn(half);
    for (int64_t t = b; t < e; ++t) {
      const auto pos = static_cast<float>(positions.ptr<const int32_t>()[t]);
      for (size_t i = 0; i < half; ++i) {
        const float angle = pos * table.inv_freq[i];
        cs[i] = std::cos(angle) * scaling;
        sn[i] = std::sin(angle) * scaling;
      }
      float* row = x.row<float>(t);
      for (size_t h = 0; h < heads; ++h) {
        float* v = row + h * head_dim;
        for (size_t i = 0; i < half; ++i) {
          const float x1 = v[i], x2 = v[i + half];
          v[i] = x1 * cs[i] - x2 * sn[i];
          v[i + half] = x2 * cs[i] + x1 * sn[i];
        }
      }
    }
  });
}

}  // namespace ringlm::cpu
