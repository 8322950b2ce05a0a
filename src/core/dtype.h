// Element types and exact conversions between bf16/f16 and f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace ringlm {

enum class DType : uint8_t { F32, BF16, F16, I32, U8, U32 };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);
// Parses safetensors names ("F32", "BF16", ...); nullopt for types ringlm does not load.
std::optional<DType> dtype_from_safetensors(std::string_view name);

using bf16_t = uint16_t;  // raw bits of a bfloat16
using f16_t = uint16_t;   // raw bits of an IEEE half

inline float bf16_to_f32(bf16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &wide, sizeof(out));
  return out;
}

// Round to nearest even, NaN stays NaN (as torch and MLX do).
inline bf16_t f32_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_t>((bits >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<bf16_t>((bits + rounding) >> 16);
}

inline float f16_to_f32(f16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      int shift = 0;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        ++shift;
      }
      mantissa &= 0x3ffu;
      bits = sign | (static_cast<uint32_t>(127 - 15 - shift + 1) << 23) | (mantissa << 13);
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

// Round to nearest even with overflow to infinity and gradual underflow.
f16_t f32_to_f16(float value);

}  // namespace ringlm
