// Bad arguments to ops give a ringlm::Error that names the op and the problem, never a crash.
#include <gtest/gtest.h>

#include <cstring>

#include <string>
#include <vector>

#include "op_test_util.h"
#include "ops/ops.h"
#include "ops/weight.h"

namespace ringlm::ops {
namespace {

using testing::Owned;

// Runs fn, expects a ringlm::Error whose message contains every fragment.
template <typename Fn>
void expect_error(Fn&& fn, std::initializer_list<const char*> fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected ringlm::Error";
  } catch (const Error& e) {
    for (const char* f : fragments)
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << "message: " << e.what();
  }
}

TEST(OpErrors, Matmul) {
  Owned x(DType::F32, {2, 8}), w(DType::BF16, {4, 8}), y(DType::F32, {2, 4});
  Owned w_bad_k(DType::BF16, {4, 7}), y_bad(DType::F32, {2, 5}), x_bf16(DType::BF16, {2, 8});
  Owned w_i32(DType::I32, {4, 8}), bias_bad(DType::F32, {3});
  expect_error([&] { matmul(x.t(), w_bad_k.t(), Tensor(), y.t()); }, {"matmul w", "[4, 7]"});
  expect_error([&] { matmul(x.t(), w.t(), Tensor(), y_bad.t()); }, {"matmul y", "[2, 5]"});
  expect_error([&] { matmul(x_bf16.t(), w.t(), Tensor(), y.t()); }, {"matmul x", "BF16"});
  expect_error([&] { matmul(x.t(), w_i32.t(), Tensor(), y.t()); }, {"matmul w", "I32"});
  expect_error([&] { matmul(x.t(), w.t(), bias_bad.t(), y.t()); }, {"matmul bias"});
  // Output overlapping the input.
  Owned xy(DType::F32, {4, 4});
  Owned w44(DType::F32, {4, 4});
  expect_error([&] { matmul(xy.t(), w44.t(), Tensor(), xy.t()); }, {"overlap"});
  // A CUDA tensor while only the CPU backend is built.
  Tensor on_gpu = w.t();
  on_gpu.device = Device::CUDA;
  expect_error([&] { matmul(x.t(), on_gpu, Tensor(), y.t()); },
               {"matmul", "CUDA backend not built"});
}

TEST(OpErrors, EmbeddingAndNorms) {
  Owned table(DType::F16, {10, 6}), ids(DType::I32, {3}), out(DType::F32, {3, 6});
  ids.p<int32_t>()[0] = 1;
  ids.p<int32_t>()[1] = 10;  // out of range
  ids.p<int32_t>()[2] = 2;
  expect_error([&] { embedding(ids.t(), table.t(), 1.0f, out.t()); },
               {"embedding", "token id 10", "[0, 10)"});
  ids.p<int32_t>()[1] = -1;
  expect_error([&] { embedding(ids.t(), table.t(), 1.0f, out.t()); }, {"token id -1"});
  Owned ids_f(DType::F32, {3});
  expect_error([&] { embedding(ids_f.t(), table.t(), 1.0f, out.t()); }, {"embedding ids", "F32"});

  Owned x(DType::F32, {3, 6}), w_bad(DType::F32, {5});
  expect_error([&] { rms_norm(x.t(), w_bad.t(), RmsNormConfig{}, x.t()); }, {"rms_norm weight"});
  Owned y_bad(DType::F32, {3, 5});
  expect_error([&] { add_inplace(x.t(), y_bad.t()); }, {"add_inplace y"});
  // add_rms_norm checks everything before it writes: x keeps its bits on a bad weight.
  Owned r(DType::F32, {3, 6}), x_before(DType::F32, {3, 6});
  testing::fill_uniform(x, 5);
  std::memcpy(x_before.t().data, x.t().data, x.t().nbytes());
  expect_error([&] { add_rms_norm(x.t(), y_bad.t(), w_bad.t(), RmsNormConfig{}, r.t()); },
               {"add_rms_norm residual"});
  expect_error([&] { add_rms_norm(x.t(), r.t(), w_bad.t(), RmsNormConfig{}, r.t()); },
               {"add_rms_norm weight"});
  EXPECT_TRUE(testing::bitwise_equal(x.t(), x_before.t()));
  Owned up_bad(DType::F32, {2, 6});
  expect_error([&] { gated_activation(x.t(), up_bad.t(), Activation::SiLU, x.t()); },
               {"gated_activation up"});
  // 16-bit outputs (pre-rounded matmul inputs) are a CUDA feature: the CPU refuses them.
  Owned w(DType::F32, {6}), half_out(DType::BF16, {3, 6});
  expect_error([&] { rms_norm(x.t(), w.t(), RmsNormConfig{}, half_out.t()); },
               {"rms_norm out", "BF16"});
  expect_error([&] { add_rms_norm(x.t(), r.t(), w.t(), RmsNormConfig{}, half_out.t()); },
               {"add_rms_norm out", "BF16"});
  expect_error([&] { gated_activation(x.t(), r.t(), Activation::SiLU, half_out.t()); },
               {"gated_activation out", "BF16"});
}

// CPU matmuls take F32 x whatever the weights (ops/weight.h matmul_input_dtype).
TEST(OpErrors, MatmulInputDtypeIsF32OnTheCpu) {
  Owned w(DType::BF16, {4, 8});
  const Weight weight(w.t());
  for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{512}})
    EXPECT_EQ(matmul_input_dtype(weight, rows), DType::F32) << rows;
}

TEST(OpErrors, Reductions) {
  Owned x(DType::F32, {2, 5}), out_bad(DType::F32, {2}), empty(DType::F32, {2, 0});
  Owned out(DType::I32, {2});
  expect_error([&] { argmax(x.t(), out_bad.t()); }, {"argmax out", "F32"});
  expect_error([&] { argmax(empty.t(), out.t()); }, {"argmax", "empty"});
  expect_error([&] { softcap(x.t(), 0.0f); }, {"softcap", "cap"});
  Owned x3(DType::F32, {2, 5, 1});
  expect_error([&] { softmax(x3.t()); }, {"softmax x"});
}

TEST(OpErrors, Rope) {
  Owned x(DType::F32, {2, 3, 8}), pos(DType::I32, {2});
  RopeTable table;
  table.rotary_dim = 10;  // > head_dim
  table.inv_freq.assign(5, 1.0f);
  expect_error([&] { rope(x.t(), pos.t(), table); }, {"rope", "rotary_dim 10"});
  table.rotary_dim = 8;
  expect_error([&] { rope(x.t(), pos.t(), table); }, {"rope", "inv_freq"});
  table.inv_freq.assign(4, 1.0f);
  pos.p<int32_t>()[1] = -3;
  expect_error([&] { rope(x.t(), pos.t(), table); }, {"rope", "position -3"});
  Owned pos_bad(DType::I32, {3});
  expect_error([&] { rope(x.t(), pos_bad.t(), table); }, {"rope positions"});
}

class AttentionErrors : public ::testing::Test {
 protected:
  // 2 rows: a 3-token prefill and a decode at context 5; blocks of 4 tokens, 4 blocks.
  Owned k{DType::BF16, {4, 4, 2, 8}}, v{DType::BF16, {4, 4, 2, 8}};
  Owned q{DType::F32, {4, 4, 8}}, out{DType::F32, {4, 4, 8}};
  std::vector<int32_t> query_start{0, 3, 4}, context_len{3, 5}, table{1, 0, 2, 3};
  AttentionRows rows() { return {2, query_start.data(), context_len.data(), table.data(), 2}; }
  KvLayerView kv() { return {k.t(), v.t()}; }
  void run() { attention(q.t(), kv(), rows(), AttentionParams{}, out.t()); }
};

TEST_F(AttentionErrors, ValidLayoutRuns) {
  EXPECT_NO_THROW(run());
}

TEST_F(AttentionErrors, BadLayouts) {
  query_start = {0, 3, 5};
  expect_error([&] { run(); }, {"query_start[num_rows]", "4 tokens"});
  query_start = {0, 3, 4};
  context_len = {2, 5};
  expect_error([&] { run(); }, {"row 0", "context_len 2"});
  context_len = {3, 9};
  expect_error([&] { run(); }, {"row 1", "needs 3 blocks", "max_blocks is 2"});
  context_len = {3, 5};
  table = {1, 0, 2, 7};
  expect_error([&] { run(); }, {"block_table[1] = 7", "[0, 4)"});
}

TEST_F(AttentionErrors, BadTensors) {
  Owned q_bad_heads(DType::F32, {4, 3, 8});
  expect_error([&] { attention(q_bad_heads.t(), kv(), rows(), AttentionParams{}, out.t()); },
               {"3 query heads", "2 kv heads"});
  Owned q_bad_dim(DType::F32, {4, 4, 6});
  expect_error([&] { attention(q_bad_dim.t(), kv(), rows(), AttentionParams{}, out.t()); },
               {"attention q"});
  Owned v_f16(DType::F16, {4, 4, 2, 8});
  KvLayerView mixed{k.t(), v_f16.t()};
  expect_error([&] { attention(q.t(), mixed, rows(), AttentionParams{}, out.t()); },
               {"attention kv.v", "F16"});
  AttentionParams params;
  params.window = -1;
  expect_error([&] { attention(q.t(), kv(), rows(), params, out.t()); }, {"window -1"});
}

TEST(OpErrors, KvWrite) {
  Owned ck(DType::BF16, {2, 4, 2, 8}), cv(DType::BF16, {2, 4, 2, 8});
  Owned k(DType::F32, {3, 2, 8}), v(DType::F32, {3, 2, 8}), slots(DType::I32, {3});
  KvLayerView kv{ck.t(), cv.t()};
  slots.p<int32_t>()[0] = 0;
  slots.p<int32_t>()[1] = 8;  // capacity is 8
  slots.p<int32_t>()[2] = 1;
  expect_error([&] { kv_write(k.t(), v.t(), slots.t(), kv); }, {"kv_write", "slot 8", "[0, 8)"});
  Owned k_bad(DType::F32, {3, 1, 8});
  slots.p<int32_t>()[1] = 2;
  expect_error([&] { kv_write(k_bad.t(), v.t(), slots.t(), kv); }, {"kv_write k"});
  EXPECT_NO_THROW(kv_write(k.t(), v.t(), slots.t(), kv));
  slots.p<int32_t>()[2] = 0;  // same slot as token 0
  expect_error([&] { kv_write(k.t(), v.t(), slots.t(), kv); },
               {"kv_write", "slot 0", "two tokens"});
}

// prepare_attention: k, v and the view go together; a wrong norm weight, rope table or slot is
// rejected by the checks of the op it stands for, naming it.
TEST(OpErrors, PrepareAttention) {
  Owned ck(DType::BF16, {2, 4, 2, 8}), cv(DType::BF16, {2, 4, 2, 8});
  Owned q(DType::F32, {3, 4, 8}), k(DType::F32, {3, 2, 8}), v(DType::F32, {3, 2, 8});
  Owned pos(DType::I32, {3}), slots(DType::I32, {3}), norm_bad(DType::F32, {7});
  for (int t = 0; t < 3; ++t) slots.p<int32_t>()[t] = t;
  KvLayerView kv{ck.t(), cv.t()};
  RopeTable table;
  table.rotary_dim = 8;
  table.inv_freq.assign(4, 1.0f);
  AttentionInputs in{q.t(), k.t(), v.t(), pos.t(), slots.t()};
  const QkTransform plain{nullptr, nullptr, {}, &table};
  expect_error([&] { prepare_attention(in, plain, nullptr); }, {"prepare_attention", "together"});
  const QkTransform bad_norm{&norm_bad.t(), nullptr, {}, &table};
  expect_error([&] { prepare_attention(in, bad_norm, &kv); }, {"rms_norm weight", "[7]"});
  table.rotary_dim = 10;
  expect_error([&] { prepare_attention(in, plain, &kv); }, {"rope", "rotary_dim 10"});
  table.rotary_dim = 8;
  slots.p<int32_t>()[2] = 8;  // capacity is 8
  expect_error([&] { prepare_attention(in, plain, &kv); }, {"kv_write", "slot 8"});
  slots.p<int32_t>()[2] = 2;
  EXPECT_NO_THROW(prepare_attention(in, plain, &kv));
}

}  // namespace
}  // namespace ringlm::ops
