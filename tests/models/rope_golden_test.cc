// ops::make_rope_table against the rotary tables transformers built for each fixture (saved in
// the goldens as inv_freq, or full_attention_inv_freq / sliding_attention_inv_freq for gemma3).
#include <gtest/gtest.h>

#include "io/model_config.h"
#include "models/golden_util.h"
#include "ops/rope_config.h"

namespace ringlm {
namespace {

void expect_table(const io::ModelConfig& config, const std::string& layer_type,
                  const Tensor& golden) {
  const ops::RopeTable table = ops::make_rope_table(config.rope.at(layer_type), config.head_dim,
                                                    config.max_position_embeddings);
  ASSERT_EQ(static_cast<int64_t>(table.inv_freq.size()), golden.numel());
  for (int64_t i = 0; i < golden.numel(); ++i) {
    const float want = golden.ptr<float>()[i];
    // Within 2 ulp of torch's float32 pow and divisions.
    EXPECT_NEAR(table.inv_freq[static_cast<size_t>(i)], want, 2.5e-7f * std::fabs(want))
        << layer_type << " index " << i;
  }
}

TEST(RopeGolden, TablesEqualTransformers) {
  for (const auto& name : testing::all_fixtures()) {
    SCOPED_TRACE(name);
    const io::ModelConfig config = io::load_model_config(testing::fixture_model_dir(name));
    io::SafetensorsFile golden(std::string(RINGLM_FIXTURES_DIR) + "/goldens/" + name +
                               ".safetensors");
    if (golden.has("inv_freq")) {
      expect_table(config, "full_attention", golden.get("inv_freq"));
    } else {
      expect_table(config, "full_attention", golden.get("full_attention_inv_freq"));
      expect_table(config, "sliding_attention", golden.get("sliding_attention_inv_freq"));
    }
  }
}

}  // namespace
}  // namespace ringlm
