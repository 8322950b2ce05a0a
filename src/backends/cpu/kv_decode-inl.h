// SIMD decoders of one (token, kv head) row of a quantized KV cache into f32 (Highway "-inl"
// header: included once per target from a kernel file, after hwy/highway.h). Each gives exactly
// the codec's values (kv/affine_codec.h, kv/turbo_codec.h): per element the same f32 operations
// in the same order. None can be changed by FMA contraction: turbo keys add before they multiply,
// values only multiply, and an affine bf16 scale times a code < 256 is exact in f32 (8 + 8
// significant bits), so scale·q + bias rounds once, fused or not.
//
// Codes are an LSB-first bit stream (code i at bits [i·b, (i+1)·b)), so 8 codes fill exactly b
// bytes: a row is decoded in byte-aligned units of 8 codes, into vectors of up to 8 f32 lanes.

// Per-target include guard (toggled by foreach_target.h).
#if defined(RINGLM_BACKENDS_CPU_KV_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef RINGLM_BACKENDS_CPU_KV_DECODE_INL_H_
#undef RINGLM_BACKENDS_CPU_KV_DECODE_INL_H_
#else
#define RINGLM_BACKENDS_CPU_KV_DECODE_INL_H_
#endif

#include <hwy/highway.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/simd-inl.h"  // RINGLM_UNROLL
#include "core/dtype.h"
#include "kv/turbo_codec.h"

HWY_BEFORE_NAMESPACE();
namespace ringlm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

static_assert(std::endian::native == std::endian::little, "KV codes assume little-endian");

// Up to 8 f32 lanes: one unit of 8 codes is one vector on AVX2/AVX3, two on 4-lane targets.
using DecodeTag = hn::CappedTag<float, 8>;
constexpr size_t kCodeUnit = 8;
// Codes per unrolled step: every group (affine 32/64/128, TurboQuant 32) is whole blocks.
constexpr size_t kCodeBlock = 32;
static_assert(kv::kTurboGroup == kCodeBlock, "a TurboQuant group is one block");

// Calls fn(unit, h, o) for each vector of L codes of the block of 32 codes at `block` (a
// kBits-bit stream): `unit` is the 8-code unit holding them, h their first code in the unit, o
// their offset in the block. Fully unrolled (four independent vectors on AVX2/AVX3).
template <int kBits, class Fn>
HWY_INLINE void ForEachVectorOfBlock(size_t L, const uint8_t* HWY_RESTRICT block, Fn&& fn) {
  RINGLM_UNROLL for (size_t o = 0; o < kCodeBlock; o += L) {
    fn(block + o / kCodeUnit * kBits, o % kCodeUnit, o);
  }
}

// Bit shift of code c of a unit within the 32-bit word it is read from, and whether that word is
// the unit's bits [8, 40) (a 5-bit code that crosses bit 32) rather than [0, 32).
template <int kBits>
struct UnitLayout {
  static constexpr bool IsHigh(size_t c) { return c * kBits + kBits > 32; }
  static constexpr uint32_t Shift(size_t c) {
    return static_cast<uint32_t>(IsHigh(c) ? c * kBits - 8 : c * kBits);
  }
  alignas(32) static constexpr uint32_t kShifts[kCodeUnit] = {
      Shift(0), Shift(1), Shift(2), Shift(3), Shift(4), Shift(5), Shift(6), Shift(7)};
  alignas(32) static constexpr uint32_t kHighMask[kCodeUnit] = {
      IsHigh(0) ? ~0u : 0u, IsHigh(1) ? ~0u : 0u, IsHigh(2) ? ~0u : 0u, IsHigh(3) ? ~0u : 0u,
      IsHigh(4) ? ~0u : 0u, IsHigh(5) ? ~0u : 0u, IsHigh(6) ? ~0u : 0u, IsHigh(7) ? ~0u : 0u};
};

// Codes [h, h + Lanes) of the unit at `unit` (8 codes in kBits bytes), unsigned, one per lane.
template <int kBits, class DU>
HWY_INLINE hn::Vec<DU> UnpackUnit(DU du, const uint8_t* HWY_RESTRICT unit, size_t h) {
  if constexpr (kBits == 8) {
    const hn::Rebind<uint8_t, DU> du8;
    return hn::PromoteTo(du, hn::LoadU(du8, unit + h));
  } else {
    static_assert(kBits >= 2 && kBits <= 5, "unit layout covers 2..5 and 8 bits");
    // Exactly the unit's bytes, little-endian (GCC merges these into one or two loads; a memcpy
    // of 3 or 5 bytes into a zeroed word measured much slower: k8v3 99 vs 143 tok/s end to end).
    uint64_t bits = 0;
    RINGLM_UNROLL for (int i = 0; i < kBits; ++i) bits |= uint64_t{unit[i]} << (8 * i);
    auto words = hn::Set(du, static_cast<uint32_t>(bits));
    if constexpr (8 * kBits > 32) {
      const auto high = hn::Set(du, static_cast<uint32_t>(bits >> 8));
      words = hn::IfThenElse(hn::MaskFromVec(hn::Load(du, UnitLayout<kBits>::kHighMask + h)), high,
                             words);
    }
    const auto shifts = hn::Load(du, UnitLayout<kBits>::kShifts + h);
    return hn::And(hn::Shr(words, shifts), hn::Set(du, (1u << kBits) - 1u));
  }
}

// dst = scale·q + bias per group (the codec's rounded product, then the sum) of an affine row.
template <int kBits>
HWY_INLINE void DecodeAffineRow(const uint32_t* HWY_RESTRICT codes,  // U32[D·kBits/32]
                                const bf16_t* HWY_RESTRICT scales,   // BF16[D/group]
                                const bf16_t* HWY_RESTRICT biases,   // BF16[D/group]
                                size_t D, size_t group, float* HWY_RESTRICT dst) {  // F32[D]
  const DecodeTag df;
  const hn::RebindToUnsigned<DecodeTag> du;
  const hn::RebindToSigned<DecodeTag> di;
  const size_t L = hn::Lanes(df);
  const auto* bytes = reinterpret_cast<const uint8_t*>(codes);
  for (size_t g0 = 0, gi = 0; g0 < D; g0 += group, ++gi) {
    const auto scale = hn::Set(df, bf16_to_f32(scales[gi]));
    const auto bias = hn::Set(df, bf16_to_f32(biases[gi]));
    for (size_t c = g0; c < g0 + group; c += kCodeBlock) {
      ForEachVectorOfBlock<kBits>(
          L, bytes + c * kBits / 8, [&](const uint8_t* unit, size_t h, size_t o) {
            const auto q = hn::ConvertTo(df, hn::BitCast(di, UnpackUnit<kBits>(du, unit, h)));
            hn::StoreU(hn::Add(hn::Mul(scale, q), bias), df, dst + c + o);
          });
    }
  }
}

// dst = (q + zero)·scale per group of 32 of a TurboQuant key row (8-bit codes are int8).
template <int kBits>
HWY_INLINE void DecodeTurboKeyRow(const uint8_t* HWY_RESTRICT codes,    // U8[D·kBits/8]
                                  const f16_t* HWY_RESTRICT scales,     // F16[D/32]
                                  const f16_t* HWY_RESTRICT zeros,      // F16[D/32]
                                  size_t D, float* HWY_RESTRICT dst) {  // F32[D]
  const DecodeTag df;
  const hn::RebindToUnsigned<DecodeTag> du;
  const hn::RebindToSigned<DecodeTag> di;
  const size_t L = hn::Lanes(df);
  constexpr auto kGroup = static_cast<size_t>(kv::kTurboGroup);
  for (size_t g0 = 0, gi = 0; g0 < D; g0 += kGroup, ++gi) {
    const auto zero = hn::Set(df, f16_to_f32(zeros[gi]));
    const auto scale = hn::Set(df, f16_to_f32(scales[gi]));
    ForEachVectorOfBlock<kBits>(
        L, codes + g0 * kBits / 8, [&](const uint8_t* unit, size_t h, size_t o) {
          hn::Vec<decltype(di)> q;
          if constexpr (kBits == 8) {
            const hn::Rebind<int8_t, decltype(di)> di8;
            q = hn::PromoteTo(di, hn::LoadU(di8, reinterpret_cast<const int8_t*>(unit) + h));
          } else {
            q = hn::BitCast(di, UnpackUnit<kBits>(du, unit, h));
          }
          hn::StoreU(hn::Mul(hn::Add(hn::ConvertTo(df, q), zero), scale), df, dst + g0 + o);
        });
  }
}

// centroids[q] per lane. `centroids` holds 2^kBits values, padded with readable floats to at
// least 8 (a whole vector). Codebooks of up to four vectors are looked up in registers (one
// permute per vector, then selects on the code's high bits); larger ones gather.
template <int kBits, class DF, class DU>
HWY_INLINE hn::Vec<DF> LookupCentroids(DF df, DU du, const float* HWY_RESTRICT centroids,
                                       hn::Vec<DU> q) {
  constexpr size_t kEntries = size_t{1} << kBits;
  constexpr size_t kLanes = hn::MaxLanes(DF());
  if constexpr (kEntries <= kLanes) {
    return hn::TableLookupLanes(hn::LoadU(df, centroids), hn::IndicesFromVec(df, q));
  } else if constexpr (kEntries <= 4 * kLanes) {
    const auto idx = hn::IndicesFromVec(df, hn::And(q, hn::Set(du, kLanes - 1)));
    const auto table = [&](size_t t) {
      return hn::TableLookupLanes(hn::LoadU(df, centroids + t * kLanes), idx);
    };
    const auto bit_set = [&](size_t bit) {
      return hn::RebindMask(
          df, hn::Ne(hn::And(q, hn::Set(du, static_cast<uint32_t>(bit))), hn::Zero(du)));
    };
    const auto low = hn::IfThenElse(bit_set(kLanes), table(1), table(0));
    if constexpr (kEntries == 2 * kLanes) {
      return low;
    } else {
      const auto high = hn::IfThenElse(bit_set(kLanes), table(3), table(2));
      return hn::IfThenElse(bit_set(2 * kLanes), high, low);
    }
  } else {
    const hn::RebindToSigned<DF> di;
    return hn::GatherIndex(df, centroids, hn::BitCast(di, q));
  }
}

// dst = centroid[q]·scale per group of 32: the rotated reconstruction ŷ of a TurboQuant value row.
template <int kBits>
HWY_INLINE void DecodeTurboValueRow(const uint8_t* HWY_RESTRICT codes,    // U8[D·kBits/8]
                                    const f16_t* HWY_RESTRICT scales,     // F16[D/32]
                                    const float* HWY_RESTRICT centroids,  // F32[max(2^kBits, 8)]
                                    size_t D, float* HWY_RESTRICT dst) {  // F32[D]
  const DecodeTag df;
  const hn::RebindToUnsigned<DecodeTag> du;
  const size_t L = hn::Lanes(df);
  constexpr auto kGroup = static_cast<size_t>(kv::kTurboGroup);
  for (size_t g0 = 0, gi = 0; g0 < D; g0 += kGroup, ++gi) {
    const auto scale = hn::Set(df, f16_to_f32(scales[gi]));
    ForEachVectorOfBlock<kBits>(
        L, codes + g0 * kBits / 8, [&](const uint8_t* unit, size_t h, size_t o) {
          const auto y = LookupCentroids<kBits>(df, du, centroids, UnpackUnit<kBits>(du, unit, h));
          hn::StoreU(hn::Mul(y, scale), df, dst + g0 + o);
        });
  }
}

// Calls fn(std::integral_constant<int, bits>{}) for a TurboQuant width (2, 3, 4, 5 or 8; the
// caller validated it — anything else decodes as 8).
template <class Fn>
HWY_INLINE void WithTurboBits(int bits, Fn&& fn) {
  switch (bits) {
    case 2:
      return fn(std::integral_constant<int, 2>{});
    case 3:
      return fn(std::integral_constant<int, 3>{});
    case 4:
      return fn(std::integral_constant<int, 4>{});
    case 5:
      return fn(std::integral_constant<int, 5>{});
    default:
      return fn(std::integral_constant<int, 8>{});
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace ringlm::cpu
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
