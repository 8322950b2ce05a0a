#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace ringlm {
namespace {

// Reference conversions through wider arithmetic: the nearest representable value, ties to even.
float round_to_bf16_reference(float x) {
  // Enumerate neighbours: bf16 values bracketing x differ in the low 16 bits being cleared.
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  uint32_t lo = bits & 0xffff0000u;
  uint32_t hi = lo + 0x10000u;
  float flo, fhi;
  std::memcpy(&flo, &lo, 4);
  std::memcpy(&fhi, &hi, 4);
  double dlo = std::fabs(static_cast<double>(x) - flo),
         dhi = std::fabs(static_cast<double>(x) - fhi);
  if (dlo < dhi) return flo;
  if (dhi < dlo) return fhi;
  return ((lo >> 16) & 1u) == 0 ? flo : fhi;
}

TEST(DType, Bf16RoundTripIsExactForAllBf16Values) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    float f = bf16_to_f32(static_cast<bf16_t>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f))));
      continue;
    }
    EXPECT_EQ(f32_to_bf16(f), b);
  }
}

TEST(DType, Bf16RoundsToNearestEven) {
  uint32_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 1664525u + 1013904223u;
    uint32_t bits = state;
    float x;
    std::memcpy(&x, &bits, 4);
    if (!std::isfinite(x) || std::fabs(x) > 3e38f) continue;
    EXPECT_EQ(bf16_to_f32(f32_to_bf16(x)), round_to_bf16_reference(x)) << x;
  }
}

TEST(DType, F16RoundTripIsExactForAllF16Values) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    float f = f16_to_f32(static_cast<f16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    EXPECT_EQ(f32_to_f16(f), h) << h;
  }
}

TEST(DType, F16RoundsToNearestEvenIncludingSubnormalsAndOverflow) {
  // Each midpoint between consecutive finite halves must round to the even one.
  for (uint32_t h = 0; h < 0x7bffu; ++h) {
    double a = f16_to_f32(static_cast<f16_t>(h)), b = f16_to_f32(static_cast<f16_t>(h + 1));
    float mid = static_cast<float>((a + b) / 2);
    if (static_cast<double>(mid) != (a + b) / 2) continue;  // midpoint not exact in f32
    f16_t want = (h & 1u) == 0 ? static_cast<f16_t>(h) : static_cast<f16_t>(h + 1);
    EXPECT_EQ(f32_to_f16(mid), want) << h;
  }
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bffu);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00u);
  EXPECT_EQ(f32_to_f16(-1e9f), 0xfc00u);
  EXPECT_EQ(f32_to_f16(1e-9f), 0u);
}

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::U8), 1u);
  EXPECT_EQ(dtype_from_safetensors("BF16"), DType::BF16);
  EXPECT_FALSE(dtype_from_safetensors("F8_E4M3").has_value());
}

}  // namespace
}  // namespace ringlm
