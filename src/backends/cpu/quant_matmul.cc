// CPU matmul with MLX affine-quantized weights: y[M, N] = x[M, K] · dequant(w)[N, K]ᵀ + bias.
//
// The weights stay packed: each tile dequantizes, one vector of L consecutive K values at a time,
// the NR weight rows it works on (codes unpacked with a lane permute and per-lane shifts, then
// scale·q + bias with a separate multiply and add, as MLX's definition), and feeds them to the
// same accumulators as the dense kernel in backends/cpu/matmul.cc: one vector accumulator per
// output over K in steps of L, one horizontal sum in the target's fixed order, then + bias. So
// the result does not depend on M, the tile or the thread split (batch invariance), and equals
// the dense kernel's on the f32 matrix dequant(w) bit for bit. K is a multiple of the group size
// (>= 32), so there is never a K tail.
//
// With more than 4 rows (prefill) the codes of a block of weight rows are dequantized once into
// an L2-sized f32 buffer (the same arithmetic, stored) that every row of x then runs over: a tile
// of the weights at a time, never the whole tensor.
//
// 2-, 4- and 8-bit codes never straddle a 32-bit word; 3-, 5- and 6-bit codes can, and take a
// scalar unpack into a small buffer per group instead (slower; MLX checkpoints are almost always
// 4- or 8-bit).

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/quant_matmul.cc"
#include "backends/cpu/hwy_config.h"  // first: selects the targets

#include <hwy/foreach_target.h>  // re-includes this file once per target

#include <hwy/highway.h>

#include "backends/cpu/simd-inl.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/matmul_split.h"
#include "backends/cpu/scalar.h"
#include "core/thread_pool.h"
#include "kv/affine_codec.h"

#ifndef RINGLM_BACKENDS_CPU_QUANT_MATMUL_SHARED_
#define RINGLM_BACKENDS_CPU_QUANT_MATMUL_SHARED_
namespace ringlm::cpu {
// One thread's share of a quantized matmul: rows [m0, m1) × columns [n0, n1).
struct QuantMatmulTask {
  const float* x;
  size_t x_stride;        // elements between rows of x
  const uint32_t* codes;  // [N, row_words]
  size_t row_words;       // K * bits / 32
  const float* scales;    // [N, groups] widened to f32
  const float* biases;    // [N, groups]
  size_t groups;          // K / group
  size_t group;           // group size
  int bits;
  const float* bias;  // [N] f32 or nullptr
  float* y;
  size_t y_stride;
  size_t K, N;
  size_t m0, m1, n0, n1;
};
}  // namespace ringlm::cpu
#endif

HWY_BEFORE_NAMESPACE();
namespace ringlm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr size_t kWideNR = 4;
#else
constexpr size_t kWideNR = 2;
#endif
constexpr size_t NrFor(size_t mr) {
  return mr == 1 ? 4 : mr == 2 ? 4 : kWideNR;
}

constexpr size_t kMaxGroup = 128;

// Unpacks the codes of L consecutive values of one row, starting at value k, into floats. BITS is
// 2, 4 or 8 (no code straddles a word). `lane_bits` is Iota · BITS. 8-bit codes are bytes; the
// others read the words holding those codes or the L - 1 words after them, so the caller passes a
// padded copy for a row's end when it may be the end of the mapping.
template <int BITS>
HWY_INLINE hn::Vec<DF> UnpackCodes(const uint32_t* HWY_RESTRICT row, size_t k,
                                   hn::Vec<DU> lane_bits) {
  const DF df;
  const DU du;
  const DI di;
  if constexpr (BITS == 8) {  // code k is byte k of the row: one widening load
    (void)lane_bits;
    const hn::Rebind<uint8_t, DI> d8;
    const auto* bytes = reinterpret_cast<const uint8_t*>(row) + k;
    return hn::ConvertTo(df, hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(d8, bytes))));
  } else {
    const size_t first_bit = k * BITS;
    // When a vector's codes fill whole words (4-bit on AVX2 / AVX-512), every chunk starts on a
    // word boundary: the lane indices and shifts are loop-invariant and get hoisted.
    const bool word_aligned = hn::Lanes(df) * BITS % 32 == 0;
    const auto bit = word_aligned
                         ? lane_bits
                         : hn::Add(lane_bits, hn::Set(du, static_cast<uint32_t>(first_bit & 31)));
    const auto word = hn::ShiftRight<5>(bit);
    const auto shift = hn::And(bit, hn::Set(du, 31u));
    const auto words = hn::LoadU(du, row + (first_bit >> 5));
    const auto mine = hn::TableLookupLanes(words, hn::IndicesFromVec(du, word));
    const auto code = hn::And(mine >> shift, hn::Set(du, (1u << BITS) - 1u));
    return hn::ConvertTo(df, hn::BitCast(di, code));
  }
}

// y[m0 + i, n + j] for i < MR, j < NR. BITS 0: any width, unpacked by the scalar codec per group.
template <size_t MR, size_t NR, int BITS>
HWY_INLINE void Tile(const QuantMatmulTask& t, size_t m0, size_t n) {
  const DF df;
  const DU du;
  const size_t L = hn::Lanes(df);
  const float* HWY_RESTRICT x = t.x + m0 * t.x_stride;

  hn::Vec<DF> acc[MR][NR];
  RINGLM_UNROLL for (size_t i = 0; i < MR; ++i) {
    RINGLM_UNROLL for (size_t j = 0; j < NR; ++j) acc[i][j] = hn::Zero(df);
  }
  const uint32_t* rows[NR];
  RINGLM_UNROLL for (size_t j = 0; j < NR; ++j) rows[j] = t.codes + (n + j) * t.row_words;
  // The last row of the matrix may end where the mapping ends: a padded copy of its last group
  // keeps the over-reading vector loads inside our memory.
  constexpr size_t kPadWords = kMaxGroup * 8 / 32 + HWY_MAX_BYTES / sizeof(uint32_t);
  HWY_ALIGN uint32_t tail[kPadWords];
  const size_t group_words = t.group * static_cast<size_t>(t.bits) / 32;
  const bool has_last_row = BITS != 0 && n + NR == t.N;
  if (has_last_row) {
    std::memset(tail, 0, sizeof(tail));
    std::memcpy(tail, rows[NR - 1] + t.row_words - group_words, group_words * sizeof(uint32_t));
  }

  const auto lane_bits = hn::Iota(du, 0) * hn::Set(du, static_cast<uint32_t>(BITS));
  [[maybe_unused]] HWY_ALIGN float unpacked[BITS == 0 ? NR : 1][BITS == 0 ? kMaxGroup : 1];

  for (size_t g = 0; g < t.groups; ++g) {
    const size_t k0 = g * t.group;
    hn::Vec<DF> scale[NR], bias[NR];
    const uint32_t* src[NR];  // codes of row j, value k0 + c at index base[j] + c
    size_t base[NR];
    RINGLM_UNROLL for (size_t j = 0; j < NR; ++j) {
      scale[j] = hn::Set(df, t.scales[(n + j) * t.groups + g]);
      bias[j] = hn::Set(df, t.biases[(n + j) * t.groups + g]);
      src[j] = rows[j];
      base[j] = k0;
    }
    if constexpr (BITS != 0) {
      if (has_last_row && g + 1 == t.groups) {
        src[NR - 1] = tail;  // the group starts on a word boundary (groups are multiples of 32)
        base[NR - 1] = 0;
      }
    } else {
      for (size_t j = 0; j < NR; ++j)
        for (size_t c = 0; c < t.group; ++c)
          unpacked[j][c] =
              static_cast<float>(kv::affine_code(rows[j], static_cast<int64_t>(k0 + c), t.bits));
    }
    for (size_t c = 0; c < t.group; c += L) {
      hn::Vec<DF> wv[NR];
      RINGLM_UNROLL for (size_t j = 0; j < NR; ++j) {
        hn::Vec<DF> q;
        if constexpr (BITS != 0) {
          q = UnpackCodes<BITS>(src[j], base[j] + c, lane_bits);
        } else {
          q = hn::Load(df, unpacked[j] + c);
        }
        wv[j] = hn::Add(hn::Mul(q, scale[j]), bias[j]);  // not an FMA: MLX rounds the product
      }
      RINGLM_UNROLL for (size_t i = 0; i < MR; ++i) {
        const auto xv = hn::LoadU(df, x + i * t.x_stride + k0 + c);
        RINGLM_UNROLL for (size_t j = 0; j < NR; ++j) acc[i][j] = hn::MulAdd(xv, wv[j], acc[i][j]);
      }
    }
  }
  RINGLM_UNROLL for (size_t i = 0; i < MR; ++i) {
    float* HWY_RESTRICT y = t.y + (m0 + i) * t.y_stride + n;
    RINGLM_UNROLL for (size_t j = 0; j < NR; ++j) {
      const float sum = ReduceSumF32(df, acc[i][j]);
      y[j] = t.bias != nullptr ? sum + t.bias[n + j] : sum;
    }
  }
}

// Row n of dequant(w) into out[K], with exactly Tile's arithmetic (so a tile over these floats
// gives Tile's result bit for bit).
template <int BITS>
HWY_INLINE void DequantRow(const QuantMatmulTask& t, size_t n, float* HWY_RESTRICT out) {
  const DF df;
  const DU du;
  const size_t L = hn::Lanes(df);
  const uint32_t* row = t.codes + n * t.row_words;
  constexpr size_t kPadWords = kMaxGroup * 8 / 32 + HWY_MAX_BYTES / sizeof(uint32_t);
  HWY_ALIGN uint32_t tail[kPadWords];
  const size_t group_words = t.group * static_cast<size_t>(t.bits) / 32;
  const bool last_row = BITS != 0 && n + 1 == t.N;
  if (last_row) {
    std::memset(tail, 0, sizeof(tail));
    std::memcpy(tail, row + t.row_words - group_words, group_words * sizeof(uint32_t));
  }
  const auto lane_bits = hn::Iota(du, 0) * hn::Set(du, static_cast<uint32_t>(BITS));
  [[maybe_unused]] HWY_ALIGN float unpacked[BITS == 0 ? kMaxGroup : 1];
  for (size_t g = 0; g < t.groups; ++g) {
    const size_t k0 = g * t.group;
    const auto scale = hn::Set(df, t.scales[n * t.groups + g]);
    const auto bias = hn::Set(df, t.biases[n * t.groups + g]);
    const bool use_tail = last_row && g + 1 == t.groups;
    if constexpr (BITS == 0) {
      for (size_t c = 0; c < t.group; ++c)
        unpacked[c] =
            static_cast<float>(kv::affine_code(row, static_cast<int64_t>(k0 + c), t.bits));
    }
    for (size_t c = 0; c < t.group; c += L) {
      hn::Vec<DF> q;
      if constexpr (BITS != 0) {
        q = use_tail ? UnpackCodes<BITS>(tail, c, lane_bits)
                     : UnpackCodes<BITS>(row, k0 + c, lane_bits);
      } else {
        q = hn::Load(df, unpacked + c);
      }
      hn::StoreU(hn::Add(hn::Mul(q, scale), bias), df, out + k0 + c);
    }
  }
}

// Tile over dequantized rows: w[j] is row n + j of dequant(w), K floats each.
template <size_t MR, size_t NR>
HWY_INLINE void DequantizedTile(const QuantMatmulTask& t, const float* HWY_RESTRICT w, size_t m0,
                                size_t n) {
  const DF df;
  const size_t L = hn::Lanes(df);
  const size_t K = t.K;
  const float* HWY_RESTRICT x = t.x + m0 * t.x_stride;
  hn::Vec<DF> acc[MR][NR];
  RINGLM_UNROLL for (size_t i = 0; i < MR; ++i) {
    RINGLM_UNROLL for (size_t j = 0; j < NR; ++j) acc[i][j] = hn::Zero(df);
  }
  for (size_t k = 0; k < K; k += L) {  // K is a multiple of 32: no tail
    hn::Vec<DF> wv[NR];
    RINGLM_UNROLL for (size_t j = 0; j < NR; ++j) wv[j] = hn::LoadU(df, w + j * K + k);
    RINGLM_UNROLL for (size_t i = 0; i < MR; ++i) {
      const auto xv = hn::LoadU(df, x + i * t.x_stride + k);
      RINGLM_UNROLL for (size_t j = 0; j < NR; ++j) acc[i][j] = hn::MulAdd(xv, wv[j], acc[i][j]);
    }
  }
  RINGLM_UNROLL for (size_t i = 0; i < MR; ++i) {
    float* HWY_RESTRICT y = t.y + (m0 + i) * t.y_stride + n;
    RINGLM_UNROLL for (size_t j = 0; j < NR; ++j) {
      const float sum = ReduceSumF32(df, acc[i][j]);
      y[j] = t.bias != nullptr ? sum + t.bias[n + j] : sum;
    }
  }
}

template <size_t MR>
HWY_INLINE void DequantizedRowBlock(const QuantMatmulTask& t, const float* w, size_t w_row0,
                                    size_t m, size_t n0, size_t n1) {
  constexpr size_t NR = kWideNR;
  size_t n = n0;
  for (; n + NR <= n1; n += NR) DequantizedTile<MR, NR>(t, w + (n - w_row0) * t.K, m, n);
  for (; n < n1; ++n) DequantizedTile<MR, 1>(t, w + (n - w_row0) * t.K, m, n);
}

// Many rows (prefill): dequantize a block of weight rows once into an L2-sized f32 buffer and run
// every row of x over it, instead of unpacking the codes again for each 4-row tile.
template <int BITS>
void RunManyRows(const QuantMatmulTask& t) {
  const size_t block = std::max<size_t>(1, (size_t{128} << 10) / (t.K * sizeof(float)) / 8) * 8;
  std::vector<float> w(block * t.K);
  for (size_t nb = t.n0; nb < t.n1; nb += block) {
    const size_t ne = std::min(t.n1, nb + block);
    for (size_t n = nb; n < ne; ++n) DequantRow<BITS>(t, n, w.data() + (n - nb) * t.K);
    size_t m = t.m0;
    for (; m + 4 <= t.m1; m += 4) DequantizedRowBlock<4>(t, w.data(), nb, m, nb, ne);
    switch (t.m1 - m) {
      case 3:
        DequantizedRowBlock<3>(t, w.data(), nb, m, nb, ne);
        break;
      case 2:
        DequantizedRowBlock<2>(t, w.data(), nb, m, nb, ne);
        break;
      case 1:
        DequantizedRowBlock<1>(t, w.data(), nb, m, nb, ne);
        break;
      default:
        break;
    }
  }
}

template <size_t MR, int BITS>
HWY_INLINE void RowBlock(const QuantMatmulTask& t, size_t m, size_t n0, size_t n1) {
  constexpr size_t NR = NrFor(MR);
  size_t n = n0;
  for (; n + NR <= n1; n += NR) Tile<MR, NR, BITS>(t, m, n);
  for (; n < n1; ++n) Tile<MR, 1, BITS>(t, m, n);
}

// Up to 4 rows (decode): unpack in registers, streaming the codes once. More: RunManyRows.
template <int BITS>
void RunTask(const QuantMatmulTask& t) {
  if (t.m1 - t.m0 > 4) return RunManyRows<BITS>(t);
  switch (t.m1 - t.m0) {
    case 4:
      return RowBlock<4, BITS>(t, t.m0, t.n0, t.n1);
    case 3:
      return RowBlock<3, BITS>(t, t.m0, t.n0, t.n1);
    case 2:
      return RowBlock<2, BITS>(t, t.m0, t.n0, t.n1);
    case 1:
      return RowBlock<1, BITS>(t, t.m0, t.n0, t.n1);
    default:
      break;
  }
}

void QuantMatmulTaskImpl(const QuantMatmulTask& t) {
  switch (t.bits) {
    case 2:
      return RunTask<2>(t);
    case 4:
      return RunTask<4>(t);
    case 8:
      return RunTask<8>(t);
    default:
      return RunTask<0>(t);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace ringlm::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ringlm::cpu {

HWY_EXPORT(QuantMatmulTaskImpl);

void matmul_quantized(const Tensor& x, const ops::QuantizedMatrix& w, const Tensor& bias,
                      Tensor& y) {
  const auto M = static_cast<size_t>(x.shape[0]);
  const auto K = static_cast<size_t>(w.cols());
  const auto N = static_cast<size_t>(w.rows());
  if (M == 0 || N == 0) return;
  // Scales and biases widened once per call: N·K/group floats, a small fraction of the codes.
  const size_t groups = K / static_cast<size_t>(w.group_size);
  std::vector<float> scales(N * groups), biases(N * groups);
  widen_to_f32(w.scales.dtype, w.scales.data, N * groups, scales.data());
  widen_to_f32(w.biases.dtype, w.biases.data, N * groups, biases.data());
  const std::vector<float> bias_f32 = bias_in_f32(bias, N);
  QuantMatmulTask base{x.ptr<float>(),
                       static_cast<size_t>(x.strides[0]),
                       w.codes.ptr<const uint32_t>(),
                       static_cast<size_t>(w.codes.shape[1]),
                       scales.data(),
                       biases.data(),
                       groups,
                       static_cast<size_t>(w.group_size),
                       w.bits,
                       bias_f32.empty() ? nullptr : bias_f32.data(),
                       y.ptr<float>(),
                       static_cast<size_t>(y.strides[0]),
                       K,
                       N,
                       0,
                       M,
                       0,
                       N};
  if (K == 0) {  // y = bias (no groups to visit)
    for (size_t m = 0; m < M; ++m)
      for (size_t n = 0; n < N; ++n)
        y.row<float>(static_cast<int64_t>(m))[n] = bias_f32.empty() ? 0.0f : bias_f32[n];
    return;
  }
  run_split(base, M, N, [](const QuantMatmulTask& t) {
    HWY_DYNAMIC_DISPATCH(QuantMatmulTaskImpl)(t);
  });
}

void embedding_quantized(const Tensor& ids, const ops::QuantizedMatrix& table, float scale,
                         Tensor& out) {
  const int64_t M = ids.shape[0];
  const int64_t H = table.cols();
  const int64_t groups = H / table.group_size;
  const kv::AffineFormat format{table.bits, table.group_size};
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(H, 1));
  ThreadPool::global().parallel_for(M, grain, [&](int64_t b, int64_t e) {
    std::vector<float> scales(static_cast<size_t>(groups)), biases(static_cast<size_t>(groups));
    for (int64_t m = b; m < e; ++m) {
      const int64_t id = ids.ptr<const int32_t>()[m];
      const size_t at = static_cast<size_t>(id * groups) * dtype_size(table.scales.dtype);
      widen_to_f32(table.scales.dtype, static_cast<const char*>(table.scales.data) + at,
                   static_cast<size_t>(groups), scales.data());
      widen_to_f32(table.biases.dtype, static_cast<const char*>(table.biases.data) + at,
                   static_cast<size_t>(groups), biases.data());
      float* dst = out.row<float>(m);
      kv::affine_dequantize(table.codes.row<const uint32_t>(id), scales.data(), biases.data(), H,
                            format, dst);
      if (scale != 1.0f)
        for (int64_t i = 0; i < H; ++i) dst[i] *= scale;
    }
  });
}

}  // namespace ringlm::cpu
#endif  // HWY_ONCE
