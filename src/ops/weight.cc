// Weight and the matmul / embedding dispatch for dense or MLX-quantized weights.
#include "ops/weight.h"

#include <cmath>
#include <sstream>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#ifdef RINGLM_HAS_CUDA
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/gemv.h"
#include "backends/cuda/quant_mma.h"
#endif
#include "kv/affine_codec.h"
#include "ops/check.h"
#include "ops/ops.h"

namespace ringlm::ops {

Weight Weight::quantized(const QuantizedMatrix& q) {
  RINGLM_CHECK(q.bits != 0, "Weight::quantized: bits is 0");
  Weight w;
  w.quant_ = q;
  return w;
}

const Tensor& Weight::dense() const {
  RINGLM_CHECK(!is_quantized(), "Weight::dense() on a quantized weight ", describe());
  return dense_;
}

const QuantizedMatrix& Weight::quant() const {
  RINGLM_CHECK(is_quantized(), "Weight::quant() on a dense weight ", describe());
  return quant_;
}

std::string Weight::describe() const {
  if (!is_quantized()) return dense_.describe();
  std::ostringstream os;
  os << "affine " << quant_.bits << "-bit g" << quant_.group_size << " [" << rows() << ", "
     << cols() << "] (" << dtype_name(quant_.scales.dtype) << ")";
  return os.str();
}

void check_quantized(const QuantizedMatrix& q, const char* what) {
  const std::string w(what);
  kv::validate_affine_format({q.bits, q.group_size});
  check_dtype(q.codes, DType::U32, (w + " codes").c_str());
  check_shape(q.codes, {-1, -1}, (w + " codes").c_str());
  detail::check_contiguous(q.codes, (w + " codes").c_str());
  const int64_t n = q.codes.shape[0];
  const int64_t k = q.codes.shape[1] * 32 / q.bits;
  RINGLM_CHECK(q.codes.shape[1] * 32 % q.bits == 0 && k % q.group_size == 0, what, ": codes ",
               q.codes.describe(), " do not hold whole groups of ", q.group_size, " ", q.bits,
               "-bit values");
  for (const Tensor* t : {&q.scales, &q.biases}) {
    const std::string name = w + (t == &q.scales ? " scales" : " biases");
    detail::check_float_storage(*t, name.c_str());
    check_shape(*t, {n, k / q.group_size}, name.c_str());
    detail::check_contiguous(*t, name.c_str());
  }
  check_dtype(q.biases, q.scales.dtype, (w + " biases").c_str());
  detail::device_of(what, {&q.codes, &q.scales, &q.biases});
}

namespace {

// The argument checks of a matmul with quantized weights; returns the device it runs on.
Device check_quantized_matmul(const Tensor& x, const QuantizedMatrix& q, const Tensor& bias,
                              Tensor& y) {
  const Device dev = detail::device_of("matmul", {&x, &q.codes, &q.scales, &q.biases, &bias, &y});
  check_quantized(q, "matmul w");
  // CUDA takes x already rounded to the bf16 scales' dtype (matmul_input_dtype).
  if (x.dtype != DType::BF16 || dev != Device::CUDA || q.scales.dtype != DType::BF16)
    check_dtype(x, DType::F32, "matmul x");
  check_shape(x, {-1, q.cols()}, "matmul x");
  const int64_t n = q.rows();
  if (!bias.empty()) {
    detail::check_float_storage(bias, "matmul bias");
    check_shape(bias, {n}, "matmul bias");
    detail::check_contiguous(bias, "matmul bias");
  }
  check_dtype(y, DType::F32, "matmul y");
  check_shape(y, {x.shape[0], n}, "matmul y");
  detail::check_rows(x, "matmul x");
  detail::check_rows(y, "matmul y");
  detail::check_no_overlap(y, x, "matmul y");
  for (const Tensor* t : {&q.codes, &q.scales, &q.biases})
    detail::check_no_overlap(y, *t, "matmul y");
  return dev;
}

}  // namespace

void matmul_many(const Tensor& x, std::span<const MatmulTarget> targets) {
#ifdef RINGLM_HAS_CUDA
  if (x.device == Device::CUDA && targets.size() > 1) {
    std::vector<cuda::GemvTarget> gemv;
    for (const MatmulTarget& t : targets) {
      if (t.w->is_quantized()) break;
      detail::check_matmul(x, t.w->dense(), *t.bias, *t.y);
      gemv.push_back({&t.w->dense(), t.bias, t.y});
    }
    if (gemv.size() == targets.size() && cuda::gemv_many_applies(x, gemv)) {
      cuda::gemv_many(x, gemv);
      return;
    }
    if (gemv.size() == targets.size() && cuda::matmul_shared_input_applies(x, gemv)) {
      cuda::matmul_shared_input(x, gemv);
      return;
    }
    // Quantized q/k/v or gate/up: one launch of the tensor-core kernel where it applies.
    std::vector<cuda::QuantMma> quant;
    for (const MatmulTarget& t : targets) {
      if (!t.w->is_quantized()) break;
      check_quantized_matmul(x, t.w->quant(), *t.bias, *t.y);
      quant.push_back({&x, &t.w->quant(), t.bias, t.y});
    }
    if (quant.size() == targets.size() && cuda::quant_mma_many_applies(quant)) {
      cuda::quant_mma_many(quant);
      return;
    }
  }
#endif
  for (const MatmulTarget& t : targets) matmul(x, *t.w, *t.bias, *t.y);
}

namespace detail {

void check_gated_out(const Tensor& x, const Tensor& gate_y, Activation activation, DType dtype,
                     const Tensor& out) {
  check_dtype(out, dtype, "gated_matmul out");
  check_shape(out, {gate_y.shape[0], gate_y.shape[1]}, "gated_matmul out");
  check_rows(out, "gated_matmul out");
  check_no_overlap(out, x, "gated_matmul out");
  RINGLM_CHECK(activation == Activation::SiLU || activation == Activation::GeluTanh,
               "gated_matmul: unknown activation ", static_cast<int>(activation));
}

}  // namespace detail

void gated_matmul(const Tensor& x, const MatmulTarget& gate, const MatmulTarget& up,
                  Activation activation, Tensor& out) {
#ifdef RINGLM_HAS_CUDA
  if (x.device == Device::CUDA && !gate.w->is_quantized() && !up.w->is_quantized()) {
    detail::check_matmul(x, gate.w->dense(), *gate.bias, *gate.y);
    detail::check_matmul(x, up.w->dense(), *up.bias, *up.y);
    const cuda::GemvTarget g{&gate.w->dense(), gate.bias, gate.y}, u{&up.w->dense(), up.bias, up.y};
    if (cuda::gemv_gated_applies(x, g, u) || cuda::gemm_gated_applies(x, g, u)) {
      // A 16-bit out (the down projection's rounded input) only from the GEMM.
      detail::check_gated_out(x, *gate.y, activation,
                              out.dtype == DType::F32 || cuda::gemv_gated_applies(x, g, u)
                                  ? DType::F32
                                  : gate.w->dense().dtype,
                              out);
      if (cuda::gemv_gated_applies(x, g, u)) return cuda::gemv_gated(x, g, u, activation, out);
      return cuda::gemm_gated(x, g, u, activation, out);
    }
  }
#endif
  const MatmulTarget both[] = {gate, up};
  matmul_many(x, both);
  gated_activation(*gate.y, *up.y, activation, out);
}

DType matmul_input_dtype(const Weight& w, int64_t rows) {
#ifdef RINGLM_HAS_CUDA
  if (!cuda::rounded_matmul_inputs()) return DType::F32;
  if (w.is_quantized()) {
    const QuantizedMatrix& q = w.quant();
    return q.codes.device == Device::CUDA && cuda::quantized_matmul_takes_half_x(q, rows)
               ? DType::BF16
               : DType::F32;
  }
  if (w.dense().device == Device::CUDA &&
      (w.dense().dtype == DType::BF16 || w.dense().dtype == DType::F16) &&
      rows > cuda::kGemvMaxRows)
    return w.dense().dtype;
#else
  (void)w;
  (void)rows;
#endif
  return DType::F32;
}

void matmul(const Tensor& x, const Weight& w, const Tensor& bias, Tensor& y) {
  if (!w.is_quantized()) return matmul(x, w.dense(), bias, y);
  const QuantizedMatrix& q = w.quant();
  [[maybe_unused]] const Device dev = check_quantized_matmul(x, q, bias, y);
#ifdef RINGLM_HAS_CUDA
  if (dev == Device::CUDA) return cuda::matmul_quantized(x, q, bias, y);
#endif
  cpu::matmul_quantized(x, q, bias, y);
}

void embedding(const Tensor& ids, const Weight& table, float scale, Tensor& out) {
  if (!table.is_quantized()) return embedding(ids, table.dense(), scale, out);
  const QuantizedMatrix& q = table.quant();
  const Device dev = detail::device_of("embedding", {&ids, &q.codes, &q.scales, &q.biases, &out});
  check_quantized(q, "embedding table");
  check_dtype(ids, DType::I32, "embedding ids");
  check_shape(ids, {-1}, "embedding ids");
  detail::check_contiguous(ids, "embedding ids");
  check_dtype(out, DType::F32, "embedding out");
  check_shape(out, {ids.shape[0], q.cols()}, "embedding out");
  detail::check_rows(out, "embedding out");
  RINGLM_CHECK(std::isfinite(scale), "embedding: scale ", scale, " is not finite");
  const int64_t vocab = q.rows();
  // CUDA ids live on the device: the kernel checks them (reported by cuda::synchronize()).
  for (int64_t m = 0; dev == Device::CPU && m < ids.shape[0]; ++m) {
    const int32_t id = ids.ptr<const int32_t>()[m];
    RINGLM_CHECK(id >= 0 && id < vocab, "embedding: token id ", id, " at index ", m,
                 " is outside the vocabulary [0, ", vocab, ")");
  }
#ifdef RINGLM_HAS_CUDA
  if (dev == Device::CUDA) return cuda::embedding_quantized(ids, q, scale, out);
#endif
  cpu::embedding_quantized(ids, q, scale, out);
}

}  // namespace ringlm::ops
