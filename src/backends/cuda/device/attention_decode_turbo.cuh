// Decode attention over TurboQuant k8v3 K/V (the default `turbo`), head_dim 64/128/256, with the
// codes decoded straight into the mma fragments: no shared-memory tile. The block, the online
// softmax and the partials are the tensor-core decode kernel's (device/decode_tc_common.cuh);
// only the K and V operands differ. Why: through shared memory (decode the codes, store f16,
// ldmatrix them back) the kernel was bound by L1/shared-memory traffic (Nsight Compute: L1 88 %,
// DRAM 21 % at 32k) and no faster than bf16 K/V despite 2.6× fewer bytes.
//
// Fragment layouts (lane = (g, c) = (lane / 4, lane % 4); a dot product does not depend on the
// order of its terms, so each k-step takes whichever dims the lanes load contiguously):
//   K: S is computed transposed, Sᵀ = K·Qᵀ, with the tile's 16 keys as the mma's rows (one mma
//      per k-step for all 16 keys, Q's fragments as the B operand, no padded rows): the A
//      operand's rows g and g + 8 are keys g and g + 8 of the tile. Lane c loads bytes 64j + 16c
//      .. + 15 of each of the two key rows (one 16-byte load per chunk j, whole 64-byte spans per
//      4 lanes); word u of chunk j is k-step 4j + u: dims 64j + 16c + 4u + 0, 1 and + 2, 3. Q's
//      fragments take the same dims. Those 16 dims sit in one 32-dim scale group, 2j + c / 2.
//      The softmax is device/decode_tc_common.cuh's TcHeadColumnsSoftmax.
//   V: Oᵀ += Vᵀ·Pᵀ's A operand pairs a dim of two keys (keys 2c, 2c + 1 and 2c + 8, 2c + 9: the
//      keys of Pᵀ's B fragment). Lane g decodes dims kD/8 · g .. + kD/8 − 1 of those four keys
//      (3·kD/64 contiguous bytes of each row, one scale group); m-tile i's rows g and g + 8 are
//      its dims 2i and 2i + 1. The output dims come back in that order (write_partials).
// Decoding: keys k̂ = q·s + (z·s) with q exact from the int8 code (byte ^ 0x80 | 0x6400 is the
// f16 1024 + 128 + q), one f16 rounding for z·s and one for the fma; values centroid·s, the
// centroid's f16 bytes picked by prmt from an 8-entry byte table, one rounding (values stay
// rotated: the caller un-rotates the output). So k̂ and v carry ≤ 2 f16 roundings (2^-10
// relative), under the bf16 tiles' 2^-8.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/decode_tc_common.cuh"
#include "backends/cuda/device/kv_turbo.cuh"
#include "backends/cuda/device/mma.cuh"
#include "backends/cuda/device/pdl.cuh"

namespace ringlm::cuda::device {

template <int kD>
struct TurboK8V3Fragments {
  static_assert(kD == 64 || kD == 128 || kD == 256, "TurboK8V3Fragments: head_dim 64/128/256");
  using T = __half;
  static constexpr int kChunks = kD / 64;          // 16-byte chunks of key codes per lane
  static constexpr int kScaleWords = kD / 64;      // words of a row's f16 group scales
  static constexpr int kValueDims = kD / 8;        // dims of a value row this lane decodes
  static constexpr int kValueBytes = 3 * kD / 64;  // their 3-bit codes: 3, 6 or 12 bytes
  static constexpr int kValueWords = kD == 256 ? 3 : 2;
  // Tiles in flight per warp (in registers) and blocks per SM (the register budget). head_dim 128:
  // one tile and 4 blocks (126 registers) beat two tiles and 3 (168) — more warps per SM for as
  // many bytes in flight: +1.9 % at 32k × 1 and +7.1 % at 32k × 16 (H100, docs/benchmarks.md,
  // sixteenth session); two tiles in 128 registers spill and lose (0.93 / 0.81).
  static constexpr int kAhead = kD == 64 ? 2 : 1;
  static constexpr int kMinBlocks = kD == 64 ? 3 : (kD == 128 ? 4 : 2);

  // One tile's codes and scales for this lane, loaded ahead of use and left untouched until the
  // tile is consumed (any use in fetch would wait for the loads there).
  struct Raw {
    uint4 k[2][kChunks];                              // key 8n + g: bytes 64j + 16c .. + 15
    uint32_t ks[2][kScaleWords], kz[2][kScaleWords];  // its group scales, zero points
    uint32_t v[4][kValueWords];  // keys 2c, 2c + 1, 2c + 8, 2c + 9: the words holding this
                                 // lane's codes
    uint32_t vs[4];              // their scales (f16 bits)
    uint32_t valid;              // bit n: key 8n + g; bit 2 + kk: value key kk (else zeros)
  };

  TurboKvReader<8, 3> kv;
  uint32_t lo[2], hi[2];  // the f16 centroids' low bytes (lo[0]: entries 0-3) and high bytes

  __host__ static TurboK8V3Fragments make(const TurboKvReader<8, 3>& kv) {
    TurboK8V3Fragments f{};
    f.kv = kv;
    for (int e = 0; e < 8; ++e) {
      const __half h = __float2half_rn(kv.codebook[e]);
      const auto bits = *reinterpret_cast<const uint16_t*>(&h);
      f.lo[e / 4] |= static_cast<uint32_t>(bits & 0xFF) << (8 * (e % 4));
      f.hi[e / 4] |= static_cast<uint32_t>(bits >> 8) << (8 * (e % 4));
    }
    return f;
  }
  // The planes' alignment the loads assume.
  __host__ static bool aligned(const TurboKvReader<8, 3>& kv) {
    const auto at = [](const void* p, uintptr_t n) {
      return reinterpret_cast<uintptr_t>(p) % n == 0;
    };
    return at(kv.k, 16) && at(kv.k_scales, 4 * kScaleWords) && at(kv.k_zeros, 4 * kScaleWords) &&
           at(kv.v, 4) && at(kv.v_scales, 2);
  }

  // my_row: lane j holds tile key (j mod 16)'s row, -1 past the part's end (read as row 0,
  // decoded as zeros).
  __device__ __forceinline__ Raw fetch(int my_row, int g, int c) const {
    Raw raw;
    raw.valid = 0;
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const int row = __shfl_sync(kFullMask, my_row, 8 * n + g);
      raw.valid |= row >= 0 ? 1u << n : 0u;
      const uint64_t r = static_cast<uint32_t>(row >= 0 ? row : 0);  // one IMAD.WIDE per offset
      const auto* codes = reinterpret_cast<const uint4*>(kv.k + r * kD + 16 * c);
#pragma unroll
      for (int j = 0; j < kChunks; ++j) raw.k[n][j] = codes[4 * j];
      load_words(kv.k_scales + r * (kD / 32), raw.ks[n]);
      load_words(kv.k_zeros + r * (kD / 32), raw.kz[n]);
    }
    const int offset = kValueBytes * g;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const int row = __shfl_sync(kFullMask, my_row, 2 * c + (kk & 1) + 8 * (kk >> 1));
      raw.valid |= row >= 0 ? 4u << kk : 0u;
      const uint64_t r = static_cast<uint32_t>(row >= 0 ? row : 0);
      const auto* words =
          reinterpret_cast<const uint32_t*>(kv.v + r * (3 * kD / 8) + (offset & ~3));
      raw.v[kk][0] = words[0];
      // head_dim 64: 3 bytes at 3g span a second word only from byte 2 of the first on (and a
      // row's last lane must not read past the row).
      raw.v[kk][1] = kD != 64 || (offset & 3) >= 2 ? words[1] : 0u;
      if constexpr (kValueWords == 3) raw.v[kk][2] = words[2];
      raw.vs[kk] =
          reinterpret_cast<const uint16_t*>(kv.v_scales)[r * (kD / 32) + kValueDims * g / 32];
    }
    return raw;
  }

  // Sᵀ = K·Qᵀ for the tile (keys as the mma's rows: one m16n8k16 per k-step for all 16 keys, and
  // Q's fragments are the B operand as they are): st[0], st[1] = key g, heads 2c, 2c + 1;
  // st[2], st[3] = key g + 8.
  __device__ __forceinline__ void scores(const Raw& raw, const uint32_t (&qf)[kD / 16][2], int c,
                                         float (&st)[4]) const {
    // Group 2j + c / 2 is word j's low or high half.
    const uint32_t pick_scale = (c & 2) ? 0x3232u : 0x1010u;
    const __half2 bias = __float2half2_rn(1152.0f);  // 1024 + 128: int8 code + 128 = byte ^ 0x80
    st[0] = st[1] = st[2] = st[3] = 0.0f;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      __half2 scale[2], zero_scaled[2];
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        // No key: scale 0, so k̂ = 0.
        const uint32_t key_mask = (raw.valid >> n) & 1u ? 0xFFFFFFFFu : 0u;
        scale[n] = as_half2(prmt(raw.ks[n][j], 0u, pick_scale) & key_mask);
        zero_scaled[n] = __hmul2(as_half2(prmt(raw.kz[n][j], 0u, pick_scale)), scale[n]);
      }
      const uint32_t words[2][4] = {{raw.k[0][j].x, raw.k[0][j].y, raw.k[0][j].z, raw.k[0][j].w},
                                    {raw.k[1][j].x, raw.k[1][j].y, raw.k[1][j].z, raw.k[1][j].w}};
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        uint32_t a[4];  // rows g (key g) and g + 8 (key g + 8) × this k-step's dims
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          const uint32_t x = words[n][u] ^ 0x80808080u;
          const __half2 q01 = __hsub2(as_half2(prmt(x, 0x64646464u, 0x4140u)), bias);
          const __half2 q23 = __hsub2(as_half2(prmt(x, 0x64646464u, 0x4342u)), bias);
          a[n] = as_u32(__hfma2(q01, scale[n], zero_scaled[n]));
          a[2 + n] = as_u32(__hfma2(q23, scale[n], zero_scaled[n]));
        }
        mma16816<T>(st, a, qf[4 * j + u][0], qf[4 * j + u][1]);
      }
    }
  }

  // Oᵀ += Vᵀ·Pᵀ for the tile (p: Pᵀ's B fragment).
  __device__ __forceinline__ void accumulate(const Raw& raw, int g, const uint32_t (&p)[2],
                                             float (&o)[kD / 16][4]) const {
    const int shift = 8 * ((kValueBytes * g) & 3);
    // This lane's codes of each key from bit 0: dims 0..7 in bits 0..23, 8..15 in 24..47, ...
    uint32_t codes[4][kValueWords];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
      for (int w = 0; w + 1 < kValueWords; ++w)
        codes[kk][w] = __funnelshift_r(raw.v[kk][w], raw.v[kk][w + 1], shift);
      codes[kk][kValueWords - 1] = raw.v[kk][kValueWords - 1] >> shift;
    }
    __half2 scale[2];  // keys (2c, 2c + 1) and (2c + 8, 2c + 9); no key: scale 0
#pragma unroll
    for (int pair = 0; pair < 2; ++pair) {
      const uint32_t mask = ((raw.valid >> (2 + 2 * pair)) & 1u ? 0x0000FFFFu : 0u) |
                            ((raw.valid >> (3 + 2 * pair)) & 1u ? 0xFFFF0000u : 0u);
      scale[pair] = as_half2(prmt(raw.vs[2 * pair], raw.vs[2 * pair + 1], 0x5410u) & mask);
    }
#pragma unroll
    for (int q8 = 0; q8 < kValueDims / 8; ++q8) {  // 8 dims: 24 bits of each key's codes
      const int bit = 24 * q8, w = bit / 32;
      uint32_t sel[4];  // the eight 3-bit codes spread into nibbles: prmt selectors
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const uint32_t next = w + 1 < kValueWords ? codes[kk][w + 1] : 0u;
        uint32_t x = __funnelshift_r(codes[kk][w], next, bit % 32) & 0xFFFFFFu;
        x = (x & 0xFFFu) | ((x & 0xFFF000u) << 4);
        x = (x & 0x003F003Fu) | ((x & 0x0FC00FC0u) << 2);
        sel[kk] = (x & 0x07070707u) | ((x & 0x38383838u) << 1);
      }
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // dims 8·q8 + 4·half .. + 3: m-tiles i, i + 1
        const int i = (8 * q8 + 4 * half) / 2;
        uint32_t a[2][4];  // the two m-tiles' A fragments
#pragma unroll
        for (int pair = 0; pair < 2; ++pair) {  // keys 2c, 2c + 1 / 2c + 8, 2c + 9
          const uint32_t sa = sel[2 * pair] >> (16 * half), sb = sel[2 * pair + 1] >> (16 * half);
          const uint32_t lo_a = prmt(lo[0], lo[1], sa), hi_a = prmt(hi[0], hi[1], sa);
          const uint32_t lo_b = prmt(lo[0], lo[1], sb), hi_b = prmt(hi[0], hi[1], sb);
          // Dims 0, 1 then 2, 3 of the four: (key a, key b) f16 pairs.
          const uint32_t l01 = prmt(lo_a, lo_b, 0x5140u), h01 = prmt(hi_a, hi_b, 0x5140u);
          const uint32_t l23 = prmt(lo_a, lo_b, 0x7362u), h23 = prmt(hi_a, hi_b, 0x7362u);
          const uint32_t dims[4] = {prmt(l01, h01, 0x5140u), prmt(l01, h01, 0x7362u),
                                    prmt(l23, h23, 0x5140u), prmt(l23, h23, 0x7362u)};
#pragma unroll
          for (int d = 0; d < 4; ++d) {
            // dim 2i' + h of m-tile i' = i + d / 2 is its row g + 8h: register h + 2·pair.
            a[d / 2][(d % 2) + 2 * pair] = as_u32(__hmul2(as_half2(dims[d]), scale[pair]));
          }
        }
        mma16816<T>(o[i], a[0], p[0], p[1]);
        mma16816<T>(o[i + 1], a[1], p[0], p[1]);
      }
    }
  }
};

template <int kD, int kWarps>
__global__ void __launch_bounds__(32 * kWarps,
                                  tc_min_blocks<TurboK8V3Fragments<kD>::kMinBlocks, kWarps>())
    decode_turbo_k8v3_kernel(const AttnArgs a, const TurboK8V3Fragments<kD> src) {
  using Source = TurboK8V3Fragments<kD>;
  using T = typename Source::T;
  extern __shared__ __align__(16) unsigned char smem[];
  // The task, the block-table lookups and the first tiles of keys older than the query's own need
  // nothing from the kernel before us (q and this step's K/V are its output): they go out before
  // the wait (device/attention_decode_tc.cuh does the same).
  const TcDecodeTask task(a);
  if (!task.active) return;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, c = lane & 3;
  auto row_of = [&](int t) { return task.row(a, task.tile_start(t) + (lane & (kTcKeys - 1))); };
  // Tiles t + 1 .. t + kAhead − 1 are in flight (in registers) while tile t is consumed, and
  // tile t + kAhead's loads go out as it is (at kAhead 1 the block's other warps hide them); the
  // block-table lookups run a tile further ahead.
  typename Source::Raw raw[Source::kAhead];
  const bool early = a.early_fetch && task.settled(Source::kAhead - 1);
  if (early) {
#pragma unroll
    for (int k = 0; k < Source::kAhead; ++k) raw[k] = src.fetch(row_of(k), g, c);
  }
  wait_prior_grid();
  launch_dependents();

  uint32_t qf[kD / 16][2];
  load_q_fragments<T, kD>(
      a, task, g, [c](int s, int h) { return 64 * (s / 4) + 16 * c + 4 * (s % 4) + 2 * h; }, qf);
  TcHeadColumnsSoftmax<T, kD> soft;
  auto consume = [&](const typename Source::Raw& raw, int t) {
    float st[4];
    src.scores(raw, qf, c, st);
    uint32_t p[2];
    soft.probabilities(a, st, task.tile_start(t), task.last, g, p);
    src.accumulate(raw, g, p, soft.o);
  };

  const int tiles = task.tiles;
  if (!early) {
#pragma unroll
    for (int k = 0; k < Source::kAhead; ++k) raw[k] = src.fetch(row_of(k), g, c);
  }
  int row_next = row_of(Source::kAhead);
  for (int t = 0; t < tiles; t += Source::kAhead) {
#pragma unroll
    for (int k = 0; k < Source::kAhead; ++k) {
      if (t + k >= tiles) break;
      consume(raw[k], t + k);
      // Unconditional (a tile past the end reads row 0 and is never consumed): a conditional
      // load merges two values into raw[k], and the register copy that takes makes the warp
      // wait for the load right here.
      raw[k] = src.fetch(row_next, g, c);
      row_next = row_of(t + k + Source::kAhead + 1);
    }
  }
  constexpr int kValueDims = Source::kValueDims;
  soft.template write_partials<kWarps>(a, task, smem,
                                       [g](int i, int h) { return kValueDims * g + 2 * i + h; });
}

// False when the planes are not aligned for the fragment loads (the caller keeps another path).
template <int kD>
bool launch_decode_turbo_k8v3(const AttnArgs& args, const TurboKvReader<8, 3>& kv,
                              cudaStream_t stream) {
  using Source = TurboK8V3Fragments<kD>;
  if (!Source::aligned(kv)) return false;
  if (args.decode_warps == 8) {
    launch_tc_decode<decode_turbo_k8v3_kernel<kD, 8>, 8, sizeof(TcPartials<kD, 8>)>(
        args, Source::make(kv), stream, "decode_turbo_k8v3_kernel");
  } else {
    launch_tc_decode<decode_turbo_k8v3_kernel<kD, kTcDecodeWarps>, kTcDecodeWarps,
                     sizeof(TcPartials<kD>)>(args, Source::make(kv), stream,
                                             "decode_turbo_k8v3_kernel");
  }
  return true;
}

}  // namespace ringlm::cuda::device
