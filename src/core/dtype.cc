#include "core/dtype.h"

#include "core/error.h"

namespace ringlm {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F32:
    case DType::I32:
    case DType::U32:
      return 4;
    case DType::BF16:
    case DType::F16:
      return 2;
    case DType::U8:
      return 1;
  }
  RINGLM_FAIL("unknown dtype");
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "F32";
    case DType::BF16:
      return "BF16";
    case DType::F16:
      return "F16";
    case DType::I32:
      return "I32";
    case DType::U8:
      return "U8";
    case DType::U32:
      return "U32";
  }
  RINGLM_FAIL("unknown dtype");
}

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  if (name == "F32") return DType::F32;
  if (name == "BF16") return DType::BF16;
  if (name == "F16") return DType::F16;
  if (name == "I32") return DType::I32;
  if (name == "U8") return DType::U8;
  if (name == "U32") return DType::U32;
  return std::nullopt;
}

f16_t f32_to_f16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<f16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<f16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // Subnormal or zero in f16: value = m * 2^-24 with m < 1024. Add 0.5 (in f32 arithmetic on the
    // magnitude) through the classic magic-number trick: round-to-nearest-even done by the FPU.
    float magnitude;
    std::memcpy(&magnitude, &abs, sizeof(magnitude));
    const float scaled = magnitude * 16777216.0f;  // 2^24: exact, stays in normal range
    // nearbyint under the default rounding mode rounds half to even.
    const float rounded = __builtin_nearbyintf(scaled);
    return static_cast<f16_t>(sign | static_cast<uint16_t>(rounded));
  }
  // Normal: rebias exponent, round mantissa from 23 to 10 bits to nearest even.
  const uint32_t rebased = abs - ((127u - 15u) << 23);
  const uint32_t rounding = 0xfffu + ((rebased >> 13) & 1u);
  return static_cast<f16_t>(sign | static_cast<uint16_t>((rebased + rounding) >> 13));
}

}  // namespace ringlm
