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
      *reinterpret_cast<uint4*>(&dst.k[key][d0]) =
          make_uint4(pack2<T>(kx[0], kx[1]), pack2<T>(kx[2], kx[3]), pack2<T>(kx[4], kx[5]),
                     pack2<T>(kx[6], kx[7]));
      *reinterpret_cast<uint4*>(&dst.v[key][d0]) =
          make_uint4(pack2<T>(vx[0], vx[1]), pack2<T>(vx[2], vx[3]), pack2<T>(vx[4], vx[5]),
                     pack2<T>(vx[6], vx[7]));
    }
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
