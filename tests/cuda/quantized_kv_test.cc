// GPU quantized KV (affine int4/int8, TurboQuant kXvY) against the CPU backend on the same bytes:
// - kv_write: the GPU's planes (codes, scales, biases / zero points) are byte-identical to
//   cpu::kv_write's, for every affine format and every kXvY, head dims 32 … 512, with extreme rows
//   (constant, signed zeros, huge, tiny, all negative, outliers, rounding ties);
// - the attention readers (cuda::decode_kv_rows, N = 1, 4 and 8 dims per read) decode every row
//   bit for bit as the codecs do (keys; affine values; TurboQuant rotated values);
// - attention on quantized views equals cpu::attention within twice the CPU kernel's tested bound
//   (tests/ops/turbo_attention_test.cc: each kernel is within it of the exact result) for decode
//   rows, prefill chunks, empty rows, windows, GQA/MQA, soft-capping, odd block sizes; the
//   DeviceRows path and in-place use give the same bits;
// - batch invariance (a row alone = the same row batched, bitwise);
// - the TurboQuant output un-rotation equals kv::turbo_unrotate bit for bit;
// - a bad slot of a quantized write is reported by cuda::synchronize();
// - prepare_attention's fused TurboQuant write equals rms_norm, rope and kv_write bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device_rows.h"
#include "backends/cuda/quantized_kv.h"
#include "cuda_test_util.h"
#include "kv/affine_codec.h"
#include "kv/turbo_codec.h"
#include "ops/ops.h"
#include "paged_layout.h"

namespace ringlm::ops {
namespace {

using testing::kEps;
using testing::Layout;
using testing::make_layout;
using testing::OnDevice;
using testing::Owned;
using testing::RowSpec;

struct Format {
  int bits;        // affine: code bits; turbo: key bits
  int group;       // affine: 32 or 64; turbo: 32
  int value_bits;  // 0: affine
  bool turbo() const { return value_bits > 0; }
  std::string name() const {
    std::ostringstream s;
    if (turbo()) {
      s << "turbo k" << bits << "v" << value_bits;
    } else {
      s << "int" << bits << "-g" << group;
    }
    return s.str();
  }
};

const Format kAffine[] = {{4, 32, 0}, {4, 64, 0}, {8, 32, 0}, {8, 64, 0}};
// The attention checks' TurboQuant formats: the k8v3 fast path and the generic reader.
const Format kAttentionTurbo[] = {{8, 32, 3}, {4, 32, 2}, {2, 32, 2}, {5, 32, 5}, {8, 32, 8}};

std::vector<Format> all_turbo() {
  std::vector<Format> out;
  for (int k : {2, 4, 5, 8})
    for (int v : {2, 3, 4, 5, 8}) out.push_back({k, 32, v});
  return out;
}

// The planes of a quantized paged layer on the host, every byte 0xFF until written.
struct HostCache {
  Format f;
  int64_t blocks, bt, kvh, D;
  Owned k, v, ks, kb, vs, vb;  // vb: affine only
  HostCache(Format format, int64_t num_blocks, int64_t block_tokens, int64_t kv_heads,
            int64_t head_dim)
      : f(format), blocks(num_blocks), bt(block_tokens), kvh(kv_heads), D(head_dim) {
    const DType code = f.turbo() ? DType::U8 : DType::U32;
    const int64_t per_unit = f.turbo() ? 8 : 32;  // code bits per element of the code plane
    const DType param = f.turbo() ? DType::F16 : DType::BF16;
    k = Owned(code, {blocks, bt, kvh, D * f.bits / per_unit});
    v = Owned(code, {blocks, bt, kvh, D * (f.turbo() ? f.value_bits : f.bits) / per_unit});
    ks = Owned(param, {blocks, bt, kvh, D / f.group});
    kb = Owned(param, {blocks, bt, kvh, D / f.group});
    vs = Owned(param, {blocks, bt, kvh, D / f.group});
    if (!f.turbo()) vb = Owned(param, {blocks, bt, kvh, D / f.group});
    for (const Owned* p : planes()) std::memset(p->t().data, 0xff, p->t().nbytes());
  }
  std::vector<const Owned*> planes() const {
    std::vector<const Owned*> out = {&k, &v, &ks, &kb, &vs};
    if (!f.turbo()) out.push_back(&vb);
    return out;
  }
  KvLayerView view() const { return make_view(k.t(), v.t(), ks.t(), kb.t(), vs.t(), vb.t()); }
  KvLayerView make_view(const Tensor& k_, const Tensor& v_, const Tensor& ks_, const Tensor& kb_,
                        const Tensor& vs_, const Tensor& vb_) const {
    KvLayerView kv;
    kv.k = k_;
    kv.v = v_;
    kv.k_scales = ks_;
    kv.k_biases = kb_;
    kv.v_scales = vs_;
    if (!f.turbo()) kv.v_biases = vb_;
    kv.bits = f.bits;
    kv.group_size = f.group;
    kv.value_bits = f.value_bits;
    return kv;
  }
  int64_t rows() const { return blocks * bt * kvh; }
};

// A device copy of a HostCache's planes.
struct DeviceCache {
  const HostCache& host;
  std::vector<std::unique_ptr<OnDevice>> planes;
  explicit DeviceCache(const HostCache& h) : host(h) {
    for (const Owned* p : h.planes()) planes.push_back(std::make_unique<OnDevice>(*p));
  }
  KvLayerView view() const {
    const Tensor none{};
    return host.make_view(planes[0]->t(), planes[1]->t(), planes[2]->t(), planes[3]->t(),
                          planes[4]->t(), planes.size() > 5 ? planes[5]->t() : none);
  }
};

// Which extreme rows fill_rows mixes in: all; those whose codes decode to finite values (no f16
// scale overflow: TurboQuant keys of the huge rows decode to (q + z)·inf, NaN for q + z = 0, and
// NaN bits differ between CPU and GPU); those that keep attention's error bound meaningful (no
// row of magnitude >> 1).
enum class Extremes { All, Decodable, Moderate };

// Random rows with extreme ones mixed in (row = token · kv_heads + head).
void fill_rows(Owned& x, int64_t D, uint32_t seed, Extremes extremes = Extremes::All) {
  testing::fill_uniform(x, seed, -2.0f, 3.0f);
  float* p = x.p<float>();
  const int64_t rows = x.t().numel() / D;
  std::mt19937 rng(seed + 7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = p + r * D;
    int kind = static_cast<int>(r % 10);
    if (extremes != Extremes::All && kind == 2) kind = -1;
    if (extremes == Extremes::Moderate && (kind == 5 || kind == 6)) kind = -1;
    switch (kind) {
      case 0:  // constant
        std::fill(row, row + D, 0.37f);
        break;
      case 1:  // signed zeros, whole groups of −0 and mixed ones
        for (int64_t d = 0; d < D; ++d) row[d] = (d / 32) % 2 == 0 ? -0.0f : (d % 3 ? 0.0f : -0.0f);
        break;
      case 2:  // huge magnitudes (f16 scales overflow to inf; f32 stays finite)
        for (int64_t d = 0; d < D; ++d) row[d] = u(rng) * 1e15f;
        break;
      case 3:  // all negative
        for (int64_t d = 0; d < D; ++d) row[d] = -1.0f - 4.0f * std::fabs(u(rng));
        break;
      case 4:  // tiny (f16 scales flush; Σ y² underflows)
        for (int64_t d = 0; d < D; ++d) row[d] = u(rng) * 1e-30f;
        break;
      case 5:  // one outlier per group
        for (int64_t d = 7; d < D; d += 32) row[d] = 1e4f;
        break;
      case 6:  // a large offset with a tiny range (turbo keys: the zero-point floor of s)
        for (int64_t d = 0; d < D; ++d) row[d] = 60000.0f + 0.01f * u(rng);
        break;
      case 7:  // halves: rounding ties
        for (int64_t d = 0; d < D; ++d) row[d] = 0.5f * std::round(8.0f * u(rng));
        break;
      case 8:  // a single non-zero
        std::fill(row, row + D, 0.0f);
        row[D / 2] = -3.0f;
        break;
      default:
        break;
    }
  }
}

// Compares two planes byte for byte, naming the first difference.
void expect_same_bytes(const Tensor& gpu, const Tensor& cpu, const char* plane) {
  ASSERT_EQ(gpu.nbytes(), cpu.nbytes()) << plane;
  const auto* a = static_cast<const uint8_t*>(gpu.data);
  const auto* b = static_cast<const uint8_t*>(cpu.data);
  for (size_t i = 0; i < cpu.nbytes(); ++i) {
    ASSERT_EQ(a[i], b[i]) << plane << " byte " << i << " (element of " << dtype_size(cpu.dtype)
                          << " bytes " << i / dtype_size(cpu.dtype) << ")";
  }
}

const char* const kPlaneNames[] = {"k", "v", "k_scales", "k_biases", "v_scales", "v_biases"};

void check_write(Format f, int64_t D, uint32_t seed) {
  SCOPED_TRACE(f.name() + " D=" + std::to_string(D));
  const int64_t blocks = 6, bt = 4, kvh = 3, T = 10;
  Owned k(DType::F32, {T, kvh, D}), v(DType::F32, {T, kvh, D}), slots(DType::I32, {T});
  fill_rows(k, D, seed);
  fill_rows(v, D, seed + 1);
  std::vector<int32_t> order(static_cast<size_t>(blocks * bt));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  for (int64_t t = 0; t < T; ++t) slots.p<int32_t>()[t] = order[static_cast<size_t>(t)];

  HostCache cpu(f, blocks, bt, kvh, D), gpu_host(f, blocks, bt, kvh, D);
  KvLayerView cpu_view = cpu.view();
  kv_write(k.t(), v.t(), slots.t(), cpu_view);

  DeviceCache gpu(gpu_host);
  OnDevice dk(k), dv(v), ds(slots);
  KvLayerView gpu_view = gpu.view();
  kv_write(dk.t(), dv.t(), ds.t(), gpu_view);
  cuda::synchronize();
  const std::vector<const Owned*> cpu_planes = cpu.planes();
  for (size_t i = 0; i < cpu_planes.size(); ++i) {
    const Owned back = gpu.planes[i]->to_host();
    expect_same_bytes(back.t(), cpu_planes[i]->t(), kPlaneNames[i]);
  }
}

TEST(CudaQuantizedKv, KvWriteMatchesCpuBytes) {
  RINGLM_REQUIRE_GPU();
  uint32_t seed = 10;
  for (const Format& f : kAffine) {
    std::vector<int64_t> dims = {64, 128, 256, 192};
    if (f.group == 32) dims.insert(dims.end(), {32, 96});
    for (int64_t D : dims) check_write(f, D, seed++);
  }
  for (const Format& f : all_turbo())
    for (int64_t D : {32, 64, 128, 256, 512}) check_write(f, D, seed++);
}

// prepare_attention on a TurboQuant view encodes K/V in its own kernel (device/turbo_encode.cuh):
// q, k and every plane equal the separate GPU ops' bit for bit — per-head rms_norm, rope, then
// kv_write (whose bytes are the CPU's: KvWriteMatchesCpuBytes) — for the compile-time k8v3 path
// and run-time widths, head dims 64 … 512, partial rotary, and a slot outside the cache (skipped
// by both, reported).
TEST(CudaQuantizedKv, TurboPrepareAttentionEqualsSeparateOps) {
  RINGLM_REQUIRE_GPU();
  const Format formats[] = {{8, 32, 3}, {4, 32, 2}, {5, 32, 8}};
  uint32_t seed = 300;
  for (const Format& f : formats) {
    for (const int64_t D : {64, 128, 256, 512}) {
      SCOPED_TRACE(f.name() + " D=" + std::to_string(D));
      const int64_t blocks = 5, bt = 4, kvh = 2, heads = 6, T = 7;
      const RopeTable table =
          testing::make_rope_table(static_cast<int>(D == 128 ? 64 : D), 1.1f, 1e6);
      Owned q(DType::F32, {T, heads, D}), k(DType::F32, {T, kvh, D}), v(DType::F32, {T, kvh, D}),
          pos(DType::I32, {T}), slots(DType::I32, {T}), q_norm(DType::BF16, {D}),
          k_norm(DType::BF16, {D});
      fill_rows(q, D, seed++, Extremes::Decodable);
      fill_rows(k, D, seed++, Extremes::Decodable);
      fill_rows(v, D, seed++, Extremes::Decodable);
      testing::fill_uniform(q_norm, seed++, 0.5f, 1.5f);
      testing::fill_uniform(k_norm, seed++, 0.5f, 1.5f);
      std::vector<int32_t> order(static_cast<size_t>(blocks * bt));
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), std::mt19937(seed++));
      for (int64_t t = 0; t < T; ++t) {
        pos.p<int32_t>()[t] = static_cast<int32_t>(1000 * t + 7);
        slots.p<int32_t>()[t] = order[static_cast<size_t>(t)];
      }
      slots.p<int32_t>()[3] = static_cast<int32_t>(blocks * bt);  // outside the cache
      const RmsNormConfig norm{1e-6f, false};
      const HostCache empty(f, blocks, bt, kvh, D);
      OnDevice dpos(pos), dslots(slots), dqn(q_norm), dkn(k_norm);
      const QkTransform transform{&dqn.t(), &dkn.t(), norm, &table};
      // The fused op.
      OnDevice fq(q), fk(k), fv(v);
      DeviceCache fused(empty);
      KvLayerView fused_view = fused.view();
      AttentionInputs in{fq.t(), fk.t(), fv.t(), dpos.t(), dslots.t()};
      prepare_attention(in, transform, &fused_view);
      EXPECT_THROW(cuda::synchronize(), Error) << "the bad slot is reported";
      // The separate ops.
      OnDevice sq(q), sk(k), sv(v);
      DeviceCache separate(empty);
      KvLayerView separate_view = separate.view();
      Tensor q_rows = sq.t().reshape({T * heads, D}), k_rows = sk.t().reshape({T * kvh, D});
      rms_norm(q_rows, dqn.t(), norm, q_rows);
      rope(sq.t(), dpos.t(), table);
      rms_norm(k_rows, dkn.t(), norm, k_rows);
      rope(sk.t(), dpos.t(), table);
      kv_write(sk.t(), sv.t(), dslots.t(), separate_view);
      EXPECT_THROW(cuda::synchronize(), Error);
      ASSERT_TRUE(testing::bitwise_equal(fq.to_host().t(), sq.to_host().t())) << "q";
      ASSERT_TRUE(testing::bitwise_equal(fk.to_host().t(), sk.to_host().t())) << "k";
      for (size_t i = 0; i < fused.planes.size(); ++i) {
        const Owned a = fused.planes[i]->to_host(), b = separate.planes[i]->to_host();
        expect_same_bytes(a.t(), b.t(), kPlaneNames[i]);
      }
    }
  }
}

// A cache whose every slot holds the quantized K/V of random rows (extreme ones mixed in),
// written by the CPU kv_write.
HostCache filled_cache(Format f, int64_t blocks, int64_t bt, int64_t kvh, int64_t D, uint32_t seed,
                       Extremes extremes) {
  HostCache cache(f, blocks, bt, kvh, D);
  const int64_t T = blocks * bt;
  Owned k(DType::F32, {T, kvh, D}), v(DType::F32, {T, kvh, D}), slots(DType::I32, {T});
  fill_rows(k, D, seed, extremes);
  fill_rows(v, D, seed + 1, extremes);
  for (int64_t t = 0; t < T; ++t) slots.p<int32_t>()[t] = static_cast<int32_t>(t);
  KvLayerView view = cache.view();
  kv_write(k.t(), v.t(), slots.t(), view);
  return cache;
}

// Row `row` of the view decoded by the codecs: keys, and values in the accumulation domain
// (affine: dequantized; turbo: rotated). F32[D] each.
void codec_decode(const HostCache& c, int64_t row, float* key, float* value) {
  const int D = static_cast<int>(c.D);
  const int64_t groups = D / c.f.group;
  if (c.f.turbo()) {
    kv::turbo_key_dequantize(c.k.p<uint8_t>() + row * D * c.f.bits / 8,
                             c.ks.p<f16_t>() + row * groups, c.kb.p<f16_t>() + row * groups, D,
                             c.f.bits, key);
    kv::turbo_value_dequantize_rotated(c.v.p<uint8_t>() + row * D * c.f.value_bits / 8,
                                       c.vs.p<f16_t>() + row * groups, D, c.f.value_bits, value);
    return;
  }
  const kv::AffineFormat format{c.f.bits, c.f.group};
  const int64_t words = D * c.f.bits / 32;
  std::vector<float> s(static_cast<size_t>(groups)), b(s.size());
  const auto planes = [&](const Owned& codes, const Owned& sc, const Owned& bi, float* out) {
    for (int64_t g = 0; g < groups; ++g) {
      s[static_cast<size_t>(g)] = bf16_to_f32(sc.p<bf16_t>()[row * groups + g]);
      b[static_cast<size_t>(g)] = bf16_to_f32(bi.p<bf16_t>()[row * groups + g]);
    }
    kv::affine_dequantize(codes.p<uint32_t>() + row * words, s.data(), b.data(), D, format, out);
  };
  planes(c.k, c.ks, c.kb, key);
  planes(c.v, c.vs, c.vb, value);
}

TEST(CudaQuantizedKv, ReadersDecodeAsTheCodecs) {
  RINGLM_REQUIRE_GPU();
  std::vector<Format> formats(std::begin(kAffine), std::end(kAffine));
  for (const Format& f : all_turbo()) formats.push_back(f);
  uint32_t seed = 300;
  for (const Format& f : formats) {
    for (int64_t D : {64, 128, 256}) {
      SCOPED_TRACE(f.name() + " D=" + std::to_string(D));
      HostCache cache = filled_cache(f, 3, 4, 2, D, seed++, Extremes::Decodable);
      const int64_t rows = cache.rows();
      std::vector<float> keys(static_cast<size_t>(rows * D)), values(keys.size());
      for (int64_t r = 0; r < rows; ++r)
        codec_decode(cache, r, keys.data() + r * D, values.data() + r * D);
      DeviceCache dc(cache);
      for (int n : {1, 4, 8}) {
        OnDevice dkeys(DType::F32, {rows, D}), dvalues(DType::F32, {rows, D});
        cuda::decode_kv_rows(dc.view(), n, dkeys.t(), dvalues.t());
        const Owned gk = dkeys.to_host(), gv = dvalues.to_host();
        ASSERT_EQ(std::memcmp(gk.p<float>(), keys.data(), keys.size() * 4), 0) << "keys, N=" << n;
        ASSERT_EQ(std::memcmp(gv.p<float>(), values.data(), values.size() * 4), 0)
            << "values, N=" << n;
      }
    }
  }
}

// ---- attention ----

struct Config {
  int head_dim, q_heads, kv_heads, block_tokens, window;
  float softcap;
};

// Decode rows, a whole prompt, a chunk continuing a prompt, an empty row, long decode rows (split
// into several parts by the decode kernel).
const std::vector<RowSpec> kRows = {{1, 1},   {1, 37},  {0, 10}, {13, 13},
                                    {5, 130}, {1, 300}, {1, 700}};

AttentionParams params_for(const Config& c) {
  AttentionParams p;
  p.scale = c.softcap > 0 ? 4.0f / std::sqrt(static_cast<float>(c.head_dim))
                          : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  p.softcap = c.softcap;
  p.window = c.window;
  return p;
}

struct Problem {
  Config c;
  Format f;
  Layout layout;
  HostCache cache;
  Owned q;
  // Codec-decoded rows: keys, values in the accumulation domain (TurboQuant: rotated) and, for
  // TurboQuant, un-rotated.
  std::vector<float> keys, values, plain_values;
  Problem(Format format, const Config& config, const std::vector<RowSpec>& specs, uint32_t seed)
      : c(config),
        f(format),
        layout(make_layout(specs, config.block_tokens, seed)),
        cache(filled_cache(format, layout.num_blocks, config.block_tokens, config.kv_heads,
                           config.head_dim, seed, Extremes::Moderate)),
        q(DType::F32, {layout.tokens(), config.q_heads, config.head_dim}) {
    testing::fill_uniform(q, seed + 5);
    const int64_t D = c.head_dim, rows = cache.rows();
    keys.resize(static_cast<size_t>(rows * D));
    values.resize(keys.size());
    for (int64_t r = 0; r < rows; ++r)
      codec_decode(cache, r, keys.data() + r * D, values.data() + r * D);
    plain_values = values;
    if (f.turbo()) {
      for (int64_t r = 0; r < rows; ++r)
        kv::turbo_unrotate(plain_values.data() + r * D, c.head_dim, plain_values.data() + r * D);
    }
  }

  // tests/ops/turbo_attention_test.cc's bound of the CPU kernel against the exact result over
  // the decoded K/V (the GPU kernel's dense bound, tests/cuda/attention_test.cc, is of the same
  // form and smaller), doubled: both kernels are within it. The rotation term (TurboQuant only):
  // each side un-rotates its output once.
  double tolerance(int64_t t, int64_t h, const AttentionParams& params) const {
    const Layout& L = layout;
    int r = 0;
    while (L.query_start[static_cast<size_t>(r) + 1] <= t) ++r;
    const int n = L.query_start[static_cast<size_t>(r) + 1] - L.query_start[static_cast<size_t>(r)];
    const int pos = L.context_len[static_cast<size_t>(r)] - n + static_cast<int>(t) -
                    L.query_start[static_cast<size_t>(r)];
    const int lo = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
    const int g = static_cast<int>(h) / (c.q_heads / c.kv_heads);
    const int D = c.head_dim, bt = c.block_tokens;
    const float* qv = q.p<float>() + (t * c.q_heads + h) * D;
    double max_dot_err = 0, max_score = 0, max_v = 0, max_rot = 0, max_mag = 0;
    for (int j = lo; j <= pos; ++j) {
      const int64_t slot =
          int64_t{L.block_table[static_cast<size_t>(r) * L.max_blocks + j / bt]} * bt + j % bt;
      const int64_t off = (slot * c.kv_heads + g) * D;
      double mag = 0, dot = 0;
      for (int d = 0; d < D; ++d) {
        const double qk = double{qv[d]} * keys[static_cast<size_t>(off + d)];
        mag += std::fabs(qk);
        dot += qk;
        const auto i = static_cast<size_t>(off + d);
        max_v = std::max({max_v, double{std::fabs(values[i])}, double{std::fabs(plain_values[i])}});
        max_rot = std::max(max_rot, double{std::fabs(values[i])});
      }
      max_dot_err = std::max(max_dot_err, (D + 3) * kEps * mag * params.scale);
      max_mag = std::max(max_mag, mag);
      max_score = std::max(max_score, std::fabs(dot * params.scale));
    }
    const int keys_seen = pos - lo + 1;
    double delta = max_dot_err + 4 * kEps * max_score + 2 * kEps;
    // Rows on tensor cores round q, K, V and the weights to bf16 (u = 2^-8): scores move by
    // ≤ 2u·scale·Σ|q·k|, the accumulated output by ≤ 2u·max|v| (TurboQuant: in the rotated
    // domain, ≤ √D times that after un-rotation). Head dims 64/128/256: decode rows, and rows
    // with several queries (GQA groups of 1, 2, 4, 8) unless the prefill switch is off.
    const int group = c.q_heads / c.kv_heads;
    const bool tc_dim = D == 64 || D == 128 || D == 256;
    const bool prefill_tc = cuda::prefill_tc_extended() && tc_dim &&
                            (group == 1 || group == 2 || group == 4 || group == 8);
    const bool tensor_cores = n == 1 ? tc_dim : prefill_tc;
    const double u = tensor_cores ? std::ldexp(1.0, -8) : 0.0;
    delta += 2 * u * max_mag * params.scale;
    double bound =
        2 * max_v * (std::expm1(2 * delta) + 2 * (keys_seen + keys_seen / 32 + 3) * 2 * kEps);
    bound += 2 * u * (f.turbo() ? std::sqrt(D) * max_rot : max_v);
    if (f.turbo()) bound += 2 * (std::log2(D) + 2) * kEps * std::sqrt(D) * max_rot;
    return 2 * bound + 1e-30;
  }
};

std::string label(Format f, const Config& c) {
  std::ostringstream s;
  s << f.name() << " D=" << c.head_dim << " qh=" << c.q_heads << " kvh=" << c.kv_heads
    << " bt=" << c.block_tokens << " window=" << c.window << " softcap=" << c.softcap;
  return s.str();
}

void check_attention(Format f, const Config& c, uint32_t seed,
                     const std::vector<RowSpec>& rows = kRows) {
  SCOPED_TRACE(label(f, c));
  const Problem p(f, c, rows, seed);
  const AttentionParams params = params_for(c);
  const int64_t T = p.layout.tokens();
  Owned ref(DType::F32, {T, c.q_heads, c.head_dim});
  attention(p.q.t(), p.cache.view(), p.layout.rows(), params, ref.t());  // the CPU kernel

  const DeviceCache dc(p.cache);
  const KvLayerView view = dc.view();
  OnDevice dq(p.q), dout(DType::F32, {T, c.q_heads, c.head_dim});
  attention(dq.t(), view, p.layout.rows(), params, dout.t());  // poisoned out: all written?
  const Owned out = dout.to_host();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < c.q_heads; ++h) {
      const double tol = p.tolerance(t, h, params);
      for (int64_t d = 0; d < c.head_dim; ++d) {
        const int64_t i = (t * c.q_heads + h) * c.head_dim + d;
        ASSERT_NEAR(out.f(i), ref.f(i), tol) << "t=" << t << " h=" << h << " d=" << d;
      }
    }
  }

  ASSERT_TRUE(testing::device_rows_and_in_place_match(dq, view, p.layout, params, out));
}

// (q_heads, kv_heads, block_tokens, window, softcap): MHA, GQA 4 and 8, MQA; full and sliding
// windows; caps; block sizes 16, 5 and 1.
std::vector<Config> configs_for(int D) {
  return {{D, 4, 4, 16, 0, 0.0f}, {D, 8, 2, 5, 0, 0.0f},   {D, 8, 1, 16, 7, 0.0f},
          {D, 4, 4, 1, 50, 0.0f}, {D, 2, 1, 16, 0, 30.0f}, {D, 8, 2, 5, 32, 20.0f}};
}

TEST(CudaQuantizedKv, AffineAttentionMatchesCpu) {
  RINGLM_REQUIRE_GPU();
  uint32_t seed = 500;
  for (const Format& f : kAffine) {
    std::vector<int> dims = {64, 128, 256};
    if (f.group == 32) dims.push_back(96);  // a head_dim that leaves lanes idle
    for (int D : dims)
      for (const Config& c : configs_for(D)) check_attention(f, c, seed++);
  }
}

TEST(CudaQuantizedKv, TurboAttentionMatchesCpu) {
  RINGLM_REQUIRE_GPU();
  uint32_t seed = 700;
  for (const Format& f : kAttentionTurbo)
    for (int D : {32, 64, 128, 256})
      for (const Config& c : configs_for(D)) check_attention(f, c, seed++);
}

// Rows with several queries on the CUDA-core kernel (f32 throughout), as head dims the
// tensor-core prefill does not take still run: the prefill switch off.
TEST(CudaQuantizedKv, CudaCorePrefillMatchesCpu) {
  RINGLM_REQUIRE_GPU();
  cuda::set_prefill_tc_extended(false);
  uint32_t seed = 900;
  for (const Format& f : {kAffine[0], kAttentionTurbo[0]})
    for (int D : {64, 128})
      for (const Config& c : configs_for(D)) check_attention(f, c, seed++);
  cuda::set_prefill_tc_extended(true);
}

// A step of decode rows only: the split-K merge un-rotates the TurboQuant output, and its parts
// are merged by the last block of each decode task (not a merge kernel). The output matches the
// CPU kernel, and equals the merge kernel's bit for bit, twice over the same ticket buffer (the
// counters must come back to zero).
const std::vector<RowSpec> kDecodeRows = {{1, 1}, {1, 37}, {1, 700}, {1, 9000}, {1, 64}};

TEST(CudaQuantizedKv, TurboDecodeOnlyStepMatchesCpu) {
  RINGLM_REQUIRE_GPU();
  uint32_t seed = 900;
  for (const Format& f : kAttentionTurbo)
    for (int D : {64, 128, 256})
      for (const Config& c : configs_for(D)) check_attention(f, c, seed++, kDecodeRows);
  // More decode rows than the in-kernel merge takes (16): the merge kernel un-rotates.
  std::vector<RowSpec> many;
  for (int r = 0; r < 20; ++r) many.push_back({1, 1 + 97 * r});
  for (const Format& f : {Format{8, 32, 3}, Format{4, 32, 2}})
    check_attention(f, configs_for(128)[1], seed++, many);
}

// Wide decode steps (parts of at least 512 keys, cuda::wide_decode_rows()) over affine and
// TurboQuant K/V match the CPU kernel: the threshold lowered to 3 rows, decode-only steps (the
// in-kernel merge for TurboQuant) and steps beside prefill rows.
TEST(CudaQuantizedKv, WideDecodeStepsMatchCpu) {
  RINGLM_REQUIRE_GPU();
  cuda::set_wide_decode_rows(3);
  uint32_t seed = 950;
  for (const Format& f : {kAffine[0], kAffine[2], kAttentionTurbo[0], kAttentionTurbo[1]})
    for (int D : {64, 128})
      for (const auto* rows : {&kRows, &kDecodeRows})
        check_attention(f, configs_for(D)[1], seed++, *rows);
  cuda::set_wide_decode_rows(17);
}

// Eight-warp blocks of the k8v3 decode kernel (cuda::set_narrow_decode_warps(8)): decode-only
// steps (the in-kernel merge) and steps beside prefill rows match the CPU kernel at each head dim,
// and a row alone equals its batched rows bit for bit.
TEST(CudaQuantizedKv, EightWarpTurboDecodeMatchesCpuAndBatch) {
  RINGLM_REQUIRE_GPU();
  const int configured_warps = cuda::narrow_decode_warps();  // the env may set 8 for the suite
  cuda::set_narrow_decode_warps(8);
  uint32_t seed = 980;
  const Format k8v3{8, 32, 3};
  for (int D : {64, 128, 256})
    for (const auto* rows : {&kRows, &kDecodeRows})
      for (const Config& c : configs_for(D)) check_attention(k8v3, c, seed++, *rows);
  const Config c{128, 8, 2, 16, 0, 0.0f};
  const Problem p(k8v3, c, kRows, 12);
  DeviceCache dc(p.cache);
  OnDevice dq(p.q);
  EXPECT_TRUE(testing::rows_alone_equal_batched(dq.t(), dc.view(), p.layout, params_for(c)));
  cuda::set_narrow_decode_warps(configured_warps);
}

TEST(CudaQuantizedKv, TurboMergeInKernelEqualsMergeKernel) {
  RINGLM_REQUIRE_GPU();
  for (const Format& f : {Format{8, 32, 3}, Format{4, 32, 2}}) {
    for (const Config& c : {Config{128, 8, 2, 16, 0, 0.0f}, Config{64, 8, 1, 16, 40, 0.0f},
                            Config{256, 16, 1, 16, 0, 0.0f}}) {
      SCOPED_TRACE(label(f, c));
      const Problem p(f, c, kDecodeRows, 13);
      const AttentionParams params = params_for(c);
      const int64_t T = p.layout.tokens();
      const DeviceCache dc(p.cache);
      const KvLayerView view = dc.view();
      OnDevice dq(p.q), separate(DType::F32, {T, c.q_heads, c.head_dim}),
          merged(DType::F32, {T, c.q_heads, c.head_dim}),
          again(DType::F32, {T, c.q_heads, c.head_dim});
      cuda::set_decode_merge_in_kernel(false);
      attention(dq.t(), view, p.layout.rows(), params, separate.t());
      cuda::set_decode_merge_in_kernel(true);
      attention(dq.t(), view, p.layout.rows(), params, merged.t());
      attention(dq.t(), view, p.layout.rows(), params, again.t());
      cuda::synchronize();
      const Owned a = separate.to_host(), b = merged.to_host(), d = again.to_host();
      EXPECT_TRUE(testing::bitwise_equal(a.t(), b.t()));
      EXPECT_TRUE(testing::bitwise_equal(a.t(), d.t()));
    }
  }
}

// Each row computed alone (its own one-row layout over the same cache) equals its rows of the
// batched result bit for bit.
TEST(CudaQuantizedKv, BatchInvariant) {
  RINGLM_REQUIRE_GPU();
  for (const Format& f : {Format{4, 64, 0}, Format{8, 32, 0}, Format{8, 32, 3}, Format{4, 32, 2}}) {
    SCOPED_TRACE(f.name());
    const Config c{128, 8, 2, 16, 0, 0.0f};
    Problem p(f, c, kRows, 11);
    DeviceCache dc(p.cache);
    OnDevice dq(p.q);
    ASSERT_TRUE(testing::rows_alone_equal_batched(dq.t(), dc.view(), p.layout, params_for(c)));
  }
}

// A narrowed query range (--kv-quant-start): the TurboQuant rows in range equal the CPU kernel
// over the same range, and every other row of `out` keeps its bits — the un-rotation too skips
// them (the other range's rows come from the bf16 companion, not rotated).
TEST(CudaQuantizedKv, TurboQueryRangeLeavesOtherRowsAlone) {
  RINGLM_REQUIRE_GPU();
  constexpr float kUntouched = 7.0f;
  for (const auto& [f, D] : {std::pair{Format{8, 32, 3}, 128}, std::pair{Format{4, 32, 2}, 64}}) {
    SCOPED_TRACE(label(f, Config{D, 8, 2, 16, 0, 0.0f}));
    const Config c{D, 8, 2, 16, 0, 0.0f};
    const Problem p(f, c, kRows, 41);
    const AttentionParams params = params_for(c);
    AttentionRows rows = p.layout.rows();
    rows.query_pos_begin = 5;
    rows.query_pos_end = 40;
    const int64_t T = p.layout.tokens();
    Owned ref(DType::F32, {T, c.q_heads, D}), start(DType::F32, {T, c.q_heads, D});
    for (int64_t i = 0; i < ref.t().numel(); ++i) {
      ref.set(i, kUntouched);
      start.set(i, kUntouched);
    }
    attention(p.q.t(), p.cache.view(), rows, params, ref.t());  // the CPU kernel
    const DeviceCache dc(p.cache);
    OnDevice dq(p.q), dout(start);
    attention(dq.t(), dc.view(), rows, params, dout.t());
    const Owned out = dout.to_host();
    int computed = 0;
    for (int64_t t = 0; t < T; ++t) {
      const bool wanted = ref.f(t * c.q_heads * D) != kUntouched;
      computed += wanted ? 1 : 0;
      for (int64_t h = 0; h < c.q_heads; ++h) {
        const double tol = wanted ? p.tolerance(t, h, params) : 0.0;
        for (int64_t d = 0; d < D; ++d) {
          const int64_t i = (t * c.q_heads + h) * D + d;
          ASSERT_NEAR(out.f(i), ref.f(i), tol) << "t=" << t << " h=" << h << " d=" << d;
        }
      }
    }
    EXPECT_GT(computed, 8);
  }
}

TEST(CudaQuantizedKv, UnrotationMatchesCodecBitwise) {
  RINGLM_REQUIRE_GPU();
  for (int D : {32, 64, 128, 256, 512}) {
    SCOPED_TRACE("D=" + std::to_string(D));
    const int64_t T = 5, heads = 3;
    Owned x(DType::F32, {T, heads, D});
    testing::fill_uniform(x, static_cast<uint32_t>(D), -4.0f, 4.0f);
    for (int64_t i = 0; i < D; ++i) x.p<float>()[i] *= 1e-20f;     // a tiny row
    for (int64_t i = D; i < 2 * D; ++i) x.p<float>()[i] *= 1e20f;  // a huge one
    OnDevice dx(x);
    cuda::turbo_unrotate_rows(dx.t());
    const Owned got = dx.to_host();
    for (int64_t r = 0; r < T * heads; ++r)
      kv::turbo_unrotate(x.p<float>() + r * D, D, x.p<float>() + r * D);
    ASSERT_TRUE(testing::bitwise_equal(got.t(), x.t()));
  }
}

TEST(CudaQuantizedKv, BadSlotIsReported) {
  RINGLM_REQUIRE_GPU();
  for (const Format& f : {Format{8, 64, 0}, Format{8, 32, 3}}) {
    SCOPED_TRACE(f.name());
    HostCache host(f, 2, 4, 1, 64);
    DeviceCache dc(host);
    Owned k(DType::F32, {2, 1, 64}), v(DType::F32, {2, 1, 64}), slots(DType::I32, {2});
    testing::fill_uniform(k, 1);
    testing::fill_uniform(v, 2);
    slots.p<int32_t>()[0] = 3;
    slots.p<int32_t>()[1] = 8;  // capacity is 2 · 4
    OnDevice dk(k), dv(v), ds(slots);
    KvLayerView view = dc.view();
    kv_write(dk.t(), dv.t(), ds.t(), view);
    try {
      cuda::synchronize();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("slot"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ringlm::ops
