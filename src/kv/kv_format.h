// Storage formats of a layer group's K/V. Dense formats store each element in F32/BF16/F16;
// affine formats (slice 2 of the KV issue) will store packed uint32 codes LSB-first plus a scale
// and bias per group of `group_size` elements along head_dim, x ≈ scale·q + bias (the MLX
// `quantize` layout), with scale and bias in `dtype`. The enum and fields are here so a group's
// format, the persistence metadata and the budget arithmetic already carry them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace ringlm::kv {

enum class KvEncoding : uint8_t {
  Dense,   // one `dtype` element per value
  Affine,  // `bits`-bit codes + scale/bias per group: parsed and sized; the cache refuses it
           // until quantized attention lands (issue 4 slice 2; codec in kv/affine_codec.h)
};

struct KvFormat {
  KvEncoding encoding = KvEncoding::Dense;
  DType dtype = DType::F32;  // Dense: element type; Affine: scale/bias type
  int bits = 0;              // Affine: 4 or 8
  int group_size = 0;        // Affine: 32 or 64

  static KvFormat dense(DType dtype) { return {KvEncoding::Dense, dtype, 0, 0}; }
  // "f32", "bf16", "f16"; later "int8-g64", "int4-g32". Unknown names -> ringlm::Error listing
  // the accepted ones.
  static KvFormat parse(const std::string& name);
  std::string name() const;

  bool operator==(const KvFormat&) const = default;
  // Bytes one token of K (or of V) takes for `kv_heads` × `head_dim` values.
  size_t bytes_per_token(int kv_heads, int head_dim) const;
  // Throws ringlm::Error unless the format is one the cache can store today.
  void check_supported(int head_dim) const;
};

}  // namespace ringlm::kv
