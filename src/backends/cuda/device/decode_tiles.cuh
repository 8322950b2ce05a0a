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
#include "backends/cuda/device/decode_tc_common.cuh"
#include "backends/cuda/device/kv_affine.cuh"
#include "backends/cuda/device/kv_load.cuh"
#include "backends/cuda/device/kv_turbo.cuh"
#include "backends/cuda/device/mma.cuh"

namespace ringlm::cuda::device {

template <typename T, int kD>
struct TcTile {
  static constexpr int kStride = kD + 8;  // padded rows: conflict-free ldmatrix
  T k[kTcKeys][kStride];
  T v[kTcKeys][kStride];
};

// 16-bit dense K/V, copied as stored by cp.async: 16 bytes per lane, whole rows per
// instruction. Two other shapes lost on the H200 (docs/benchmarks.md, thirteenth session): two
// lanes per key (32 bytes of 16 rows per instruction) up to 27 %, one bulk copy (TMA) per
// 256-byte row 10 % at 32k × 1.
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
      const uint64_t off = uint64_t{static_cast<uint32_t>(row >= 0 ? row : 0)} * kD + d0;
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
      *reinterpret_cast<uint4*>(&dst.k[key][d0]) = pack8<T>(kx);
      *reinterpret_cast<uint4*>(&dst.v[key][d0]) = pack8<T>(vx);
    }
  }
};

// Affine 4-/8-bit K/V at head dims 64 and 128: the codes, scales and biases of a tile are loaded
// into registers at fetch — two tiles ahead of the math, where ReaderTiles loads at store — and
// decoded at store exactly as the reader decodes (f32, rounded to bf16): the same tile bits.
// Lane (key j of a pass, chunk) covers 16 dims of one key row: one group, 16 or 8 code bytes.
template <int kBits, int kGroup, int kD, int MinBlocks = 2>
struct AffineTiles {
  static_assert(kD == 64 || kD == 128, "AffineTiles: head dims 64 and 128");
  using T = __nv_bfloat16;
  static constexpr int kStages = 1;
  static constexpr int kMinBlocks = MinBlocks;  // 2: up to 255 registers; 3: up to 168
  static constexpr int kLanesPerRow = kD / 16;
  static constexpr int kRowsPerPass = 32 / kLanesPerRow;
  static constexpr int kPasses = kTcKeys / kRowsPerPass;
  static constexpr int kWords = 16 * kBits / 32;  // code words of 16 dims
  static constexpr int kRowWords = kD * kBits / 32;
  struct Raw {
    uint32_t k[kPasses][kWords], v[kPasses][kWords];
    __nv_bfloat16 ks[kPasses], kb[kPasses], vs[kPasses], vb[kPasses];
    uint32_t valid;  // bit p: the key of pass p exists (else the tile gets zeros)
  };
  AffineKvReader<kBits, kGroup> kv;

  // The code planes' alignment the loads assume (16-byte loads of int8 codes).
  __host__ static bool aligned(const AffineKvReader<kBits, kGroup>& r) {
    constexpr uintptr_t kAlign = 4 * kWords;
    return reinterpret_cast<uintptr_t>(r.k) % kAlign == 0 &&
           reinterpret_cast<uintptr_t>(r.v) % kAlign == 0;
  }

  __device__ __forceinline__ Raw fetch(int my_row, int lane, TcTile<T, kD>&) const {
    Raw raw;
    raw.valid = 0;
    const int d0 = 16 * (lane % kLanesPerRow);
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      const int row = __shfl_sync(kFullMask, my_row, p * kRowsPerPass + lane / kLanesPerRow);
      raw.valid |= row >= 0 ? 1u << p : 0u;
      const uint64_t r = static_cast<uint32_t>(row >= 0 ? row : 0);
      const uint64_t word = r * kRowWords + d0 * kBits / 32;
      load_words(kv.k + word, raw.k[p]);
      load_words(kv.v + word, raw.v[p]);
      const uint64_t group = r * (kD / kGroup) + d0 / kGroup;
      raw.ks[p] = kv.k_scales[group];
      raw.kb[p] = kv.k_biases[group];
      raw.vs[p] = kv.v_scales[group];
      raw.vb[p] = kv.v_biases[group];
    }
    return raw;
  }

  __device__ __forceinline__ void store(const Raw& raw, TcTile<T, kD>& dst, int lane) const {
    const int d0 = 16 * (lane % kLanesPerRow);
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      const int key = p * kRowsPerPass + lane / kLanesPerRow;
      const bool valid = (raw.valid >> p) & 1u;
      decode_row(raw.k[p], raw.ks[p], raw.kb[p], valid, &dst.k[key][d0]);
      decode_row(raw.v[p], raw.vs[p], raw.vb[p], valid, &dst.v[key][d0]);
    }
  }

 private:
  // 16 dims: scale·code rounded to f32, + bias (kv_affine.cuh), rounded to bf16; zeros if !valid.
  // A code becomes the float 2^23 + code with one byte permute (prmt puts its byte under the
  // exponent 0x4B), then exactly the code by one subtraction (code_to_float's trick).
  __device__ __forceinline__ static void decode_row(const uint32_t (&words)[kWords],
                                                    __nv_bfloat16 scale, __nv_bfloat16 bias,
                                                    bool valid, T* out) {
    // One code per byte: int8 as stored; int4 split into the even and the odd codes of a word.
    constexpr int kByteWords = kBits == 8 ? kWords : 2 * kWords;
    uint32_t bytes[kByteWords];
#pragma unroll
    for (int w = 0; w < kWords; ++w) {
      if constexpr (kBits == 8) {
        bytes[w] = words[w];
      } else {
        bytes[2 * w] = words[w] & 0x0F0F0F0Fu;             // codes 8w, 8w + 2, 8w + 4, 8w + 6
        bytes[2 * w + 1] = (words[w] >> 4) & 0x0F0F0F0Fu;  // codes 8w + 1, 8w + 3, ...
      }
    }
    auto code = [&](int i) {  // code i as 2^23 + code
      const int word = kBits == 8 ? i / 4 : 2 * (i / 8) + (i % 2);
      const int byte = kBits == 8 ? i % 4 : (i % 8) / 2;
      const uint32_t bits = prmt(bytes[word], 0x4B000000u, 0x7540u | static_cast<uint32_t>(byte));
      return __fsub_rn(__uint_as_float(bits), 8388608.0f);
    };
    const float sc = __bfloat162float(scale), bi = __bfloat162float(bias);
    uint32_t packed[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float x0 = __fadd_rn(__fmul_rn(sc, code(2 * i)), bi);
      const float x1 = __fadd_rn(__fmul_rn(sc, code(2 * i + 1)), bi);
      packed[i] = valid ? pack2<T>(x0, x1) : 0u;
    }
    auto* o = reinterpret_cast<uint4*>(out);
    o[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    o[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
  }
};

// The source for a reader: cp.async for 16-bit dense K/V, the reader otherwise (TurboQuant k8v3
// has its own kernel: device/attention_decode_turbo.cuh).
template <typename Kv, int kD>
struct TileSourceFor {
  using type = ReaderTiles<Kv, kD>;
};
template <typename E, int kD>
struct TileSourceFor<DenseKvReader<E>, kD> {
  using type = DenseTiles<E, kD>;
};
template <typename Kv, int kD>
__host__ typename TileSourceFor<Kv, kD>::type make_tile_source(const Kv& kv) {
  using Source = typename TileSourceFor<Kv, kD>::type;
  Source source{};
  source.kv = kv;
  return source;
}

}  // namespace ringlm::cuda::device
