// One row of a quantized KV cache decoded by the attention kernel's SIMD decoders
// (backends/cpu/kv_decode-inl.h) on the current dispatch target: tests compare it bit for bit
// with the codecs (kv/affine_codec.h, kv/turbo_codec.h).
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace ringlm::cpu {

enum class KvRowKind { Affine, TurboKey, TurboValueRotated };

struct KvRowView {
  KvRowKind kind = KvRowKind::Affine;
  int bits = 8;                  // affine: 4 or 8; turbo key: 2/4/5/8; turbo value: 2/3/4/5/8
  size_t head_dim = 0;           // D: a multiple of `group` (turbo: a power of two in [32, 512])
  size_t group = 32;             // affine: 32, 64 or 128; turbo: 32
  const void* codes = nullptr;   // affine: U32[D·bits/32]; turbo: U8[D·bits/8]
  const void* scales = nullptr;  // affine: BF16[D/group]; turbo: F16[D/32]
  const void* biases = nullptr;  // affine: BF16[D/group]; turbo key: F16 zero points [D/32]
};

// out = the row's f32 values (turbo values: the rotated reconstruction ŷ). Throws ringlm::Error on
// an unsupported width, group or head_dim.
void decode_kv_row(const KvRowView& row, float* out);  // F32[D]

}  // namespace ringlm::cpu
