#include "models/rope_table.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace ringlm::models {

namespace {

// base^(2i / dim) in float32, like torch's base ** (arange(0, dim, 2).float() / dim).
float pos_freq(double base, int i, int dim) {
  const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
  return std::pow(static_cast<float>(base), exponent);
}

std::vector<float> default_inv_freq(double base, int dim) {
  std::vector<float> inv(static_cast<size_t>(dim / 2));
  for (int i = 0; i < dim / 2; ++i) inv[static_cast<size_t>(i)] = 1.0f / pos_freq(base, i, dim);
  return inv;
}

void apply_llama3(std::vector<float>& inv, const io::RopeScaling& rope) {
  RINGLM_USER_CHECK(rope.original_max_position_embeddings > 0,
                    "llama3 rope needs original_max_position_embeddings");
  const double old_ctx = static_cast<double>(rope.original_max_position_embeddings);
  const double low_freq_wavelen = old_ctx / rope.low_freq_factor;
  const double high_freq_wavelen = old_ctx / rope.high_freq_factor;
  for (float& f : inv) {
    const double wavelen = 2.0 * std::numbers::pi / static_cast<double>(f);
    float scaled = wavelen > low_freq_wavelen ? static_cast<float>(f / rope.factor) : f;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    if (medium) {
      const double smooth = (old_ctx / wavelen - rope.low_freq_factor) /
                            (rope.high_freq_factor - rope.low_freq_factor);
      scaled = static_cast<float>((1.0 - smooth) * scaled / rope.factor + smooth * scaled);
    }
    f = scaled;
  }
}

double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// YaRN: blend interpolated (÷factor) and extrapolated frequencies over a ramp of dimensions.
float apply_yarn(std::vector<float>& inv, const io::RopeScaling& rope, int dim, int64_t max_pos) {
  const double factor = rope.factor;
  const double original = rope.original_max_position_embeddings > 0
                              ? static_cast<double>(rope.original_max_position_embeddings)
                              : static_cast<double>(max_pos);
  double attention_factor;
  if (rope.attention_factor) {
    attention_factor = *rope.attention_factor;
  } else if (rope.mscale && rope.mscale_all_dim && *rope.mscale != 0 && *rope.mscale_all_dim != 0) {
    attention_factor =
        yarn_mscale(factor, *rope.mscale) / yarn_mscale(factor, *rope.mscale_all_dim);
  } else {
    attention_factor = yarn_mscale(factor, 1.0);
  }
  const double base = rope.rope_theta;
  auto correction_dim = [&](double rotations) {
    return (dim * std::log(original / (rotations * 2 * std::numbers::pi))) / (2 * std::log(base));
  };
  double low = correction_dim(rope.beta_fast);
  double high = correction_dim(rope.beta_slow);
  if (rope.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  for (size_t i = 0; i < inv.size(); ++i) {
    const float freq = pos_freq(base, static_cast<int>(i), dim);
    const float extrapolated = 1.0f / freq;
    const float interpolated = 1.0f / (static_cast<float>(factor) * freq);
    const float ramp =
        std::clamp(static_cast<float>((static_cast<double>(i) - low) / (high - low)), 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    inv[i] = interpolated * (1.0f - extrapolation_factor) + extrapolated * extrapolation_factor;
  }
  return static_cast<float>(attention_factor);
}

}  // namespace

ops::RopeTable make_rope_table(const io::RopeScaling& rope, int64_t head_dim,
                               int64_t max_position_embeddings) {
  const int dim = static_cast<int>(static_cast<double>(head_dim) * rope.partial_rotary_factor);
  RINGLM_USER_CHECK(dim > 0 && dim % 2 == 0, "rotary dimension ", dim,
                    " must be positive and even");
  ops::RopeTable table;
  table.rotary_dim = dim;
  const std::string& type = rope.rope_type;
  table.inv_freq = default_inv_freq(rope.rope_theta, dim);
  // Dynamic NTK at its initial length (seq_len <= max_position_embeddings) equals the default.
  if (type == "default" || type == "dynamic") {
  } else if (type == "linear") {
    for (float& f : table.inv_freq) f = static_cast<float>(f / rope.factor);
  } else if (type == "llama3") {
    apply_llama3(table.inv_freq, rope);
  } else if (type == "yarn") {
    table.attention_scaling = apply_yarn(table.inv_freq, rope, dim, max_position_embeddings);
  } else {
    RINGLM_USER_CHECK(false, "unsupported rope_type '", type,
                      "' (supported: default, linear, llama3, yarn, dynamic)");
  }
  return table;
}

}  // namespace ringlm::models
