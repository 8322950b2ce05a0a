// MLX-quantized weights on CUDA tensors are refused by the dispatch with a clear error, before any
// device memory is touched (so this needs no GPU: the tensors only carry the CUDA tag).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>

#include "core/error.h"
#include "ops/weight.h"

namespace ringlm::ops {
namespace {

void expect_refused(const std::function<void()>& call) {
  try {
    call();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MLX-quantized weights are not available on CUDA yet"),
              std::string::npos)
        << e.what();
  }
}

TEST(CudaQuantized, MatmulAndEmbeddingRefuseQuantizedWeights) {
  // Never dereferenced: the dispatch refuses on the device tag alone.
  alignas(64) static uint32_t fake[64];
  auto on_cuda = [](DType dtype, std::initializer_list<int64_t> dims) {
    return Tensor(fake, dtype, dims, Device::CUDA);
  };
  QuantizedMatrix q;
  q.codes = on_cuda(DType::U32, {4, 8});  // [4, 64] at 4 bits
  q.scales = on_cuda(DType::BF16, {4, 2});
  q.biases = on_cuda(DType::BF16, {4, 2});
  q.bits = 4;
  q.group_size = 32;
  const Weight w = Weight::quantized(q);
  Tensor x = on_cuda(DType::F32, {2, 64}), y = on_cuda(DType::F32, {2, 4});
  expect_refused([&] { matmul(x, w, Tensor(), y); });
  Tensor ids = on_cuda(DType::I32, {2}), out = on_cuda(DType::F32, {2, 64});
  expect_refused([&] { embedding(ids, w, 1.0f, out); });
}

}  // namespace
}  // namespace ringlm::ops
