// The CPU attention kernel's SIMD KV row decoders (backends/cpu/kv_decode-inl.h) against the
// codecs, bit for bit, on every SIMD target: affine int8/int4 × group 32/64/128 (scale·q + bias),
// TurboQuant keys 2/4/5/8 bits ((q + z)·s, int8 for 8 bits) and rotated values 2/3/4/5/8 bits
// (centroid[q]·s) × head_dim 32…512, over random codes covering every code value.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/kv_decode.h"
#include "core/error.h"
#include "kv/affine_codec.h"
#include "kv/turbo_codec.h"
#include "op_test_util.h"

namespace ringlm::cpu {
namespace {

std::vector<uint8_t> random_bytes(size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> out(n);
  for (uint8_t& b : out) b = static_cast<uint8_t>(byte(rng));
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(KvDecode, AffineRowsEqualTheCodec) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  ops::testing::for_each_simd_target([&](const std::string&) {
    for (int bits : {8, 4}) {
      for (size_t group : {32, 64, 128}) {
        for (size_t D : {group, 2 * group, 4 * group}) {
          const std::vector<uint8_t> bytes = random_bytes(D * static_cast<size_t>(bits) / 8, rng);
          std::vector<uint32_t> codes(bytes.size() / 4);
          std::memcpy(codes.data(), bytes.data(), bytes.size());
          std::vector<bf16_t> scales(D / group), biases(D / group);
          std::vector<float> scales_f(D / group), biases_f(D / group);
          for (size_t g = 0; g < D / group; ++g) {
            scales[g] = f32_to_bf16(dist(rng) / 7.0f);
            biases[g] = f32_to_bf16(dist(rng));
            scales_f[g] = bf16_to_f32(scales[g]);
            biases_f[g] = bf16_to_f32(biases[g]);
          }
          std::vector<float> want(D), got(D, -1.0f);
          kv::affine_dequantize(codes.data(), scales_f.data(), biases_f.data(),
                                static_cast<int64_t>(D),
                                kv::AffineFormat{bits, static_cast<int>(group)}, want.data());
          decode_kv_row(
              {KvRowKind::Affine, bits, D, group, codes.data(), scales.data(), biases.data()},
              got.data());
          EXPECT_TRUE(same_bits(want, got)) << bits << "-bit g" << group << " D " << D;
        }
      }
    }
  });
}

TEST(KvDecode, TurboRowsEqualTheCodec) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::uniform_int_distribution<int> zero(-2000, 2000);
  ops::testing::for_each_simd_target([&](const std::string&) {
    for (size_t D : {32, 64, 128, 256, 512}) {
      const size_t groups = D / kv::kTurboGroup;
      std::vector<f16_t> scales(groups), zeros(groups);
      for (size_t g = 0; g < groups; ++g) {
        scales[g] = f32_to_f16(dist(rng) / 100.0f);
        zeros[g] = f32_to_f16(static_cast<float>(zero(rng)));
      }
      const int d = static_cast<int>(D);
      for (int bits : {2, 4, 5, 8}) {
        const std::vector<uint8_t> codes = random_bytes(D * static_cast<size_t>(bits) / 8, rng);
        std::vector<float> want(D), got(D, -1.0f);
        kv::turbo_key_dequantize(codes.data(), scales.data(), zeros.data(), d, bits, want.data());
        decode_kv_row({KvRowKind::TurboKey, bits, D, 32, codes.data(), scales.data(), zeros.data()},
                      got.data());
        EXPECT_TRUE(same_bits(want, got)) << "key " << bits << " bits, D " << D;
      }
      for (int bits : {2, 3, 4, 5, 8}) {
        const std::vector<uint8_t> codes = random_bytes(D * static_cast<size_t>(bits) / 8, rng);
        std::vector<float> want(D), got(D, -1.0f);
        kv::turbo_value_dequantize_rotated(codes.data(), scales.data(), d, bits, want.data());
        decode_kv_row(
            {KvRowKind::TurboValueRotated, bits, D, 32, codes.data(), scales.data(), nullptr},
            got.data());
        EXPECT_TRUE(same_bits(want, got)) << "value " << bits << " bits, D " << D;
      }
    }
  });
}

TEST(KvDecode, RejectsUnsupportedRows) {
  std::vector<float> out(64);
  std::vector<uint32_t> codes(64);
  std::vector<uint16_t> planes(4);
  EXPECT_THROW(
      decode_kv_row({KvRowKind::Affine, 3, 64, 32, codes.data(), planes.data(), planes.data()},
                    out.data()),
      Error);
  EXPECT_THROW(
      decode_kv_row({KvRowKind::Affine, 8, 48, 32, codes.data(), planes.data(), planes.data()},
                    out.data()),
      Error);
  EXPECT_THROW(
      decode_kv_row({KvRowKind::TurboKey, 3, 64, 32, codes.data(), planes.data(), planes.data()},
                    out.data()),
      Error);
  EXPECT_THROW(
      decode_kv_row({KvRowKind::TurboValueRotated, 4, 48, 32, codes.data(), planes.data(), nullptr},
                    out.data()),
      Error);
}

}  // namespace
}  // namespace ringlm::cpu
