#include "ops/rope_config.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ringlm::ops {

namespace {
// 1 / base^(2i / dim) for i < dim / 2, in f32 as transformers' default rope.
std::vector<float> default_inv_freq(double base, int dim) {
  std::vector<float> inv(static_cast<size_t>(dim / 2));
  for (int i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    inv[static_cast<size_t>(i)] = 1.0f / std::pow(static_cast<float>(base), exponent);
  }
  return inv;
}

void llama3(const io::RopeScaling& rope, std::vector<float>& inv) {
  RINGLM_USER_CHECK(rope.original_max_position_embeddings > 0,
                    "rope_type llama3 needs original_max_position_embeddings");
  RINGLM_USER_CHECK(rope.high_freq_factor != rope.low_freq_factor,
                    "rope_type llama3: high_freq_factor equals low_freq_factor");
  const auto old_ctx = static_cast<double>(rope.original_max_position_embeddings);
  const auto low_wavelen = static_cast<float>(old_ctx / rope.low_freq_factor);
  const auto high_wavelen = static_cast<float>(old_ctx / rope.high_freq_factor);
  const auto factor = static_cast<float>(rope.factor);
  const auto low = static_cast<float>(rope.low_freq_factor);
  const auto span = static_cast<float>(rope.high_freq_factor - rope.low_freq_factor);
  for (float& f : inv) {
    const float wavelen = static_cast<float>(2.0 * std::numbers::pi) / f;
    const float scaled = wavelen > low_wavelen ? f / factor : f;
    const float smooth = (static_cast<float>(old_ctx) / wavelen - low) / span;
    const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    f = medium ? smoothed : scaled;
  }
}

double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// YaRN as transformers 5: ramp between interpolated and extrapolated frequencies over the
// correction range of [beta_slow, beta_fast] rotations within original_max_position_embeddings.
float yarn(const io::RopeScaling& rope, int dim, int64_t max_position_embeddings,
           std::vector<float>& inv) {
  const double base = rope.rope_theta, factor = rope.factor;
  double attention = 0.0;
  if (rope.attention_factor) {
    attention = *rope.attention_factor;
  } else if (rope.mscale.value_or(0.0) != 0.0 && rope.mscale_all_dim.value_or(0.0) != 0.0) {
    attention = yarn_mscale(factor, *rope.mscale) / yarn_mscale(factor, *rope.mscale_all_dim);
  } else {
    attention = yarn_mscale(factor, 1.0);
  }
  const double beta_fast = rope.beta_fast != 0.0 ? rope.beta_fast : 32.0;
  const double beta_slow = rope.beta_slow != 0.0 ? rope.beta_slow : 1.0;
  const auto original = static_cast<double>(rope.original_max_position_embeddings > 0
                                                ? rope.original_max_position_embeddings
                                                : max_position_embeddings);
  RINGLM_USER_CHECK(original > 0, "rope_type yarn needs original_max_position_embeddings");
  auto correction_dim = [&](double rotations) {
    return (dim * std::log(original / (rotations * 2.0 * std::numbers::pi))) /
           (2.0 * std::log(base));
  };
  double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
  if (rope.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // transformers: prevent a singular ramp
  const auto f_factor = static_cast<float>(factor);
  const auto f_low = static_cast<float>(low), f_span = static_cast<float>(high - low);
  for (int i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    const float pos_freq = std::pow(static_cast<float>(base), exponent);
    const float extrapolation = 1.0f / pos_freq;
    const float interpolation = 1.0f / (f_factor * pos_freq);
    const float ramp = std::clamp((static_cast<float>(i) - f_low) / f_span, 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    inv[static_cast<size_t>(i)] =
        interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return static_cast<float>(attention);
}
}  // namespace

RopeTable make_rope_table(const io::RopeScaling& rope, int64_t head_dim,
                          int64_t max_position_embeddings) {
  RINGLM_USER_CHECK(head_dim > 0, "rope: head_dim ", head_dim, " must be > 0");
  RINGLM_USER_CHECK(rope.rope_theta > 0.0, "rope: rope_theta ", rope.rope_theta, " must be > 0");
  RINGLM_USER_CHECK(rope.partial_rotary_factor > 0.0 && rope.partial_rotary_factor <= 1.0,
                    "rope: partial_rotary_factor ", rope.partial_rotary_factor,
                    " must be in (0, 1]");
  const auto dim = static_cast<int>(static_cast<double>(head_dim) * rope.partial_rotary_factor);
  RINGLM_USER_CHECK(dim >= 2, "rope: rotary dim ", dim, " is too small");
  RopeTable table;
  table.rotary_dim = dim - dim % 2;
  const std::string& type = rope.rope_type;
  if (type == "default" || type == "linear" || type == "llama3") {
    table.inv_freq = default_inv_freq(rope.rope_theta, dim);
    if (type == "linear") {
      RINGLM_USER_CHECK(rope.factor > 0.0, "rope_type linear: factor ", rope.factor,
                        " must be > 0");
      for (float& f : table.inv_freq) f /= static_cast<float>(rope.factor);
    } else if (type == "llama3") {
      RINGLM_USER_CHECK(rope.factor > 0.0, "rope_type llama3: factor ", rope.factor,
                        " must be > 0");
      llama3(rope, table.inv_freq);
    }
  } else if (type == "yarn") {
    RINGLM_USER_CHECK(rope.factor > 0.0, "rope_type yarn: factor ", rope.factor, " must be > 0");
    table.inv_freq.resize(static_cast<size_t>(dim / 2));
    table.attention_scaling = yarn(rope, dim, max_position_embeddings, table.inv_freq);
  } else {
    RINGLM_USER_CHECK(false, "unsupported rope_type '", type,
                      "' (supported: default, linear, llama3, yarn)");
  }
  table.inv_freq.resize(static_cast<size_t>(table.rotary_dim / 2));
  return table;
}

}  // namespace ringlm::ops
