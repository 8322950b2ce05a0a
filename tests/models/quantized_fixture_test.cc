// The MLX-quantized fixtures were written by tools/quant/mlx_quantize.py (numpy); here they are
// checked against ringlm's own MLX codec (kv/affine_codec.h, itself tested against MLX): every
// quantized module's codes, scales and biases are what affine_quantize gives for the dense
// fixture's weights, and the dense twin holds exactly dequant(codes). So the quantizer, the
// packing and the twin are each checked by an independent implementation.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "kv/affine_codec.h"
#include "models/golden_util.h"
#include "ops/reference.h"

namespace ringlm {
namespace {

float widen(const Tensor& t, int64_t i) {
  return ops::reference::load_f32(t, i);
}

float rounded(float x, DType dtype) {
  return dtype == DType::BF16  ? bf16_to_f32(f32_to_bf16(x))
         : dtype == DType::F16 ? f16_to_f32(f32_to_f16(x))
                               : x;
}

class QuantizedFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantizedFixture, IsTheMlxQuantizationOfTheDenseFixture) {
  const std::string name = GetParam();
  const io::WeightStore dense(testing::fixture_model_dir(name));
  const io::WeightStore quant(testing::fixture_model_dir(name + "_mlx"));
  const io::WeightStore twin(testing::fixture_model_dir(name + "_mlx_dense"));
  const io::ModelConfig config = io::load_model_config(testing::fixture_model_dir(name + "_mlx"));
  int checked = 0;
  for (const std::string& tensor : quant.names()) {
    if (tensor.size() < 7 || tensor.compare(tensor.size() - 7, 7, ".scales") != 0) continue;
    const std::string module = tensor.substr(0, tensor.size() - 7);
    SCOPED_TRACE(module);
    kv::AffineFormat format{config.quantization.bits, config.quantization.group_size};
    if (const auto it = config.quantization.overrides.find(module);
        it != config.quantization.overrides.end())
      format = {it->second.second, it->second.first};
    const Tensor w = dense.get(module + ".weight");  // F32[N, K]
    const Tensor codes = quant.get(module + ".weight");
    const Tensor scales = quant.get(module + ".scales");
    const Tensor biases = quant.get(module + ".biases");
    const Tensor deq = twin.get(module + ".weight");
    const int64_t rows = w.size(0), cols = w.size(1);
    const int64_t words = kv::affine_packed_words(cols, format);
    const int64_t groups = kv::affine_groups(cols, format);
    ASSERT_EQ(codes.size(1), words);
    std::vector<uint32_t> my_codes(static_cast<size_t>(words));
    std::vector<float> my_scales(static_cast<size_t>(groups)), my_biases(my_scales.size());
    std::vector<float> stored_scales(my_scales.size()), stored_biases(my_scales.size());
    std::vector<float> my_deq(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      kv::affine_quantize(w.row<const float>(r), cols, format, my_codes.data(), my_scales.data(),
                          my_biases.data());
      for (int64_t i = 0; i < words; ++i)
        ASSERT_EQ(codes.row<const uint32_t>(r)[i], my_codes[static_cast<size_t>(i)])
            << "row " << r << " word " << i;
      for (int64_t g = 0; g < groups; ++g) {
        // Stored in the fixture's scale dtype, rounded to nearest even.
        const auto gi = static_cast<size_t>(g);
        stored_scales[gi] = widen(scales, r * groups + g);
        stored_biases[gi] = widen(biases, r * groups + g);
        ASSERT_EQ(stored_scales[gi], rounded(my_scales[gi], scales.dtype))
            << "row " << r << " group " << g;
        ASSERT_EQ(stored_biases[gi], rounded(my_biases[gi], biases.dtype))
            << "row " << r << " group " << g;
      }
      kv::affine_dequantize(codes.row<const uint32_t>(r), stored_scales.data(),
                            stored_biases.data(), cols, format, my_deq.data());
      for (int64_t c = 0; c < cols; ++c)
        ASSERT_EQ(deq.row<const float>(r)[c], my_deq[static_cast<size_t>(c)])
            << "row " << r << " col " << c;
    }
    ++checked;
  }
  EXPECT_GT(checked, 10);
  // Everything else is the dense fixture's tensor, unchanged, in both copies.
  for (const std::string& tensor : dense.names()) {
    const std::string module = tensor.substr(0, tensor.size() - 7);
    if (quant.has(module + ".scales")) continue;
    const Tensor a = dense.get(tensor), b = quant.get(tensor), c = twin.get(tensor);
    ASSERT_EQ(a.nbytes(), b.nbytes()) << tensor;
    ASSERT_EQ(std::memcmp(a.data, b.data, a.nbytes()), 0) << tensor;
    ASSERT_EQ(std::memcmp(a.data, c.data, a.nbytes()), 0) << tensor;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, QuantizedFixture,
                         ::testing::Values(std::string("llama3"), std::string("gemma3"),
                                           std::string("qwen3")),
                         [](const auto& param_info) { return std::string(param_info.param); });

}  // namespace
}  // namespace ringlm
