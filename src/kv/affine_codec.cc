#include "kv/affine_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace ringlm::kv {

static_assert(std::endian::native == std::endian::little,
              "the packed layout is MLX's byte stream viewed as little-endian uint32 words");

void validate_affine_format(const AffineFormat& format) {
  const int b = format.bits;
  RINGLM_USER_CHECK(b == 2 || b == 3 || b == 4 || b == 5 || b == 6 || b == 8,
                    "affine quantization: bits=", b, " is not one of {2, 3, 4, 5, 6, 8}");
  const int g = format.group_size;
  RINGLM_USER_CHECK(g == 32 || g == 64 || g == 128, "affine quantization: group_size=", g,
                    " is not one of {32, 64, 128}");
}

int64_t affine_groups(int64_t n, const AffineFormat& format) {
  validate_affine_format(format);
  RINGLM_USER_CHECK(n >= 0 && n % format.group_size == 0, "affine quantization: n=", n,
                    " values is not a non-negative multiple of group_size=", format.group_size);
  return n / format.group_size;
}

int64_t affine_packed_words(int64_t n, const AffineFormat& format) {
  affine_groups(n, format);
  return n * format.bits / 32;  // n is a multiple of 32
}

namespace {

float round_by(float v, RoundingMode mode) {
  return mode == RoundingMode::HalfToEven ? std::rint(v) : std::round(v);
}

// OR-s `code` into the bit stream at code position `index` (the words must start zeroed).
void put_code(uint32_t* packed, int64_t index, int bits, uint32_t code) {
  const int64_t bit = index * bits;
  const int64_t word = bit >> 5;
  const int shift = static_cast<int>(bit & 31);
  packed[word] |= code << shift;
  if (shift + bits > 32) packed[word + 1] |= code >> (32 - shift);
}

}  // namespace

void affine_quantize(const float* x, int64_t n, const AffineFormat& format, uint32_t* packed,
                     float* scales, float* biases, RoundingMode mode, MaxInit max_init) {
  const int64_t groups = affine_groups(n, format);
  const int64_t words = n * format.bits / 32;
  std::fill(packed, packed + words, 0u);
  const int g = format.group_size;
  const float n_bins = static_cast<float>((1 << format.bits) - 1);
  const float eps = 1e-7f;
  for (int64_t gi = 0; gi < groups; ++gi) {
    const float* w = x + gi * g;
    float w_min = std::numeric_limits<float>::infinity();
    float w_max = max_init == MaxInit::Zero ? 0.0f : -std::numeric_limits<float>::infinity();
    for (int j = 0; j < g; ++j) {
      w_min = std::min(w_min, w[j]);
      w_max = std::max(w_max, w[j]);
    }
    const bool use_min = std::abs(w_min) > std::abs(w_max);
    float scale = std::max((w_max - w_min) / n_bins, eps);
    scale = use_min ? scale : -scale;
    const float edge = use_min ? w_min : w_max;
    const float q0 = round_by(edge / scale, mode);
    float bias = 0.0f;
    if (q0 != 0.0f) {
      scale = edge / q0;
      bias = edge;
    }
    for (int j = 0; j < g; ++j) {
      // fmax/fmin (not std::clamp): a NaN quotient becomes 0 instead of an undefined cast.
      const float q = std::fmin(std::fmax(round_by((w[j] - bias) / scale, mode), 0.0f), n_bins);
      put_code(packed, gi * g + j, format.bits, static_cast<uint32_t>(q));
    }
    scales[gi] = scale;
    biases[gi] = bias;
  }
}

void affine_dequantize(const uint32_t* packed, const float* scales, const float* biases, int64_t n,
                       const AffineFormat& format, float* out) {
  const int64_t groups = affine_groups(n, format);
  const int g = format.group_size;
  for (int64_t gi = 0; gi < groups; ++gi) {
    const float s = scales[gi];
    const float b = biases[gi];
    for (int j = 0; j < g; ++j) {
      const int64_t i = gi * g + j;
      out[i] = s * static_cast<float>(affine_code(packed, i, format.bits)) + b;
    }
  }
}

}  // namespace ringlm::kv
