// Tile sources of the tensor-core decode kernel (device/attention_decode_tc.cuh): how one warp
// brings a tile of 16 keys' K and V rows into its shared-memory stage as 16-bit values.
//
// A source has
//   using T;                      the tile dtype (the mma's input type)
//   kMinBlocks;                   blocks per SM the registers must allow (launch bounds)
//   kStages;                      2: fetch writes the stage asynchronously (cp.async), the kernel
//                                 double-buffers; 1: fetch loads registers, store writes
//                                 the one stage
//   struct Raw;                   what fetch leaves in registers for store
//   Raw fetch(my_row, lane, dst); starts bringing the tile to dst (global loads in flight)
//   void store(raw, dst, lane);   finishes it (decodes and writes what fetch left in registers)
// my_row: lane j holds key (j mod 16)'s row (slot · kv_heads + kv head), -1 past the part's end
// (the tile gets zeros there). The loads of the next tiles are in flight while a tile is consumed.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/kv_load.cuh"
#include "backends/cuda/device/kv_turbo.cuh"
#include "backends/cuda/device/mma.cuh"

namespace ringlm::cuda::device {

constexpr int kTcKeys = 16;  // keys per tile

template <typename T, int kD>
struct TcTile {
  static constexpr int kStride = kD + 8;  // padded rows: conflict-free ldmatrix
  T k[kTcKeys][kStride];
  T v[kTcKeys][kStride];
};

// 16-bit dense K/V, copied as stored by cp.async.
template <typename E, int kD>
struct DenseTiles {
  using T = E;
  static constexpr int kStages = 2;
  static constexpr int kMinBlocks = kD <= 128 ? 3 : 1;
  struct Raw {};
  DenseKvReader<E> kv;

  __device__ __forceinline__ Raw fetch(int my_row, int lane, TcTile<T, kD>& dst) const {
    constexpr int kChunks = kD / 8;  // 16-byte chunks per row
    constexpr int kRowsPerPass = 32 / kChunks;
    const int chunk = lane % kChunks, d0 = 8 * chunk;
#pragma unroll
    for (int j = 0; j < kTcKeys / kRowsPerPass; ++j) {
      const int key = j * kRowsPerPass + lane / kChunks;
      const int row = __shfl_sync(kFullMask, my_row, key);
      const int64_t off = static_cast<int64_t>(row >= 0 ? row : 0) * kD + d0;
      cp_async16(&dst.k[key][d0], kv.k + off, row >= 0);
      cp_async16(&dst.v[key][d0], kv.v + off, row >= 0);
    }
    return {};
  }
  __device__ __forceinline__ void store(const Raw&, TcTile<T, kD>&, int) const {}
};

// Any quantized reader: decoded to f32 by the reader (the CPU codec's values) and rounded to
// bf16, all at store time (the loads are not ahead of the math).
template <typename Kv, int kD>
struct ReaderTiles {
  using T = __nv_bfloat16;
  static constexpr int kStages = 1;
  static constexpr int kMinBlocks = kD <= 128 ? 3 : 1;
  struct Raw {
    int my_row;
  };
  Kv kv;

  __device__ __forceinline__ Raw fetch(int my_row, int, TcTile<T, kD>&) const { return {my_row}; }
  __device__ __forceinline__ void store(const Raw& raw, TcTile<T, kD>& dst, int lane) const {
    constexpr int kChunks = kD / 8;
    constexpr int kRowsPerPass = 32 / kChunks;
    const int chunk = lane % kChunks, d0 = 8 * chunk;
#pragma unroll
    for (int j = 0; j < kTcKeys / kRowsPerPass; ++j) {
      const int key = j * kRowsPerPass + lane / kChunks;
      const int row = __shfl_sync(kFullMask, raw.my_row, key);
      float kx[8] = {}, vx[8] = {};
      if (row >= 0) {
        kv.template key<8>(row, d0, kx);
        kv.template value<8>(row, d0, vx);
      }
      *reinterpret_cast<uint4*>(&dst.k[key][d0]) =
          make_uint4(pack2<T>(kx[0], kx[1]), pack2<T>(kx[2], kx[3]), pack2<T>(kx[4], kx[5]),
                     pack2<T>(kx[6], kx[7]));
      *reinterpret_cast<uint4*>(&dst.v[key][d0]) =
          make_uint4(pack2<T>(vx[0], vx[1]), pack2<T>(vx[2], vx[3]), pack2<T>(vx[4], vx[5]),
                     pack2<T>(vx[6], vx[7]));
    }
  }
};

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}
__device__ __forceinline__ __half2 as_half2(uint32_t x) {
  return *reinterpret_cast<const __half2*>(&x);
}
__device__ __forceinline__ uint32_t as_u32(__half2 x) {
  return *reinterpret_cast<const uint32_t*>(&x);
}

// TurboQuant k8v3 (the default `turbo`), head_dim 64 or 128, decoded with f16x2 arithmetic:
// lane (key = lane mod 16, half = lane / 16) loads half of its key's K and V codes and scales
// ahead of use and decodes them after the math.
//   keys:   k̂ = (q + z)·s — q from the int8 code exactly (byte | 0x6400 is the f16 1024 + byte),
//           then one f16 rounding for q + z and one for the product;
//   values: centroid[c]·s — the centroid's f16 bytes picked by prmt from an 8-entry byte table,
//           then one f16 rounding for the product (values stay rotated: the caller un-rotates).
// So k̂ and v carry ≤ 2 f16 roundings (2^-10 relative), under the bf16 tiles' 2^-8.
// (A layout with kD/16 lanes per key row, fewer L1 wavefronts per load, measured slower: it
// needs more registers, 2 blocks per SM instead of 3 — docs/benchmarks.md.)
template <int kD>
struct TurboK8V3Tiles {
  static_assert(kD == 64 || kD == 128, "TurboK8V3Tiles: head_dim 64 or 128");
  using T = __half;
  static constexpr int kStages = 1;
  static constexpr int kMinBlocks = 3;
  static constexpr int kDims = kD / 2;                // dims per lane
  static constexpr int kGroups = kDims / 32;          // scale groups per lane
  static constexpr int kValueWords = 3 * kDims / 32;  // 3-bit codes of kDims dims
  struct Raw {
    uint4 k[kDims / 16];
    uint32_t v[kValueWords];
    __half ks[kGroups], kz[kGroups], vs[kGroups];
    bool valid;
  };
  TurboKvReader<8, 3> kv;
  // The f16 centroids' low bytes (lo[0]: entries 0-3, lo[1]: 4-7) and high bytes.
  uint32_t lo[2], hi[2];

  __device__ __forceinline__ Raw fetch(int my_row, int lane, TcTile<T, kD>&) const {
    const int half = lane >> 4;
    Raw raw;
    raw.valid = my_row >= 0;
    const int64_t row = raw.valid ? my_row : 0;
    const auto* kc = reinterpret_cast<const uint4*>(kv.k + row * kD + half * kDims);
#pragma unroll
    for (int i = 0; i < kDims / 16; ++i) raw.k[i] = kc[i];
    const auto* vc =
        reinterpret_cast<const uint32_t*>(kv.v + row * (3 * kD / 8) + half * 3 * kDims / 8);
#pragma unroll
    for (int i = 0; i < kValueWords; ++i) raw.v[i] = vc[i];
    const int64_t g0 = row * (kD / 32) + half * kGroups;
#pragma unroll
    for (int i = 0; i < kGroups; ++i) {
      raw.ks[i] = kv.k_scales[g0 + i];
      raw.kz[i] = kv.k_zeros[g0 + i];
      raw.vs[i] = kv.v_scales[g0 + i];
    }
    return raw;
  }

  __device__ __forceinline__ void store(const Raw& raw, TcTile<T, kD>& dst, int lane) const {
    const int key = lane & 15, half = lane >> 4;
    __half* krow = &dst.k[key][half * kDims];
    __half* vrow = &dst.v[key][half * kDims];
    const __half2 bias = __float2half2_rn(1152.0f);  // 1024 + 128: int8 code + 128 = byte ^ 0x80
#pragma unroll
    for (int i = 0; i < kDims / 8; ++i) {  // 8 dims: two words of key codes
      const int group = i / 4;
      // A row past the part's end decodes to zeros (scale 0).
      const __half2 s = __half2half2(raw.valid ? raw.ks[group] : __half(0.0f));
      const __half2 z = __half2half2(raw.kz[group]);
      const uint4& k4 = raw.k[i / 2];
      const uint32_t words[2] = {i % 2 == 0 ? k4.x : k4.z, i % 2 == 0 ? k4.y : k4.w};
      uint32_t out[4];
#pragma unroll
      for (int w = 0; w < 2; ++w) {
        const uint32_t x = words[w] ^ 0x80808080u;
        const __half2 q01 = __hsub2(as_half2(prmt(x, 0x64646464u, 0x4140u)), bias);
        const __half2 q23 = __hsub2(as_half2(prmt(x, 0x64646464u, 0x4342u)), bias);
        out[2 * w] = as_u32(__hmul2(__hadd2(q01, z), s));
        out[2 * w + 1] = as_u32(__hmul2(__hadd2(q23, z), s));
      }
      *reinterpret_cast<uint4*>(krow + 8 * i) = make_uint4(out[0], out[1], out[2], out[3]);
    }
#pragma unroll
    for (int i = 0; i < kDims / 8; ++i) {  // 8 dims: 24 bits of value codes
      const int bit = 24 * i, w = bit / 32, shift = bit % 32;
      const uint32_t next = w + 1 < kValueWords ? raw.v[w + 1] : 0u;
      uint32_t x = __funnelshift_r(raw.v[w], next, shift) & 0xFFFFFFu;
      // Spread the eight 3-bit codes into nibbles: prmt selectors.
      x = (x & 0xFFFu) | ((x & 0xFFF000u) << 4);
      x = (x & 0x003F003Fu) | ((x & 0x0FC00FC0u) << 2);
      x = (x & 0x07070707u) | ((x & 0x38383838u) << 1);
      const __half2 s = __half2half2(raw.valid ? raw.vs[i / 4] : __half(0.0f));
      uint32_t out[4];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const uint32_t sel = x >> (16 * j);
        const uint32_t lo4 = prmt(lo[0], lo[1], sel), hi4 = prmt(hi[0], hi[1], sel);
        out[2 * j] = as_u32(__hmul2(as_half2(prmt(lo4, hi4, 0x5140u)), s));
        out[2 * j + 1] = as_u32(__hmul2(as_half2(prmt(lo4, hi4, 0x7362u)), s));
      }
      *reinterpret_cast<uint4*>(vrow + 8 * i) = make_uint4(out[0], out[1], out[2], out[3]);
    }
  }
};

// The source for a reader: cp.async for 16-bit dense K/V, the f16x2 decoder for TurboQuant k8v3
// at head_dim 64/128, the reader otherwise.
template <typename Kv, int kD>
struct TileSourceFor {
  using type = ReaderTiles<Kv, kD>;
};
template <typename E, int kD>
struct TileSourceFor<DenseKvReader<E>, kD> {
  using type = DenseTiles<E, kD>;
};
template <int kD>
requires(kD == 64 || kD == 128) struct TileSourceFor<TurboKvReader<8, 3>, kD> {
  using type = TurboK8V3Tiles<kD>;
};

template <typename Kv, int kD>
__host__ typename TileSourceFor<Kv, kD>::type make_tile_source(const Kv& kv) {
  using Source = typename TileSourceFor<Kv, kD>::type;
  Source source{};
  source.kv = kv;
  if constexpr (std::is_same_v<Source, TurboK8V3Tiles<kD>>) {
    for (int e = 0; e < 8; ++e) {
      const __half h = __float2half_rn(kv.codebook[e]);
      const auto bits = *reinterpret_cast<const uint16_t*>(&h);
      source.lo[e / 4] |= static_cast<uint32_t>(bits & 0xFF) << (8 * (e % 4));
      source.hi[e / 4] |= static_cast<uint32_t>(bits >> 8) << (8 * (e % 4));
    }
  }
  return source;
}

}  // namespace ringlm::cuda::device
