// Oracles for the MLX affine codec: the reference doc's worked examples (exact float32 values
// cross-checked with numpy), a plain per-element transcription of the reference formulas, a
// naive packer written from the layout description, and explicit tie / clip / constant cases.
#include "kv/affine_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"

namespace ringlm::kv {
namespace {

const int kAllBits[] = {2, 3, 4, 5, 6, 8};
const int kAllGroups[] = {32, 64, 128};

// np.linspace(start, stop, num, dtype=np.float32): start + i*step in float64, last = stop, then
// cast to float32.
std::vector<float> linspace_f32(double start, double stop, int num) {
  const double step = (stop - start) / (num - 1);
  std::vector<float> v(static_cast<size_t>(num));
  for (int i = 0; i < num; ++i) v[static_cast<size_t>(i)] = static_cast<float>(start + i * step);
  v.back() = static_cast<float>(stop);
  return v;
}

struct Quantized {
  std::vector<uint32_t> packed;
  std::vector<float> scales, biases;
};

Quantized quantize(const std::vector<float>& x, AffineFormat f,
                   RoundingMode mode = RoundingMode::HalfToEven,
                   MaxInit max_init = MaxInit::TrueMax) {
  const auto n = static_cast<int64_t>(x.size());
  Quantized r;
  r.packed.assign(static_cast<size_t>(affine_packed_words(n, f)), 0xDEADBEEFu);  // must overwrite
  r.scales.resize(static_cast<size_t>(affine_groups(n, f)));
  r.biases.resize(r.scales.size());
  affine_quantize(x.data(), n, f, r.packed.data(), r.scales.data(), r.biases.data(), mode,
                  max_init);
  return r;
}

std::vector<uint32_t> codes_of(const Quantized& q, int64_t n, int bits) {
  std::vector<uint32_t> c(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) c[static_cast<size_t>(i)] = affine_code(q.packed.data(), i, bits);
  return c;
}

// The reference algorithm written out per group and per element, no packing.
struct Reference {
  std::vector<uint32_t> codes;
  std::vector<float> scales, biases;
};

Reference reference_quantize(const std::vector<float>& x, int bits, int group, bool away,
                             bool max_from_zero) {
  auto rnd = [away](float v) { return away ? std::round(v) : std::rint(v); };
  const float nb = static_cast<float>((1 << bits) - 1);
  Reference r;
  for (size_t g0 = 0; g0 < x.size(); g0 += static_cast<size_t>(group)) {
    float mn = std::numeric_limits<float>::infinity();
    float mx = max_from_zero ? 0.0f : -std::numeric_limits<float>::infinity();
    for (size_t j = g0; j < g0 + static_cast<size_t>(group); ++j) {
      if (x[j] < mn) mn = x[j];
      if (x[j] > mx) mx = x[j];
    }
    float s = (mx - mn) / nb;
    if (s < 1e-7f) s = 1e-7f;
    float edge;
    if (std::fabs(mn) > std::fabs(mx)) {
      edge = mn;
    } else {
      edge = mx;
      s = -s;
    }
    const float q0 = rnd(edge / s);
    float bias = 0.0f;
    if (q0 != 0.0f) {
      s = edge / q0;
      bias = edge;
    }
    for (size_t j = g0; j < g0 + static_cast<size_t>(group); ++j) {
      float q = rnd((x[j] - bias) / s);
      if (q < 0.0f) q = 0.0f;
      if (q > nb) q = nb;
      r.codes.push_back(static_cast<uint32_t>(q));
    }
    r.scales.push_back(s);
    r.biases.push_back(bias);
  }
  return r;
}

// Packs codes per the layout description, bit by bit: 2/4/8-bit codes straight into words
// (element k at bits [k*b, (k+1)*b) of word k/(32/b)); 3/5-bit as 8 codes per 3/5-byte
// little-endian chunk, 6-bit as 4 codes per 3 bytes, the bytes then viewed as uint32 words.
std::vector<uint32_t> naive_pack(const std::vector<uint32_t>& codes, int bits) {
  const size_t n = codes.size();
  std::vector<uint32_t> words(n * static_cast<size_t>(bits) / 32, 0u);
  if (bits == 2 || bits == 4 || bits == 8) {
    const size_t per = 32 / static_cast<size_t>(bits);
    for (size_t k = 0; k < n; ++k)
      for (int t = 0; t < bits; ++t)
        if ((codes[k] >> t) & 1u)
          words[k / per] |= 1u << ((k % per) * static_cast<size_t>(bits) + static_cast<size_t>(t));
    return words;
  }
  const size_t per_chunk = bits == 6 ? 4 : 8;
  const size_t chunk_bytes = per_chunk * static_cast<size_t>(bits) / 8;
  std::vector<uint8_t> bytes(words.size() * 4, 0);
  for (size_t k = 0; k < n; ++k) {
    const size_t chunk = k / per_chunk, in_chunk = k % per_chunk;
    for (int t = 0; t < bits; ++t) {
      if (!((codes[k] >> t) & 1u)) continue;
      const size_t bit = in_chunk * static_cast<size_t>(bits) + static_cast<size_t>(t);
      bytes[chunk * chunk_bytes + bit / 8] |= static_cast<uint8_t>(1u << (bit % 8));
    }
  }
  std::memcpy(words.data(), bytes.data(), bytes.size());
  return words;
}

// Random groups of several shapes (mixed signs, all positive, all negative, wide normal with
// outliers, values on a 0.25 grid so (w-bias)/s often ties).
std::vector<float> random_input(int64_t n, int group, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mixed(-1.0f, 1.0f), pos(0.5f, 2.0f), neg(-3.0f, -1.0f);
  std::normal_distribution<float> wide(0.0f, 10.0f);
  std::uniform_int_distribution<int> grid(-12, 12);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float& v = x[static_cast<size_t>(i)];
    switch ((i / group) % 5) {
      case 0:
        v = mixed(rng);
        break;
      case 1:
        v = pos(rng);
        break;
      case 2:
        v = neg(rng);
        break;
      case 3:
        v = wide(rng) * (i % 17 == 0 ? 50.0f : 1.0f);
        break;
      default:
        v = 0.25f * static_cast<float>(grid(rng));
        break;
    }
  }
  return x;
}

TEST(AffineCodecTest, WorkedExampleAscending) {
  const std::vector<float> x = linspace_f32(-1.0, 0.5, 32);
  const Quantized q = quantize(x, {4, 32});
  // numpy float32 transcription gives scale 0x1.99999ap-4 (== 0.1f) and bias -1.
  EXPECT_EQ(q.scales[0], 0.1f);
  EXPECT_NEAR(q.scales[0], 0.1, 1e-7);
  EXPECT_EQ(q.biases[0], -1.0f);
  const std::vector<uint32_t> codes = codes_of(q, 32, 4);
  for (uint32_t i = 0; i < 32; ++i) EXPECT_EQ(codes[i], i / 2) << "element " << i;
  EXPECT_EQ(q.packed[0], 0x33221100u);
  EXPECT_EQ(q.packed[1], 0x77665544u);
  EXPECT_EQ(q.packed[3], 0xFFEEDDCCu);
  // 0 maps to code 10, which dequantizes to ~0.
  EXPECT_EQ(std::rint((0.0f - q.biases[0]) / q.scales[0]), 10.0f);
  EXPECT_NEAR(q.scales[0] * 10.0f + q.biases[0], 0.0f, 1e-6f);
}

TEST(AffineCodecTest, WorkedExampleDescendingHasNegativeScale) {
  const std::vector<float> x = linspace_f32(1.2, -0.3, 32);
  const Quantized q = quantize(x, {4, 32});
  EXPECT_EQ(q.scales[0], -0.1f);  // numpy: -0x1.99999ap-4
  EXPECT_EQ(q.biases[0], 1.2f);   // numpy: 0x1.333334p+0
  const std::vector<uint32_t> codes = codes_of(q, 32, 4);
  for (uint32_t i = 0; i < 32; ++i) EXPECT_EQ(codes[i], i / 2) << "element " << i;
}

TEST(AffineCodecTest, MatchesReferenceTranscriptionForEveryFormat) {
  unsigned seed = 1;
  for (int bits : kAllBits) {
    for (int group : kAllGroups) {
      for (bool away : {false, true}) {
        for (bool max_zero : {false, true}) {
          SCOPED_TRACE("bits=" + std::to_string(bits) + " group=" + std::to_string(group) +
                       " away=" + std::to_string(away) + " max_zero=" + std::to_string(max_zero));
          const int64_t n = 10 * group;
          const std::vector<float> x = random_input(n, group, seed++);
          const Quantized q = quantize(
              x, {bits, group}, away ? RoundingMode::HalfAwayFromZero : RoundingMode::HalfToEven,
              max_zero ? MaxInit::Zero : MaxInit::TrueMax);
          const Reference ref = reference_quantize(x, bits, group, away, max_zero);
          EXPECT_EQ(q.scales, ref.scales);
          EXPECT_EQ(q.biases, ref.biases);
          EXPECT_EQ(codes_of(q, n, bits), ref.codes);
          EXPECT_EQ(q.packed, naive_pack(ref.codes, bits));
        }
      }
    }
  }
}

TEST(AffineCodecTest, PackingMatchesNaivePackerForEveryBits) {
  std::mt19937 rng(7);
  for (int bits : kAllBits) {
    SCOPED_TRACE("bits=" + std::to_string(bits));
    std::uniform_int_distribution<uint32_t> code(0, (1u << bits) - 1u);
    std::vector<uint32_t> codes(256);
    for (auto& c : codes) c = code(rng);
    codes[0] = (1u << bits) - 1u;  // all-ones codes catch masking/straddling bugs
    codes[255] = (1u << bits) - 1u;
    const std::vector<uint32_t> words = naive_pack(codes, bits);
    ASSERT_EQ(words.size(), 256u * static_cast<unsigned>(bits) / 32u);
    for (int64_t i = 0; i < 256; ++i)
      EXPECT_EQ(affine_code(words.data(), i, bits), codes[static_cast<size_t>(i)]) << i;
  }
}

TEST(AffineCodecTest, RoundTripErrorWithinHalfScaleUnlessClipped) {
  unsigned seed = 100;
  for (int bits : kAllBits) {
    for (int group : kAllGroups) {
      SCOPED_TRACE("bits=" + std::to_string(bits) + " group=" + std::to_string(group));
      const int64_t n = 10 * group;
      const std::vector<float> x = random_input(n, group, seed++);
      const AffineFormat f{bits, group};
      const Quantized q = quantize(x, f);
      std::vector<float> y(x.size());
      affine_dequantize(q.packed.data(), q.scales.data(), q.biases.data(), n, f, y.data());
      const float nb = static_cast<float>((1 << bits) - 1);
      for (size_t i = 0; i < x.size(); ++i) {
        const size_t g = i / static_cast<size_t>(group);
        const float s = std::fabs(q.scales[g]), b = q.biases[g];
        const float slack =
            8 * std::numeric_limits<float>::epsilon() * (std::fabs(x[i]) + std::fabs(b) + s * nb);
        // Rescaling by edge/q0 can shrink the covered range by up to one step, so a value at
        // the far end may clip: then the error is still within one step.
        const float t = std::rint((x[i] - b) / q.scales[g]);
        const bool clipped = t < 0.0f || t > nb;
        ASSERT_LE(std::fabs(y[i] - x[i]), (clipped ? s : 0.5f * s) + slack)
            << "element " << i << " x=" << x[i] << " y=" << y[i] << " scale=" << q.scales[g];
      }
    }
  }
}

TEST(AffineCodecTest, FarEndClipsAfterRescale) {
  // min=-1, max=0.9, 2-bit: s=1.9/3, q0=rint(-1.58)=-2 so s=0.5, bias=-1: 0.9 clips to code 3.
  std::vector<float> x(32, 0.0f);
  x[0] = -1.0f;
  x[1] = 0.9f;
  const Quantized q = quantize(x, {2, 32});
  EXPECT_EQ(q.scales[0], 0.5f);
  EXPECT_EQ(q.biases[0], -1.0f);
  EXPECT_EQ(affine_code(q.packed.data(), 0, 2), 0u);
  EXPECT_EQ(affine_code(q.packed.data(), 1, 2), 3u);
  EXPECT_EQ(affine_code(q.packed.data(), 2, 2), 2u);  // 0 -> exactly 0
}

TEST(AffineCodecTest, RoundingModesDifferOnTies) {
  // 2-bit, min 0, max 3: edge=max, s=-1, bias=3, q=round(3-w). 0.5 -> 2.5, 2.5 -> 0.5.
  std::vector<float> x(32, 0.0f);
  x[1] = 3.0f;
  x[2] = 0.5f;
  x[3] = 2.5f;
  x[4] = 1.5f;
  for (bool away : {false, true}) {
    const Quantized q =
        quantize(x, {2, 32}, away ? RoundingMode::HalfAwayFromZero : RoundingMode::HalfToEven);
    EXPECT_EQ(q.scales[0], -1.0f);
    EXPECT_EQ(q.biases[0], 3.0f);
    EXPECT_EQ(affine_code(q.packed.data(), 0, 2), 3u);
    EXPECT_EQ(affine_code(q.packed.data(), 1, 2), 0u);
    EXPECT_EQ(affine_code(q.packed.data(), 2, 2), away ? 3u : 2u);
    EXPECT_EQ(affine_code(q.packed.data(), 3, 2), away ? 1u : 0u);
    EXPECT_EQ(affine_code(q.packed.data(), 4, 2), 2u);  // 1.5 -> 2 either way
  }
}

TEST(AffineCodecTest, MaxInitZeroWidensAllNegativeGroups) {
  const std::vector<float> x = linspace_f32(-1.0, -0.5, 32);
  // True max -0.5: s=0.5/15, q0=-30, s=1/30. From 0: s=1/15, q0=-15, s=1/15. Both bias -1.
  const Quantized cpu = quantize(x, {4, 32}, RoundingMode::HalfToEven, MaxInit::TrueMax);
  const Quantized gpu = quantize(x, {4, 32}, RoundingMode::HalfToEven, MaxInit::Zero);
  EXPECT_EQ(cpu.scales[0], -1.0f / -30.0f);
  EXPECT_EQ(gpu.scales[0], -1.0f / -15.0f);
  EXPECT_EQ(cpu.biases[0], -1.0f);
  EXPECT_EQ(gpu.biases[0], -1.0f);
  EXPECT_EQ(affine_code(cpu.packed.data(), 31, 4), 15u);
  // -0.5 -> 0.5/(1/15f) = 7.4999995 -> 7 (numpy float32 agrees).
  EXPECT_EQ(affine_code(gpu.packed.data(), 31, 4), 7u);
  // A group with a positive element is unaffected.
  const std::vector<float> y = linspace_f32(-1.0, 0.5, 32);
  const Quantized a = quantize(y, {4, 32}, RoundingMode::HalfToEven, MaxInit::TrueMax);
  const Quantized b = quantize(y, {4, 32}, RoundingMode::HalfToEven, MaxInit::Zero);
  EXPECT_EQ(a.scales, b.scales);
  EXPECT_EQ(a.biases, b.biases);
  EXPECT_EQ(a.packed, b.packed);
}

TEST(AffineCodecTest, ConstantAndZeroGroupsRoundTripExactly) {
  for (int bits : kAllBits) {
    SCOPED_TRACE("bits=" + std::to_string(bits));
    const AffineFormat f{bits, 32};
    std::vector<float> x(128);
    const float values[] = {0.0f, 2.5f, -3.0f, 1e-8f};
    for (size_t i = 0; i < x.size(); ++i) x[i] = values[i / 32];
    const Quantized q = quantize(x, f);
    // All-zero group: s = -1e-7 (|min| == |max| picks max and negates), q0 = 0, bias 0.
    EXPECT_EQ(q.scales[0], -1e-7f);
    EXPECT_EQ(q.biases[0], 0.0f);
    EXPECT_EQ(q.biases[1], 2.5f);
    EXPECT_EQ(q.biases[2], -3.0f);
    EXPECT_EQ(q.biases[3], 0.0f);  // 1e-8/1e-7 rounds to q0 = 0
    for (int64_t i = 0; i < 128; ++i) EXPECT_EQ(affine_code(q.packed.data(), i, bits), 0u) << i;
    std::vector<float> y(x.size());
    affine_dequantize(q.packed.data(), q.scales.data(), q.biases.data(), 128, f, y.data());
    for (size_t i = 0; i < 96; ++i) EXPECT_EQ(y[i], x[i]) << i;
    for (size_t i = 96; i < 128; ++i) EXPECT_EQ(y[i], 0.0f) << i;  // |error| 1e-8 <= |s|/2
  }
}

TEST(AffineCodecTest, RejectsBadFormatsAndLengths) {
  auto message_of = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  for (int bits : {0, 1, 7, 16, -4})
    EXPECT_NE(message_of([&] {
                validate_affine_format({bits, 64});
              }).find("bits=" + std::to_string(bits)),
              std::string::npos);
  for (int group : {0, 16, 48, 256})
    EXPECT_NE(message_of([&] {
                validate_affine_format({4, group});
              }).find("group_size=" + std::to_string(group)),
              std::string::npos);
  EXPECT_NE(message_of([] { affine_groups(48, {4, 32}); }).find("n=48"), std::string::npos);
  EXPECT_NE(message_of([] { affine_packed_words(-64, {4, 64}); }).find("n=-64"), std::string::npos);
  std::vector<float> x(64, 1.0f), s(2), b(2), y(64);
  std::vector<uint32_t> p(64);
  EXPECT_THROW(affine_quantize(x.data(), 64, {7, 32}, p.data(), s.data(), b.data()), Error);
  EXPECT_THROW(affine_quantize(x.data(), 40, {4, 32}, p.data(), s.data(), b.data()), Error);
  EXPECT_THROW(affine_dequantize(p.data(), s.data(), b.data(), 64, {4, 16}, y.data()), Error);
  EXPECT_THROW(affine_dequantize(p.data(), s.data(), b.data(), 33, {4, 32}, y.data()), Error);
  EXPECT_EQ(affine_packed_words(0, {8, 128}), 0);
  EXPECT_EQ(affine_packed_words(128, {3, 32}), 12);
  EXPECT_EQ(affine_packed_words(128, {6, 64}), 24);
}

}  // namespace
}  // namespace ringlm::kv
