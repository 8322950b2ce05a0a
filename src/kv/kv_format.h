// Storage formats of a layer group's K/V. Dense formats store each element in F32/BF16/F16.
// Affine formats ("int8-g64", "int4-g32", ...) store, per token and kv head, head_dim `bits`-bit
// codes packed LSB-first into uint32 words plus one scale and one bias per group of `group_size`
// consecutive elements along head_dim, x ≈ scale·q + bias: exactly MLX's `mx.quantize` (affine
// mode) of the [.., head_dim] rows, as mlx-lm's QuantizedKVCache holds them (kv/affine_codec.h).
// Scales and biases are stored in `dtype`: BF16 (MLX stores them in the K/V dtype, bf16 for the
// usual checkpoints).
// TurboQuant formats ("turbo" = "turbo:k8v3", "turbo:kXvY") store keys as X-bit affine codes with
// an f16 scale and zero point per 32 values, and values Hadamard-rotated as Y-bit Lloyd-Max
// Gaussian codes with an f16 RMS scale per 32 values (kv/turbo_codec.h); K and V differ in size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace ringlm::kv {

enum class KvEncoding : uint8_t {
  Dense,   // one `dtype` element per value
  Affine,  // `bits`-bit codes + scale/bias per group of `group_size` values along head_dim
  Turbo,   // K: `bits`-bit codes + scale/zero; V: `value_bits`-bit rotated Gaussian codes + scale
};

struct KvFormat {
  KvEncoding encoding = KvEncoding::Dense;
  DType dtype = DType::F32;  // Dense: element type; Affine: scale/bias type (BF16); Turbo: F16
  int bits = 0;              // Affine: 4 or 8; Turbo: key bits 2, 4, 5 or 8
  int group_size = 0;        // Affine: 32 or 64; Turbo: 32
  int value_bits = 0;        // Turbo: value bits 2, 3, 4, 5 or 8

  static KvFormat dense(DType dtype) { return {KvEncoding::Dense, dtype, 0, 0}; }
  static KvFormat affine(int bits, int group_size) {
    return {KvEncoding::Affine, DType::BF16, bits, group_size};
  }
  static KvFormat turbo(int key_bits, int value_bits) {
    return {KvEncoding::Turbo, DType::F16, key_bits, 32, value_bits};
  }
  // "f32", "bf16", "f16", "int8-g32", "int8-g64", "int4-g32", "int4-g64" (affine formats have
  // bf16 scales and biases), "turbo" (k8v3), "turbo:kXvY" (X ∈ {2,4,5,8}, Y ∈ {2,3,4,5,8}).
  // Unknown names -> ringlm::Error listing the accepted ones.
  static KvFormat parse(const std::string& name);
  std::string name() const;
  bool is_affine() const { return encoding == KvEncoding::Affine; }
  bool is_turbo() const { return encoding == KvEncoding::Turbo; }

  bool operator==(const KvFormat&) const = default;
  // Bytes one token of K (value = false) or of V takes for `kv_heads` × `head_dim` values,
  // exactly as stored: dense kv_heads·head_dim·sizeof(dtype); affine kv_heads·(head_dim·bits/8 +
  // 2·(head_dim / group_size)·sizeof(dtype)) (codes, scales, biases); turbo K kv_heads·
  // (head_dim·bits/8 + 2·(head_dim/32)·2) (codes, scales, zeros), V kv_heads·(head_dim·
  // value_bits/8 + (head_dim/32)·2) (codes, scales).
  size_t bytes_per_token(int kv_heads, int head_dim, bool value = false) const;
  // Throws ringlm::Error unless the cache can store the format for this head_dim (affine: head_dim
  // a multiple of group_size; turbo: a power of two in [32, 512]).
  void check_supported(int head_dim) const;
};

}  // namespace ringlm::kv
