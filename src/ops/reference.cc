#include "ops/reference.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kv/affine_codec.h"
#include "kv/turbo_codec.h"

namespace ringlm::ops::reference {

namespace {
// Element e (of kv_heads·head_dim) of slot `slot` of K (or V), dequantized from an affine view as
// scale·code + bias in f32 (bf16 scale and bias), or widened from a dense one.
float kv_value(const KvLayerView& kv, bool value, int64_t slot, int64_t e) {
  const Tensor& data = value ? kv.v : kv.k;
  const int64_t D = kv.head_dim();
  if (!kv.affine()) return load_f32(data, slot * kv.kv_heads() * D + e);
  const int64_t row = slot * kv.kv_heads() + e / D, i = e % D;
  const int64_t groups = D / kv.group_size, words = D * kv.bits / 32;
  const uint32_t code = kv::affine_code(data.ptr<const uint32_t>() + row * words, i, kv.bits);
  const int64_t gi = row * groups + i / kv.group_size;
  const float scale = bf16_to_f32((value ? kv.v_scales : kv.k_scales).ptr<const bf16_t>()[gi]);
  const float bias = bf16_to_f32((value ? kv.v_biases : kv.k_biases).ptr<const bf16_t>()[gi]);
  return scale * static_cast<float>(code) + bias;
}

// Row (slot, kv head) of a TurboQuant view decoded as kv/turbo_codec.h: keys (code + zero)·scale,
// values un-rotated at once (eager, where the kernel defers the rotation). F32[head_dim].
std::vector<float> turbo_row(const KvLayerView& kv, bool value, int64_t row) {
  const int D = kv.head_dim();
  const int64_t groups = D / kv::kTurboGroup;
  std::vector<float> out(static_cast<size_t>(D));
  if (!value) {
    kv::turbo_key_dequantize(kv.k.ptr<const uint8_t>() + row * kv::turbo_code_bytes(D, kv.bits),
                             kv.k_scales.ptr<const f16_t>() + row * groups,
                             kv.k_biases.ptr<const f16_t>() + row * groups, D, kv.bits, out.data());
  } else {
    kv::turbo_value_dequantize(
        kv.v.ptr<const uint8_t>() + row * kv::turbo_code_bytes(D, kv.value_bits),
        kv.v_scales.ptr<const f16_t>() + row * groups, D, kv.value_bits, out.data());
  }
  return out;
}

// MLX affine quantization of token t's rows into slot `slot` (reference kv_write).
void quantize_token(const float* src, int64_t slot, const KvLayerView& kv, bool value) {
  const int64_t H = kv.kv_heads(), D = kv.head_dim();
  const int64_t groups = D / kv.group_size, words = D * kv.bits / 32;
  const kv::AffineFormat format{kv.bits, kv.group_size};
  std::vector<float> scales(static_cast<size_t>(groups)), biases(scales.size());
  for (int64_t h = 0; h < H; ++h) {
    const int64_t row = slot * H + h;
    kv::affine_quantize(src + h * D, D, format, (value ? kv.v : kv.k).ptr<uint32_t>() + row * words,
                        scales.data(), biases.data());
    for (int64_t g = 0; g < groups; ++g) {
      (value ? kv.v_scales : kv.k_scales).ptr<bf16_t>()[row * groups + g] =
          f32_to_bf16(scales[static_cast<size_t>(g)]);
      (value ? kv.v_biases : kv.k_biases).ptr<bf16_t>()[row * groups + g] =
          f32_to_bf16(biases[static_cast<size_t>(g)]);
    }
  }
}
}  // namespace

float load_f32(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::F32:
      return t.ptr<const float>()[i];
    case DType::BF16:
      return bf16_to_f32(t.ptr<const bf16_t>()[i]);
    case DType::F16:
      return f16_to_f32(t.ptr<const f16_t>()[i]);
    default:
      RINGLM_FAIL("reference: not a float dtype: ", dtype_name(t.dtype));
  }
}

namespace {
float& at(const Tensor& t, int64_t r, int64_t c) {
  return t.ptr<float>()[r * t.strides[0] + c];
}
}  // namespace

void matmul(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  const int64_t M = x.shape[0], K = x.shape[1], N = w.shape[0];
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double sum = bias.empty() ? 0.0 : load_f32(bias, n);
      for (int64_t k = 0; k < K; ++k) sum += double{at(x, m, k)} * load_f32(w, n * K + k);
      at(y, m, n) = static_cast<float>(sum);
    }
  }
}

void embedding(const Tensor& ids, const Tensor& table, float scale, Tensor& out) {
  const int64_t H = table.shape[1];
  for (int64_t m = 0; m < ids.shape[0]; ++m) {
    const int64_t id = ids.ptr<const int32_t>()[m];
    for (int64_t h = 0; h < H; ++h) at(out, m, h) = load_f32(table, id * H + h) * scale;
  }
}

void rms_norm(const Tensor& x, const Tensor& weight, const RmsNormConfig& config, Tensor& out) {
  const int64_t H = x.shape[1];
  for (int64_t m = 0; m < x.shape[0]; ++m) {
    double sumsq = 0.0;
    for (int64_t h = 0; h < H; ++h) sumsq += double{at(x, m, h)} * at(x, m, h);
    const double r = 1.0 / std::sqrt(sumsq / static_cast<double>(H) + config.eps);
    for (int64_t h = 0; h < H; ++h) {
      const double w = load_f32(weight, h);
      at(out, m, h) = static_cast<float>(at(x, m, h) * r * (config.unit_offset ? 1.0 + w : w));
    }
  }
}

void add_inplace(Tensor& x, const Tensor& y) {
  for (int64_t m = 0; m < x.shape[0]; ++m)
    for (int64_t h = 0; h < x.shape[1]; ++h) at(x, m, h) += at(y, m, h);
}

void rope(Tensor& x, const Tensor& positions, const RopeTable& table) {
  const int64_t heads = x.shape[1], D = x.shape[2], half = table.rotary_dim / 2;
  for (int64_t t = 0; t < x.shape[0]; ++t) {
    const auto pos = static_cast<float>(positions.ptr<const int32_t>()[t]);
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x.ptr<float>() + (t * heads + h) * D;
      for (int64_t i = 0; i < half; ++i) {
        // The angle in f32 as transformers (inv_freq @ position_ids in float32).
        const double angle = pos * table.inv_freq[static_cast<size_t>(i)];
        const double c = std::cos(angle) * table.attention_scaling;
        const double s = std::sin(angle) * table.attention_scaling;
        const double x1 = v[i], x2 = v[i + half];
        v[i] = static_cast<float>(x1 * c - x2 * s);
        v[i + half] = static_cast<float>(x2 * c + x1 * s);
      }
    }
  }
}

void gated_activation(const Tensor& gate, const Tensor& up, Activation activation, Tensor& out) {
  for (int64_t m = 0; m < gate.shape[0]; ++m) {
    for (int64_t i = 0; i < gate.shape[1]; ++i) {
      const double g = at(gate, m, i), u = at(up, m, i);
      double a;
      if (activation == Activation::SiLU) {
        a = g / (1.0 + std::exp(-g));
      } else {
        a = 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
      }
      at(out, m, i) = static_cast<float>(a * u);
    }
  }
}

void softmax(Tensor& x) {
  const int64_t N = x.shape[1];
  for (int64_t m = 0; m < x.shape[0]; ++m) {
    double mx = -std::numeric_limits<double>::infinity();
    bool nan = false;
    for (int64_t n = 0; n < N; ++n) {
      nan = nan || std::isnan(at(x, m, n));
      mx = std::max(mx, double{at(x, m, n)});
    }
    if (nan || mx == -std::numeric_limits<double>::infinity()) {
      for (int64_t n = 0; n < N; ++n) at(x, m, n) = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    double sum = 0.0;
    for (int64_t n = 0; n < N; ++n) sum += std::exp(at(x, m, n) - mx);
    for (int64_t n = 0; n < N; ++n)
      at(x, m, n) = static_cast<float>(std::exp(at(x, m, n) - mx) / sum);
  }
}

void argmax(const Tensor& x, Tensor& out) {
  for (int64_t m = 0; m < x.shape[0]; ++m) {
    int64_t best = 0;
    for (int64_t n = 0; n < x.shape[1]; ++n) {
      const float v = at(x, m, n);
      if (std::isnan(v)) {  // torch.argmax: NaN is the maximum, the first one wins
        best = n;
        break;
      }
      if (v > at(x, m, best)) best = n;
    }
    out.ptr<int32_t>()[m] = static_cast<int32_t>(best);
  }
}

void softcap(Tensor& x, float cap) {
  for (int64_t m = 0; m < x.shape[0]; ++m)
    for (int64_t n = 0; n < x.shape[1]; ++n)
      at(x, m, n) = static_cast<float>(cap * std::tanh(double{at(x, m, n)} / cap));
}

void attention(const Tensor& q, const KvLayerView& kv, const AttentionRows& rows,
               const AttentionParams& params, Tensor& out) {
  const int64_t QH = q.shape[1], D = q.shape[2], KVH = kv.kv_heads(), bt = kv.block_tokens();
  const int64_t group = QH / KVH;
  for (int r = 0; r < rows.num_rows; ++r) {
    const int64_t q0 = rows.query_start[r], n = rows.query_start[r + 1] - q0;
    const int64_t ctx = rows.context_len[r];
    if (n == 0) continue;
    // Only queries at positions in [query_pos_begin, query_pos_end) are computed.
    const auto computed = [&](int64_t pos) {
      return pos >= rows.query_pos_begin && pos < rows.query_pos_end;
    };
    // Explicit mask [n, ctx]: query i sits at position ctx - n + i.
    std::vector<char> mask(static_cast<size_t>(n * ctx)), needed(static_cast<size_t>(ctx));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = ctx - n + i;
      if (!computed(pos)) continue;
      for (int64_t j = 0; j < ctx; ++j) {
        const bool causal = j <= pos;
        const bool in_window = params.window <= 0 || j > pos - params.window;
        const bool sink = params.window > 0 && j < params.sink_tokens;
        const bool visible = causal && (in_window || sink);
        mask[static_cast<size_t>(i * ctx + j)] = visible;
        needed[static_cast<size_t>(j)] |= static_cast<char>(visible);
      }
    }
    // Dense copies of the keys and values some query sees: [ctx, KVH, D] (the others may sit in
    // released blocks, so they are never read).
    std::vector<double> keys(static_cast<size_t>(ctx * KVH * D)), vals(keys.size());
    for (int64_t j = 0; j < ctx; ++j) {
      if (!needed[static_cast<size_t>(j)]) continue;
      const int64_t block = rows.block_table[int64_t{r} * rows.max_blocks + j / bt];
      const int64_t slot = block * bt + j % bt;
      if (kv.turbo()) {
        for (int64_t g = 0; g < KVH; ++g) {
          const std::vector<float> kr = turbo_row(kv, false, slot * KVH + g);
          const std::vector<float> vr = turbo_row(kv, true, slot * KVH + g);
          for (int64_t d = 0; d < D; ++d) {
            keys[static_cast<size_t>((j * KVH + g) * D + d)] = kr[static_cast<size_t>(d)];
            vals[static_cast<size_t>((j * KVH + g) * D + d)] = vr[static_cast<size_t>(d)];
          }
        }
        continue;
      }
      for (int64_t e = 0; e < KVH * D; ++e) {
        keys[static_cast<size_t>(j * KVH * D + e)] = kv_value(kv, false, slot, e);
        vals[static_cast<size_t>(j * KVH * D + e)] = kv_value(kv, true, slot, e);
      }
    }
    std::vector<double> scores(static_cast<size_t>(ctx));
    for (int64_t i = 0; i < n; ++i) {
      if (!computed(ctx - n + i)) continue;
      for (int64_t h = 0; h < QH; ++h) {
        const int64_t g = h / group;
        const float* qv = q.ptr<const float>() + ((q0 + i) * QH + h) * D;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < ctx; ++j) {
          if (!mask[static_cast<size_t>(i * ctx + j)]) continue;
          double s = 0.0;
          for (int64_t d = 0; d < D; ++d)
            s += qv[d] * keys[static_cast<size_t>((j * KVH + g) * D + d)];
          s *= params.scale;
          if (params.softcap > 0.0f) s = params.softcap * std::tanh(s / params.softcap);
          scores[static_cast<size_t>(j)] = s;
          mx = std::max(mx, s);
        }
        double sum = 0.0;
        std::vector<double> acc(static_cast<size_t>(D), 0.0);
        for (int64_t j = 0; j < ctx; ++j) {
          if (!mask[static_cast<size_t>(i * ctx + j)]) continue;
          const double p = std::exp(scores[static_cast<size_t>(j)] - mx);
          sum += p;
          for (int64_t d = 0; d < D; ++d)
            acc[static_cast<size_t>(d)] += p * vals[static_cast<size_t>((j * KVH + g) * D + d)];
        }
        float* o = out.ptr<float>() + ((q0 + i) * QH + h) * D;
        for (int64_t d = 0; d < D; ++d)
          o[d] = static_cast<float>(acc[static_cast<size_t>(d)] / sum);
      }
    }
  }
}

void kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, KvLayerView& kv) {
  const int64_t row = k.shape[1] * k.shape[2];
  for (int64_t t = 0; t < k.shape[0]; ++t) {
    const int64_t slot = slots.ptr<const int32_t>()[t];
    if (kv.turbo()) {
      const int64_t D = kv.head_dim(), groups = D / kv::kTurboGroup;
      const int kb = kv::turbo_code_bytes(static_cast<int>(D), kv.bits);
      const int vb = kv::turbo_code_bytes(static_cast<int>(D), kv.value_bits);
      for (int64_t h = 0; h < kv.kv_heads(); ++h) {
        const int64_t r = slot * kv.kv_heads() + h;
        kv::turbo_key_quantize(k.ptr<const float>() + t * row + h * D, static_cast<int>(D), kv.bits,
                               kv.k.ptr<uint8_t>() + r * kb, kv.k_scales.ptr<f16_t>() + r * groups,
                               kv.k_biases.ptr<f16_t>() + r * groups);
        kv::turbo_value_quantize(v.ptr<const float>() + t * row + h * D, static_cast<int>(D),
                                 kv.value_bits, kv.v.ptr<uint8_t>() + r * vb,
                                 kv.v_scales.ptr<f16_t>() + r * groups);
      }
      continue;
    }
    if (kv.affine()) {
      quantize_token(k.ptr<const float>() + t * row, slot, kv, false);
      quantize_token(v.ptr<const float>() + t * row, slot, kv, true);
      continue;
    }
    for (int64_t e = 0; e < row; ++e) {
      const float kf = k.ptr<const float>()[t * row + e], vf = v.ptr<const float>()[t * row + e];
      const int64_t dst = slot * row + e;
      switch (kv.k.dtype) {
        case DType::F32:
          kv.k.ptr<float>()[dst] = kf;
          kv.v.ptr<float>()[dst] = vf;
          break;
        case DType::BF16:
          kv.k.ptr<bf16_t>()[dst] = f32_to_bf16(kf);
          kv.v.ptr<bf16_t>()[dst] = f32_to_bf16(vf);
          break;
        case DType::F16:
          kv.k.ptr<f16_t>()[dst] = f32_to_f16(kf);
          kv.v.ptr<f16_t>()[dst] = f32_to_f16(vf);
          break;
        default:
          RINGLM_FAIL("reference kv_write: unsupported dtype");
      }
    }
  }
}

}  // namespace ringlm::ops::reference

namespace ringlm::ops::reference {

float dequantized_at(const QuantizedMatrix& w, int64_t n, int64_t k) {
  // The codes of one row form one LSB-first bit stream: code k sits at bits [k·bits, (k+1)·bits).
  const auto* row = w.codes.ptr<const uint32_t>() + n * w.codes.shape[1];
  uint32_t code = 0;
  for (int b = 0; b < w.bits; ++b) {
    const int64_t bit = k * w.bits + b;
    code |= ((row[bit / 32] >> (bit % 32)) & 1u) << b;
  }
  const int64_t g = n * w.scales.shape[1] + k / w.group_size;
  const float product = load_f32(w.scales, g) * static_cast<float>(code);
  return product + load_f32(w.biases, g);
}

void matmul_quantized(const Tensor& x, const QuantizedMatrix& w, const Tensor& bias, Tensor& y) {
  const int64_t M = x.shape[0], K = w.cols(), N = w.rows();
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double sum = bias.empty() ? 0.0 : load_f32(bias, n);
      for (int64_t k = 0; k < K; ++k) sum += double{at(x, m, k)} * dequantized_at(w, n, k);
      at(y, m, n) = static_cast<float>(sum);
    }
  }
}

void embedding_quantized(const Tensor& ids, const QuantizedMatrix& table, float scale,
                         Tensor& out) {
  const int64_t H = table.cols();
  for (int64_t m = 0; m < ids.shape[0]; ++m) {
    const int64_t id = ids.ptr<const int32_t>()[m];
    for (int64_t h = 0; h < H; ++h) at(out, m, h) = dequantized_at(table, id, h) * scale;
  }
}

}  // namespace ringlm::ops::reference
