// CPU K/V scatter: token t's K and V rows go to slot slots[t] of the paged cache, converted from
// f32 to the cache dtype (round to nearest even, as torch's .to()), or quantized per (token, kv
// head) row for an affine view (MLX affine, kv/affine_codec.h; scale and bias rounded to bf16)
// or a TurboQuant view (kv/turbo_codec.h).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "core/thread_pool.h"
#include "kv/affine_codec.h"
#include "kv/turbo_codec.h"

namespace ringlm::cpu {

namespace {
void store_row(const float* src, size_t n, DType dtype, void* dst) {
  switch (dtype) {
    case DType::F32: {
      auto* d = static_cast<float*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = src[i];
      return;
    }
    case DType::BF16: {
      auto* d = static_cast<bf16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::F16: {
      auto* d = static_cast<f16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    default:
      RINGLM_FAIL("kv_write: unsupported cache dtype ", dtype_name(dtype));
  }
}
// Quantizes the kv_heads rows of one token into slot `slot` of an affine view's planes.
void store_affine_token(const float* src,  // F32[kv_heads, head_dim]
                        size_t slot, const Tensor& codes, const Tensor& scales,
                        const Tensor& biases, const kv::AffineFormat& format, size_t kv_heads,
                        size_t head_dim, std::vector<float>& scratch) {
  const size_t words = head_dim * static_cast<size_t>(format.bits) / 32;
  const size_t groups = head_dim / static_cast<size_t>(format.group_size);
  scratch.resize(2 * groups);
  for (size_t h = 0; h < kv_heads; ++h) {
    const size_t row = slot * kv_heads + h;
    kv::affine_quantize(src + h * head_dim, static_cast<int64_t>(head_dim), format,
                        codes.ptr<uint32_t>() + row * words, scratch.data(),
                        scratch.data() + groups);
    for (size_t g = 0; g < groups; ++g) {
      scales.ptr<bf16_t>()[row * groups + g] = f32_to_bf16(scratch[g]);
      biases.ptr<bf16_t>()[row * groups + g] = f32_to_bf16(scratch[groups + g]);
    }
  }
}

// Encodes the kv_heads K and V rows of one token into slot `slot` of a TurboQuant view.
void store_turbo_token(const float* k,  // F32[kv_heads, head_dim]
                       const float* v,  // F32[kv_heads, head_dim]
                       size_t slot, const ops::KvLayerView& kv) {
  const auto heads = static_cast<size_t>(kv.kv_heads());
  const int D = kv.head_dim();
  const auto kb = static_cast<size_t>(kv::turbo_code_bytes(D, kv.bits));
  const auto vb = static_cast<size_t>(kv::turbo_code_bytes(D, kv.value_bits));
  const auto groups = static_cast<size_t>(D / kv::kTurboGroup);
  for (size_t h = 0; h < heads; ++h) {
    const size_t row = slot * heads + h;
    kv::turbo_key_quantize(k + h * static_cast<size_t>(D), D, kv.bits,
                           kv.k.ptr<uint8_t>() + row * kb, kv.k_scales.ptr<f16_t>() + row * groups,
                           kv.k_biases.ptr<f16_t>() + row * groups);
    kv::turbo_value_quantize(v + h * static_cast<size_t>(D), D, kv.value_bits,
                             kv.v.ptr<uint8_t>() + row * vb,
                             kv.v_scales.ptr<f16_t>() + row * groups);
  }
}

}  // namespace

void kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, ops::KvLayerView& kv) {
  const auto T = k.shape[0];
  if (kv.turbo()) {
    ThreadPool::global().parallel_for(T, 4, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const auto slot = static_cast<size_t>(slots.ptr<const int32_t>()[t]);
        store_turbo_token(k.row<float>(t), v.row<float>(t), slot, kv);
      }
    });
    return;
  }
  if (kv.affine()) {
    const kv::AffineFormat format{kv.bits, kv.group_size};
    const auto heads = static_cast<size_t>(kv.kv_heads()), dim = static_cast<size_t>(kv.head_dim());
    ThreadPool::global().parallel_for(T, 4, [&](int64_t b, int64_t e) {
      std::vector<float> scratch;
      for (int64_t t = b; t < e; ++t) {
        const auto slot = static_cast<size_t>(slots.ptr<const int32_t>()[t]);
        store_affine_token(k.row<float>(t), slot, kv.k, kv.k_scales, kv.k_biases, format, heads,
                           dim, scratch);
        store_affine_token(v.row<float>(t), slot, kv.v, kv.v_scales, kv.v_biases, format, heads,
                           dim, scratch);
      }
    });
    return;
  }
  const size_t row = static_cast<size_t>(k.shape[1] * k.shape[2]);  // kv_heads * head_dim
  const size_t elem = dtype_size(kv.k.dtype);
  ThreadPool::global().parallel_for(T, 16, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const auto slot = static_cast<size_t>(slots.ptr<const int32_t>()[t]);
      store_row(k.row<float>(t), row, kv.k.dtype,
                static_cast<char*>(kv.k.data) + slot * row * elem);
      store_row(v.row<float>(t), row, kv.v.dtype,
                static_cast<char*>(kv.v.data) + slot * row * elem);
    }
  });
}

}  // namespace ringlm::cpu
