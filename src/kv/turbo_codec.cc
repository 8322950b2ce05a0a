#include "kv/turbo_codec.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace ringlm::kv {

namespace {

struct LloydMax {
  std::vector<float> centroids, boundaries;
};

double normal_pdf(double x) {
  return std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}

// P(a < X < b) for X ~ N(0, 1), written with erfc on the side that avoids cancellation in tails.
double normal_mass(double a, double b) {
  const double r = 1.0 / std::sqrt(2.0);
  if (a >= 0) return 0.5 * (std::erfc(a * r) - std::erfc(b * r));
  if (b <= 0) return 0.5 * (std::erfc(-b * r) - std::erfc(-a * r));
  return 1.0 - 0.5 * std::erfc(-a * r) - 0.5 * std::erfc(b * r);
}

// Φ⁻¹(p) by bisection (only the starting point of the iteration needs it).
double normal_quantile(double p) {
  double lo = -40, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

LloydMax compute_lloyd_max(int bits) {
  const int levels = 1 << bits;
  // Start at the asymptotically optimal companding points (quantiles of N(0, 3)), then iterate
  // the two Lloyd-Max conditions until they hold to 1e-12.
  std::vector<double> c(static_cast<size_t>(levels)), b(static_cast<size_t>(levels - 1));
  for (int i = 0; i < levels; ++i)
    c[static_cast<size_t>(i)] = std::sqrt(3.0) * normal_quantile((i + 0.5) / levels);
  for (int iter = 0; iter < 1000000; ++iter) {
    for (size_t i = 0; i + 1 < c.size(); ++i) b[i] = 0.5 * (c[i] + c[i + 1]);
    double moved = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      const double lo = i == 0 ? -INFINITY : b[i - 1];
      const double hi = i + 1 == c.size() ? INFINITY : b[i];
      const double mass = normal_mass(lo, hi);
      const double pdf_lo = std::isinf(lo) ? 0.0 : normal_pdf(lo);
      const double pdf_hi = std::isinf(hi) ? 0.0 : normal_pdf(hi);
      const double next = mass > 0 ? (pdf_lo - pdf_hi) / mass : c[i];
      moved = std::max(moved, std::abs(next - c[i]));
      c[i] = next;
    }
    if (moved < 1e-12) break;
  }
  for (size_t i = 0; i + 1 < c.size(); ++i) b[i] = 0.5 * (c[i] + c[i + 1]);
  LloydMax out;
  for (double v : c) out.centroids.push_back(static_cast<float>(v));
  for (double v : b) out.boundaries.push_back(static_cast<float>(v));
  return out;
}

// One table per width, computed on first use; a function-local static per width, so later calls
// (per key row in attention) cost an initialized-flag check, not a lock.
const LloydMax& lloyd_max(int bits) {
  switch (bits) {
    case 2: {
      static const LloydMax t = compute_lloyd_max(2);
      return t;
    }
    case 3: {
      static const LloydMax t = compute_lloyd_max(3);
      return t;
    }
    case 4: {
      static const LloydMax t = compute_lloyd_max(4);
      return t;
    }
    case 5: {
      static const LloydMax t = compute_lloyd_max(5);
      return t;
    }
    case 8: {
      static const LloydMax t = compute_lloyd_max(8);
      return t;
    }
    default:
      RINGLM_USER_CHECK(false, "TurboQuant value codes: bits=", bits,
                        " is not one of {2, 3, 4, 5, 8}");
  }
  std::abort();  // unreachable: the check throws
}

bool power_of_two_head_dim(int d) {
  return d >= 32 && d <= 512 && (d & (d - 1)) == 0;
}

void put_code(uint8_t* codes, int i, int bits, uint32_t code) {
  const int bit = i * bits, byte = bit >> 3, shift = bit & 7;
  codes[byte] = static_cast<uint8_t>(codes[byte] | (code << shift));
  if (shift + bits > 8)
    codes[byte + 1] = static_cast<uint8_t>(codes[byte + 1] | (code >> (8 - shift)));
}

}  // namespace

const std::vector<float>& lloyd_max_centroids(int bits) {
  return lloyd_max(bits).centroids;
}
const std::vector<float>& lloyd_max_boundaries(int bits) {
  return lloyd_max(bits).boundaries;
}

namespace {
std::vector<float> make_signs(int head_dim) {
  std::vector<float> signs(static_cast<size_t>(head_dim));
  uint32_t x = 0x9E3779B9u ^ static_cast<uint32_t>(head_dim);
  for (float& s : signs) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    s = (x >> 31) == 0 ? 1.0f : -1.0f;
  }
  return signs;
}
}  // namespace

const std::vector<float>& turbo_signs(int head_dim) {
  switch (head_dim) {
    case 32: {
      static const std::vector<float> s = make_signs(32);
      return s;
    }
    case 64: {
      static const std::vector<float> s = make_signs(64);
      return s;
    }
    case 128: {
      static const std::vector<float> s = make_signs(128);
      return s;
    }
    case 256: {
      static const std::vector<float> s = make_signs(256);
      return s;
    }
    case 512: {
      static const std::vector<float> s = make_signs(512);
      return s;
    }
    default:
      RINGLM_USER_CHECK(false, "TurboQuant: head_dim ", head_dim,
                        " is not a power of two in [32, 512]");
  }
  std::abort();  // unreachable: the check throws
}

void validate_turbo(int key_bits, int value_bits, int head_dim) {
  RINGLM_USER_CHECK(key_bits == 2 || key_bits == 4 || key_bits == 5 || key_bits == 8,
                    "TurboQuant: key bits ", key_bits, " is not one of {2, 4, 5, 8}");
  RINGLM_USER_CHECK(
      value_bits == 2 || value_bits == 3 || value_bits == 4 || value_bits == 5 || value_bits == 8,
      "TurboQuant: value bits ", value_bits, " is not one of {2, 3, 4, 5, 8}");
  RINGLM_USER_CHECK(power_of_two_head_dim(head_dim), "TurboQuant: head_dim ", head_dim,
                    " is not a power of two in [32, 512] (the value rotation is a Hadamard "
                    "transform)");
}

void fwht(float* x, int n) {
  for (int h = 1; h < n; h <<= 1) {
    for (int i = 0; i < n; i += 2 * h) {
      for (int j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
}

void turbo_rotate(const float* x, int head_dim, float* y) {
  const std::vector<float>& s = turbo_signs(head_dim);
  for (int i = 0; i < head_dim; ++i) y[i] = x[i] * s[static_cast<size_t>(i)];
  fwht(y, head_dim);
  const float norm = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (int i = 0; i < head_dim; ++i) y[i] *= norm;
}

void turbo_unrotate(const float* y, int head_dim, float* x) {
  const std::vector<float>& s = turbo_signs(head_dim);
  if (x != y) std::copy(y, y + head_dim, x);
  fwht(x, head_dim);
  const float norm = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (int i = 0; i < head_dim; ++i) x[i] = x[i] * norm * s[static_cast<size_t>(i)];
}

void turbo_key_quantize(const float* x, int head_dim, int bits, uint8_t* codes, f16_t* scales,
                        f16_t* zeros) {
  std::fill(codes, codes + turbo_code_bytes(head_dim, bits), uint8_t{0});
  const bool is_signed = bits == 8;
  const float qmax = is_signed ? 127.0f : static_cast<float>((1 << bits) - 1);
  const float qmin = is_signed ? -127.0f : 0.0f;
  for (int g = 0; g < head_dim / kTurboGroup; ++g) {
    const float* w = x + g * kTurboGroup;
    const auto [lo, hi] = std::minmax_element(w, w + kTurboGroup);
    const float mn = *lo, mx = *hi;
    float s = (mx - mn) / (is_signed ? 254.0f : qmax);
    if (!(s > 0)) s = mx != 0 ? std::abs(mx) / qmax : 1.0f;  // constant group (or NaN)
    // Keep |zero| <= 2000, where f16 holds every integer: a group whose range is tiny next to its
    // offset gets a coarser step instead (its error stays <= s/2 <= offset/4000).
    s = std::max(s, (is_signed ? std::abs(mx + mn) / 2.0f : std::abs(mn)) / 2000.0f);
    s = f16_to_f32(f32_to_f16(s));
    if (!(s > 0)) s = 6.0e-8f;  // flushed to zero in f16: the smallest subnormal
    const float z = f16_to_f32(f32_to_f16(std::rint(is_signed ? (mx + mn) / (2.0f * s) : mn / s)));
    scales[g] = f32_to_f16(s);
    zeros[g] = f32_to_f16(z);
    for (int j = 0; j < kTurboGroup; ++j) {
      const float q = std::fmin(std::fmax(std::rint(w[j] / s - z), qmin), qmax);
      const auto code = static_cast<int>(q);
      put_code(codes, g * kTurboGroup + j, bits, static_cast<uint32_t>(code) & ((1u << bits) - 1u));
    }
  }
}

void turbo_key_dequantize(const uint8_t* codes, const f16_t* scales, const f16_t* zeros,
                          int head_dim, int bits, float* out) {
  for (int i = 0; i < head_dim; ++i) {
    const int g = i / kTurboGroup;
    out[i] = (static_cast<float>(turbo_key_code(codes, i, bits)) + f16_to_f32(zeros[g])) *
             f16_to_f32(scales[g]);
  }
}

void turbo_value_quantize(const float* x, int head_dim, int bits, uint8_t* codes, f16_t* scales) {
  const std::vector<float>& bounds = lloyd_max_boundaries(bits);
  std::array<float, 512> y{};
  turbo_rotate(x, head_dim, y.data());
  std::fill(codes, codes + turbo_code_bytes(head_dim, bits), uint8_t{0});
  for (int g = 0; g < head_dim / kTurboGroup; ++g) {
    const float* w = y.data() + g * kTurboGroup;
    float sum = 0;
    for (int j = 0; j < kTurboGroup; ++j) sum += w[j] * w[j];
    const float s = std::sqrt(sum / kTurboGroup);
    scales[g] = f32_to_f16(s);
    for (int j = 0; j < kTurboGroup; ++j) {
      const float u = w[j] / (s + 1e-8f);
      const auto cell = std::upper_bound(bounds.begin(), bounds.end(), u) - bounds.begin();
      put_code(codes, g * kTurboGroup + j, bits, static_cast<uint32_t>(cell));
    }
  }
}

void turbo_value_dequantize_rotated(const uint8_t* codes, const f16_t* scales, int head_dim,
                                    int bits, float* out) {
  const std::vector<float>& c = lloyd_max_centroids(bits);
  for (int i = 0; i < head_dim; ++i)
    out[i] = c[turbo_code(codes, i, bits)] * f16_to_f32(scales[i / kTurboGroup]);
}

void turbo_value_dequantize(const uint8_t* codes, const f16_t* scales, int head_dim, int bits,
                            float* out) {
  turbo_value_dequantize_rotated(codes, scales, head_dim, bits, out);
  turbo_unrotate(out, head_dim, out);
}

}  // namespace ringlm::kv
