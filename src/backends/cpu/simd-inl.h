// Per-target SIMD helpers shared by the CPU kernels (Highway "-inl" header: included once per
// target from a kernel file, after hwy/highway.h).

// Per-target include guard (toggled by foreach_target.h).
#if defined(RINGLM_BACKENDS_CPU_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef RINGLM_BACKENDS_CPU_SIMD_INL_H_
#undef RINGLM_BACKENDS_CPU_SIMD_INL_H_
#else
#define RINGLM_BACKENDS_CPU_SIMD_INL_H_
#endif

#include <hwy/highway.h>

// Fully unrolls a loop with a small constant trip count (keeps arrays of vectors in registers).
#ifndef RINGLM_UNROLL
#define RINGLM_UNROLL _Pragma("GCC unroll 16")
#endif

HWY_BEFORE_NAMESPACE();
namespace ringlm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Lanes(d) f32 values from memory in any storage type, widened exactly to f32.
template <class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const float* HWY_RESTRICT p) {
  return hn::LoadU(d, p);
}
// bf16 -> f32 is exact: the bf16 bits are the high half of the f32.
template <class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const hwy::bfloat16_t* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, D> du16;
  const hn::RebindToUnsigned<D> du32;
  const auto wide = hn::PromoteTo(du32, hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p)));
  return hn::BitCast(d, hn::ShiftLeft<16>(wide));
}
// f16 -> f32 is exact (F16C on AVX2/AVX3).
template <class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const hwy::float16_t* HWY_RESTRICT p) {
  const hn::Rebind<hwy::float16_t, D> df16;
  return hn::PromoteTo(d, hn::LoadU(df16, p));
}

// Horizontal sum in the target's fixed lane order.
template <class D>
HWY_INLINE float ReduceSumF32(D d, hn::Vec<D> v) {
  return hn::GetLane(hn::SumOfLanes(d, v));
}
template <class D>
HWY_INLINE float ReduceMaxF32(D d, hn::Vec<D> v) {
  return hn::GetLane(hn::MaxOfLanes(d, v));
}

// Calls out = fn(v) on every vector of n floats (out may alias in). The tail is padded with `pad`
// in a local buffer, so every element goes through the same vector code.
template <class D, class Fn>
HWY_INLINE void MapF32(D d, const float* in, float* out, size_t n, float pad, Fn&& fn) {
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(fn(hn::LoadU(d, in + i)), d, out + i);
  if (i < n) {
    HWY_ALIGN float buf[HWY_MAX_BYTES / sizeof(float)];
    for (size_t j = 0; j < L; ++j) buf[j] = i + j < n ? in[i + j] : pad;
    hn::Store(fn(hn::Load(d, buf)), d, buf);
    for (size_t j = 0; i + j < n; ++j) out[i + j] = buf[j];
  }
}

// Same with two inputs (a and b padded alike).
template <class D, class Fn>
HWY_INLINE void Map2F32(D d, const float* a, const float* b, float* out, size_t n, float pad,
                        Fn&& fn) {
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(fn(hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, out + i);
  if (i < n) {
    HWY_ALIGN float abuf[HWY_MAX_BYTES / sizeof(float)];
    HWY_ALIGN float bbuf[HWY_MAX_BYTES / sizeof(float)];
    for (size_t j = 0; j < L; ++j) {
      abuf[j] = i + j < n ? a[i + j] : pad;
      bbuf[j] = i + j < n ? b[i + j] : pad;
    }
    hn::Store(fn(hn::Load(d, abuf), hn::Load(d, bbuf)), d, abuf);
    for (size_t j = 0; i + j < n; ++j) out[i + j] = abuf[j];
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace ringlm::cpu
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
