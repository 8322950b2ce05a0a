// The TurboQuant codec (kv/turbo_codec.h) against direct transcriptions of its formulas: the
// Lloyd-Max tables against the reference's 3-bit values and against the optimality conditions
// evaluated by numerical integration; the rotation against the explicit Hadamard matrix; key and
// value encode/decode per bits and head_dim against double-precision transcriptions.
#include "kv/turbo_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"

namespace ringlm::kv {
namespace {

// ∫ f over [a, b] by composite Simpson (tails cut at ±12).
template <typename F>
double integrate(F f, double a, double b) {
  a = std::max(a, -12.0);
  b = std::min(b, 12.0);
  if (b <= a) return 0;
  const int n = 20000;
  const double h = (b - a) / n;
  double s = f(a) + f(b);
  for (int i = 1; i < n; ++i) s += f(a + i * h) * (i % 2 ? 4 : 2);
  return s * h / 3;
}
double pdf(double x) {
  return std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

TEST(TurboCodec, ThreeBitCodebookReproducesTheReference) {
  const std::vector<float>& c = lloyd_max_centroids(3);
  const std::vector<float>& b = lloyd_max_boundaries(3);
  const double ref_c[] = {0.24509, 0.75601, 1.34391, 2.15195};
  const double ref_b[] = {0.50055, 1.04996, 1.74793};
  ASSERT_EQ(c.size(), 8u);
  ASSERT_EQ(b.size(), 7u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(c[static_cast<size_t>(4 + i)], ref_c[i], 1e-5);
    EXPECT_NEAR(c[static_cast<size_t>(3 - i)], -ref_c[i], 1e-5);
  }
  EXPECT_NEAR(b[3], 0.0, 1e-7);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(b[static_cast<size_t>(4 + i)], ref_b[i], 1e-5);
    EXPECT_NEAR(b[static_cast<size_t>(2 - i)], -ref_b[i], 1e-5);
  }
}

TEST(TurboCodec, CodebooksSatisfyLloydMaxConditions) {
  // Known mean squared errors of the N(0, 1) Lloyd-Max quantizers (Max 1960).
  const std::pair<int, double> mse[] = {{2, 0.1175}, {3, 0.03454}, {4, 0.009497}, {5, 0.002499}};
  for (int bits : {2, 3, 4, 5, 8}) {
    const std::vector<float>& c = lloyd_max_centroids(bits);
    const std::vector<float>& b = lloyd_max_boundaries(bits);
    ASSERT_EQ(c.size(), size_t{1} << bits);
    ASSERT_EQ(b.size(), c.size() - 1);
    double distortion = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      const double lo = i == 0 ? -INFINITY : b[i - 1], hi = i + 1 == c.size() ? INFINITY : b[i];
      if (i + 1 < c.size()) {
        EXPECT_NEAR(b[i], 0.5 * (c[i] + c[i + 1]), 1e-6);
      }
      EXPECT_NEAR(c[i], -c[c.size() - 1 - i], 1e-6) << "symmetric";
      const double mass = integrate(pdf, lo, hi);
      const double mean = integrate([](double x) { return x * pdf(x); }, lo, hi) / mass;
      // Outer cells of the 8-bit book hold ~1e-9 of the mass: Simpson's step is too coarse there.
      if (mass > 1e-6) {
        EXPECT_NEAR(c[i], mean, 2e-5) << bits << " bits, cell " << i;
      }
      const double ci = c[i];
      distortion += integrate([ci](double x) { return (x - ci) * (x - ci) * pdf(x); }, lo, hi);
    }
    for (const auto& [mb, m] : mse)
      if (mb == bits) {
        EXPECT_NEAR(distortion, m, 2e-4 * (1 + 10 * m)) << bits << " bits";
      }
  }
  EXPECT_THROW(lloyd_max_centroids(6), Error);
}

TEST(TurboCodec, RotationIsTheSignedNormalizedHadamardMatrix) {
  for (int d : {32, 64, 128, 256, 512}) {
    const std::vector<float>& s = turbo_signs(d);
    int plus = 0;
    for (float v : s) {
      ASSERT_TRUE(v == 1.0f || v == -1.0f);
      plus += v > 0;
    }
    EXPECT_GT(plus, d / 4);  // a balanced-looking sign vector, not all + or all −
    EXPECT_LT(plus, 3 * d / 4);
    std::mt19937 rng(static_cast<uint32_t>(d));
    std::normal_distribution<float> normal;
    std::vector<float> x(static_cast<size_t>(d)), y(x.size()), back(x.size());
    for (float& v : x) v = normal(rng);
    turbo_rotate(x.data(), d, y.data());
    for (int i = 0; i < d; ++i) {
      double ref = 0;
      for (int j = 0; j < d; ++j)
        ref += (std::popcount(static_cast<unsigned>(i & j)) % 2 ? -1.0 : 1.0) *
               s[static_cast<size_t>(j)] * x[static_cast<size_t>(j)];
      EXPECT_NEAR(y[static_cast<size_t>(i)], ref / std::sqrt(d), 1e-4);
    }
    turbo_unrotate(y.data(), d, back.data());
    for (int i = 0; i < d; ++i)
      EXPECT_NEAR(back[static_cast<size_t>(i)], x[static_cast<size_t>(i)], 1e-5);
  }
  EXPECT_THROW(turbo_signs(96), Error);
  EXPECT_THROW(validate_turbo(3, 3, 64), Error);
  EXPECT_THROW(validate_turbo(8, 6, 64), Error);
  EXPECT_NO_THROW(validate_turbo(8, 3, 128));
}

std::vector<float> sample(int n, uint32_t seed, float offset) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(offset, 1.5f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  return x;
}

TEST(TurboCodec, KeysMatchTheFormulas) {
  for (int bits : {2, 4, 5, 8}) {
    for (int d : {64, 128, 256}) {
      std::vector<float> x = sample(d, static_cast<uint32_t>(bits * 1000 + d), 0.7f);
      // A constant group exercises the degenerate scale; a group far from 0 with a tiny range
      // the zero-point bound (its zero would overflow f16 otherwise).
      for (int j = 64 - 32; j < 64; ++j) x[static_cast<size_t>(j)] = -2.5f;
      for (int j = 0; j < 32; ++j)
        x[static_cast<size_t>(j)] = 1000.0f + 0.001f * static_cast<float>(j);
      std::vector<uint8_t> codes(static_cast<size_t>(turbo_code_bytes(d, bits)));
      std::vector<f16_t> scales(static_cast<size_t>(d / 32)), zeros(scales.size());
      turbo_key_quantize(x.data(), d, bits, codes.data(), scales.data(), zeros.data());
      std::vector<float> out(x.size());
      turbo_key_dequantize(codes.data(), scales.data(), zeros.data(), d, bits, out.data());
      const int qmax = bits == 8 ? 127 : (1 << bits) - 1, qmin = bits == 8 ? -127 : 0;
      for (int g = 0; g < d / 32; ++g) {
        float mn = INFINITY, mx = -INFINITY;
        for (int j = 0; j < 32; ++j) {
          mn = std::min(mn, x[static_cast<size_t>(g * 32 + j)]);
          mx = std::max(mx, x[static_cast<size_t>(g * 32 + j)]);
        }
        float s = (mx - mn) / (bits == 8 ? 254.0f : static_cast<float>(qmax));
        if (s == 0) s = std::abs(mx) / static_cast<float>(qmax);
        s = std::max(s, (bits == 8 ? std::abs(mx + mn) / 2 : std::abs(mn)) / 2000.0f);
        s = f16_to_f32(f32_to_f16(s));
        const float z = std::rint(bits == 8 ? (mx + mn) / (2 * s) : mn / s);
        EXPECT_EQ(f16_to_f32(scales[static_cast<size_t>(g)]), s);
        EXPECT_EQ(f16_to_f32(zeros[static_cast<size_t>(g)]), z);
        for (int j = 0; j < 32; ++j) {
          const int i = g * 32 + j;
          const int q = std::clamp(static_cast<int>(std::lrint(x[static_cast<size_t>(i)] / s - z)),
                                   qmin, qmax);
          // The bit stream: code i at bits [i·bits, (i+1)·bits), little-endian.
          int stored = 0;
          for (int b = 0; b < bits; ++b) {
            const int bit = i * bits + b;
            stored |= ((codes[static_cast<size_t>(bit / 8)] >> (bit % 8)) & 1) << b;
          }
          if (bits == 8) stored = static_cast<int8_t>(stored);
          EXPECT_EQ(stored, q) << bits << " bits d=" << d << " i=" << i;
          EXPECT_EQ(out[static_cast<size_t>(i)], (static_cast<float>(q) + z) * s);
          EXPECT_LE(std::abs(out[static_cast<size_t>(i)] - x[static_cast<size_t>(i)]), 0.65f * s);
        }
      }
      // The constant group keeps its value up to the f16 rounding of its scale; the far group
      // stays finite, within offset/4000 (+ its f16 scale rounding).
      EXPECT_NEAR(out[40], -2.5f, 2.5f * 1e-3f);
      for (int j = 0; j < 32; ++j) {
        EXPECT_TRUE(std::isfinite(out[static_cast<size_t>(j)]));
        EXPECT_NEAR(out[static_cast<size_t>(j)], x[static_cast<size_t>(j)], 1000.0 / 4000 * 1.3);
      }
    }
  }
}

TEST(TurboCodec, ValuesMatchTheFormulas) {
  // Reconstruction MSE relative to the rotated values' energy: close to the Lloyd-Max distortion.
  const std::pair<int, double> mse[] = {{2, 0.1175}, {3, 0.03454}, {4, 0.009497}, {5, 0.002499}};
  for (int bits : {2, 3, 4, 5, 8}) {
    const std::vector<float>& c = lloyd_max_centroids(bits);
    const std::vector<float>& b = lloyd_max_boundaries(bits);
    for (int d : {64, 128, 256}) {
      const std::vector<float>& s = turbo_signs(d);
      double err = 0, energy = 0;
      for (int rep = 0; rep < 8; ++rep) {
        std::vector<float> x = sample(d, static_cast<uint32_t>(rep * 7 + bits * 1000 + d), 0.3f);
        std::vector<uint8_t> codes(static_cast<size_t>(turbo_code_bytes(d, bits)));
        std::vector<f16_t> scales(static_cast<size_t>(d / 32));
        turbo_value_quantize(x.data(), d, bits, codes.data(), scales.data());
        std::vector<float> out(x.size());
        turbo_value_dequantize(codes.data(), scales.data(), d, bits, out.data());
        // Transcription in double: y = H(x ⊙ s)/√d.
        std::vector<double> y(static_cast<size_t>(d));
        for (int i = 0; i < d; ++i) {
          for (int j = 0; j < d; ++j)
            y[static_cast<size_t>(i)] +=
                (std::popcount(static_cast<unsigned>(i & j)) % 2 ? -1.0 : 1.0) *
                s[static_cast<size_t>(j)] * x[static_cast<size_t>(j)];
          y[static_cast<size_t>(i)] /= std::sqrt(d);
        }
        std::vector<double> yhat(y.size());
        for (int g = 0; g < d / 32; ++g) {
          double sq = 0;
          for (int j = 0; j < 32; ++j)
            sq += y[static_cast<size_t>(g * 32 + j)] * y[static_cast<size_t>(g * 32 + j)];
          const double scale = std::sqrt(sq / 32);
          EXPECT_EQ(scales[static_cast<size_t>(g)], f32_to_f16(static_cast<float>(scale)));
          for (int j = 0; j < 32; ++j) {
            const int i = g * 32 + j;
            const double u = y[static_cast<size_t>(i)] / (scale + 1e-8);
            int cell = 0;
            while (cell < static_cast<int>(b.size()) && u >= b[static_cast<size_t>(cell)]) ++cell;
            const auto stored = static_cast<int>(turbo_code(codes.data(), i, bits));
            double nearest = INFINITY;  // f32 vs f64 rotation may move u across a boundary
            for (float bound : b) nearest = std::min(nearest, std::abs(u - bound));
            if (nearest > 1e-4) {
              EXPECT_EQ(stored, cell) << bits << " bits d=" << d << " i=" << i;
            }
            yhat[static_cast<size_t>(i)] =
                c[static_cast<size_t>(stored)] * f16_to_f32(scales[static_cast<size_t>(g)]);
          }
        }
        // x̂ = s ⊙ H(ŷ)/√d.
        for (int i = 0; i < d; ++i) {
          double ref = 0;
          for (int j = 0; j < d; ++j)
            ref += (std::popcount(static_cast<unsigned>(i & j)) % 2 ? -1.0 : 1.0) *
                   yhat[static_cast<size_t>(j)];
          ref = ref / std::sqrt(d) * s[static_cast<size_t>(i)];
          EXPECT_NEAR(out[static_cast<size_t>(i)], ref, 2e-5 * (1 + std::abs(ref)));
          err += (out[static_cast<size_t>(i)] - x[static_cast<size_t>(i)]) *
                 (out[static_cast<size_t>(i)] - x[static_cast<size_t>(i)]);
          energy += x[static_cast<size_t>(i)] * x[static_cast<size_t>(i)];
        }
      }
      for (const auto& [mb, m] : mse)
        if (mb == bits) {
          EXPECT_LT(err / energy, 1.3 * m) << bits << " bits d=" << d;
        }
      if (bits == 8) {
        EXPECT_LT(err / energy, 2e-4);
      }
    }
  }
}

}  // namespace
}  // namespace ringlm::kv
