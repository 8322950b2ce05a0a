// Storage formats of a layer group's K/V. Dense formats store each element in F32/BF16/F16.
// Affine formats ("int8-g64", "int4-g32", ...) store, per token and kv head, head_dim `bits`-bit
// codes packed LSB-first into uint32 words plus one scale and one bias per group of `group_size`
// consecutive elements along head_dim, x ≈ scale·q + bias: exactly MLX's `mx.quantize` (affine
// mode) of the [.., head_dim] rows, as mlx-lm's QuantizedKVCache holds them (kv/affine_codec.h).
// Scales and biases are stored in `dtype`: BF16 (MLX stores them in the K/V dtype, bf16 for the
// usual checkpoints).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace ringlm::kv {

enum class KvEncoding : uint8_t {
  Dense,   // one `dtype` element per value
  Affine,  // `bits`-bit codes + scale/bias per group of `group_size` values along head_dim
};

struct KvFormat {
  KvEncoding encoding = KvEncoding::Dense;
  DType dtype = DType::F32;  // Dense: element type; Affine: scale/bias type (BF16)
  int bits = 0;              // Affine: 4 or 8
  int group_size = 0;        // Affine: 32 or 64

  static KvFormat dense(DType dtype) { return {KvEncoding::Dense, dtype, 0, 0}; }
  static KvFormat affine(int bits, int group_size) {
    return {KvEncoding::Affine, DType::BF16, bits, group_size};
  }
  // "f32", "bf16", "f16", "int8-g32", "int8-g64", "int4-g32", "int4-g64" (affine formats have
  // bf16 scales and biases). Unknown names -> ringlm::Error listing the accepted ones.
  static KvFormat parse(const std::string& name);
  std::string name() const;
  bool is_affine() const { return encoding == KvEncoding::Affine; }

  bool operator==(const KvFormat&) const = default;
  // Bytes one token of K (or of V) takes for `kv_heads` × `head_dim` values, exactly as stored:
  // dense kv_heads·head_dim·sizeof(dtype); affine kv_heads·(head_dim·bits/8 + 2·(head_dim /
  // group_size)·sizeof(dtype)) (codes, scales, biases).
  size_t bytes_per_token(int kv_heads, int head_dim) const;
  // Throws ringlm::Error unless the cache can store the format for this head_dim (affine: head_dim
  // a multiple of group_size).
  void check_supported(int head_dim) const;
};

}  // namespace ringlm::kv
