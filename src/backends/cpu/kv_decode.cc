// Dispatch entry for one row of the attention kernel's SIMD KV decoders (tests only: the kernel
// inlines the same decoders, backends/cpu/attention.cc).

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kv_decode.cc"
#include "backends/cpu/hwy_config.h"  // first: selects the targets

#include <hwy/foreach_target.h>  // re-includes this file once per target

#include <hwy/highway.h>

#include "backends/cpu/kv_decode-inl.h"

#include <algorithm>
#include <vector>

#include "backends/cpu/kv_decode.h"
#include "core/error.h"
#include "kv/turbo_codec.h"

HWY_BEFORE_NAMESPACE();
namespace ringlm::cpu {
namespace HWY_NAMESPACE {

void DecodeKvRowImpl(const KvRowView& row, const float* centroids, float* out) {
  const size_t D = row.head_dim;
  switch (row.kind) {
    case KvRowKind::Affine: {
      const auto* codes = static_cast<const uint32_t*>(row.codes);
      const auto* scales = static_cast<const bf16_t*>(row.scales);
      const auto* biases = static_cast<const bf16_t*>(row.biases);
      if (row.bits == 8) return DecodeAffineRow<8>(codes, scales, biases, D, row.group, out);
      return DecodeAffineRow<4>(codes, scales, biases, D, row.group, out);
    }
    case KvRowKind::TurboKey:
      return WithTurboBits(row.bits, [&](auto bits) {
        DecodeTurboKeyRow<decltype(bits)::value>(static_cast<const uint8_t*>(row.codes),
                                                 static_cast<const f16_t*>(row.scales),
                                                 static_cast<const f16_t*>(row.biases), D, out);
      });
    case KvRowKind::TurboValueRotated:
      return WithTurboBits(row.bits, [&](auto bits) {
        DecodeTurboValueRow<decltype(bits)::value>(static_cast<const uint8_t*>(row.codes),
                                                   static_cast<const f16_t*>(row.scales), centroids,
                                                   D, out);
      });
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace ringlm::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ringlm::cpu {

HWY_EXPORT(DecodeKvRowImpl);

void decode_kv_row(const KvRowView& row, float* out) {
  std::vector<float> centroids(256, 0.0f);  // padded: the decoders read whole vectors
  if (row.kind == KvRowKind::Affine) {
    RINGLM_USER_CHECK(row.bits == 4 || row.bits == 8, "affine KV row: bits ", row.bits,
                      " is not 4 or 8");
    RINGLM_USER_CHECK(row.group == 32 || row.group == 64 || row.group == 128,
                      "affine KV row: group ", row.group, " is not 32, 64 or 128");
    RINGLM_USER_CHECK(row.head_dim % row.group == 0, "affine KV row: head_dim ", row.head_dim,
                      " is not a multiple of the group ", row.group);
  } else {
    const bool key = row.kind == KvRowKind::TurboKey;
    kv::validate_turbo(key ? row.bits : 8, key ? 8 : row.bits, static_cast<int>(row.head_dim));
    if (!key) {
      const std::vector<float>& c = kv::lloyd_max_centroids(row.bits);
      std::copy(c.begin(), c.end(), centroids.begin());
    }
  }
  HWY_DYNAMIC_DISPATCH(DecodeKvRowImpl)(row, centroids.data(), out);
}

}  // namespace ringlm::cpu
#endif  // HWY_ONCE
