// The per-tile math of the tensor-core decode kernel over 16-bit tiles in shared memory
// (device/attention_decode_tc.cuh, and its persistent variant
// device/attention_decode_persistent.cuh): the query fragments, one tile of the online softmax,
// and the block's partials.
#pragma once

#include <cstdint>

#include "backends/cuda/device/attention_common.cuh"
#include "backends/cuda/device/decode_tc_common.cuh"
#include "backends/cuda/device/decode_tiles.cuh"
#include "backends/cuda/device/mma.cuh"

namespace ringlm::cuda::device {

// One 16-key tile of a warp's online softmax, the tile starting at visible key i0 (keys at or
// past `last` get no weight): S = Q·Kᵀ, P, Oᵀ += Vᵀ·Pᵀ.
template <typename T, int kD>
__device__ __forceinline__ void tc_consume_tile(const AttnArgs& a, const TcTile<T, kD>& tile,
                                                const uint32_t (&qf)[kD / 16][2],
                                                TcOnlineSoftmax<T, kD>& soft, int i0, int last,
                                                int lane) {
  const int c = lane & 3;
  const int mi = lane >> 3, mj = lane & 7;  // ldmatrix: the matrix and row this lane addresses
  // S = Q·Kᵀ, two n-tiles of 8 keys: s[n][0], s[n][1] = head g, keys 8n + 2c, 8n + 2c + 1.
  float s[2][4];
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int s2 = 0; s2 < kD / 32; ++s2) {
      uint32_t b[4];
      ldmatrix_x4(b, &tile.k[8 * n + mj][32 * s2 + 8 * mi]);
      tc_scores<T, kD>(qf, 2 * s2, b[0], b[1], s[n]);
      tc_scores<T, kD>(qf, 2 * s2 + 1, b[2], b[3], s[n]);
    }
  }
  uint32_t p[2];
  soft.probabilities(a, s, i0, last, c, p);
#pragma unroll
  for (int i = 0; i < kD / 16; ++i) {
    uint32_t av[4];  // Vᵀ rows 16i .. 16i + 15 (dims) × the 16 keys
    ldmatrix_x4_trans(av, &tile.v[8 * (mi >> 1) + mj][16 * i + 8 * (mi & 1)]);
    mma16816<T>(soft.o[i], av, p[0], p[1]);
  }
}

// The query's q fragments (k-step s: dims 16s + 2c (+1) and 16s + 8 + 2c (+1), as ldmatrix
// delivers K).
template <typename T, int kD>
__device__ __forceinline__ void tc_load_q(const AttnArgs& a, const TcDecodeTask& task, int lane,
                                          uint32_t (&qf)[kD / 16][2]) {
  const int g = lane >> 2, c = lane & 3;
  load_q_fragments<T, kD>(
      a, task, g, [c](int s, int h) { return 16 * s + 8 * h + 2 * c; }, qf);
}

// The block's partials; Oᵀ m-tile i: rows g and g + 8 are dims 16i + g and 16i + 8 + g
// (ldmatrix.trans of V).
template <typename T, int kD, typename Regions>
__device__ __forceinline__ void tc_finish_task(const AttnArgs& a, const TcDecodeTask& task,
                                               TcOnlineSoftmax<T, kD>& soft, Regions regions,
                                               int lane) {
  const int g = lane >> 2;
  soft.write_partials(a, task, regions, [g](int i, int h) { return 16 * i + 8 * h + g; });
}

}  // namespace ringlm::cuda::device
