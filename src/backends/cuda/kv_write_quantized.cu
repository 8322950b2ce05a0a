// kv_write for quantized views on the GPU: one warp per (token, kv head) row, producing the same
// bytes as cpu::kv_write (kv/affine_codec.h, kv/turbo_codec.h) for finite inputs.
//
// Lane l holds dims l, l + 32, ... of the row, so a 32-dim group is one register across the warp
// (a 64-dim group two). How the CPU's results are reproduced exactly:
// - group min / max are exact in any order; warp_extreme breaks ties between −0 and +0 the way
//   the CPU's sequential scans do (first minimum; affine: first maximum, turbo: last maximum);
// - every other float operation is the codec's, one IEEE operation for one (explicitly rounded
//   intrinsics: nvcc may not contract a multiply and an add into an FMA, which the CPU build does
//   not do either: kv/turbo_codec.cc is compiled with -ffp-contract=off);
// - the value rotation is kv::fwht's butterfly network in the same stage order (warp_fwht) and
//   the per-group Σ y² is summed sequentially in dim order, as the codec's loop;
// - the Lloyd-Max cell is std::upper_bound's (first boundary > u) over the same f32 boundaries;
// - bf16 / f16 rounding of scales, biases and zero points is round-to-nearest-even on both sides.
// NaN inputs are outside this contract (their groups are garbage on both, but may differ).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/quant_common.cuh"
#include "backends/cuda/quantized_kv.h"
#include "kv/turbo_codec.h"

namespace ringlm::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;

struct RowWrite {
  const float* k;        // F32[T, kv_heads, head_dim]
  const float* v;        // F32[T, kv_heads, head_dim]
  const int32_t* slots;  // I32[T]
  int64_t rows;          // T · kv_heads
  int64_t capacity;      // cache slots
  int kv_heads, head_dim;
  DeviceErrorRecord* errors;
};

// This warp's source row r (token · kv_heads + head) and its destination row in the cache
// (slot · kv_heads + head); -1 when the warp has no row or the slot is out of range (reported).
__device__ __forceinline__ int64_t destination_row(const RowWrite& a, int64_t r) {
  if (r >= a.rows) return -1;
  const int64_t t = r / a.kv_heads;
  const int32_t slot = a.slots[t];
  if (slot < 0 || slot >= a.capacity) {
    if ((threadIdx.x & 31) == 0 && r % a.kv_heads == 0)
      device::report_error(a.errors, DeviceErrorCode::KvSlot, t, slot, a.capacity);
    return -1;
  }
  return int64_t{slot} * a.kv_heads + r % a.kv_heads;
}

__device__ __forceinline__ int64_t warp_row() {
  return int64_t{blockIdx.x} * kWarpsPerBlock + (threadIdx.x >> 5);
}

// ---- affine (kv::affine_quantize, HalfToEven, TrueMax; scale and bias rounded to bf16) ----

struct AffinePlanes {
  uint32_t* codes;        // U32[rows, head_dim·bits/32]
  __nv_bfloat16* scales;  // BF16[rows, head_dim/group]
  __nv_bfloat16* biases;  // BF16[rows, head_dim/group]
};

template <int kBits, int kGroup>
__device__ void affine_row(const float* src,  // F32[head_dim]
                           int head_dim, int64_t row, const AffinePlanes& out) {
  constexpr int kPer = kGroup / 32;  // registers per group
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const float n_bins = static_cast<float>((1 << kBits) - 1);
  const int groups = head_dim / kGroup;
  uint32_t* codes = out.codes + row * (head_dim * kBits / 32);
  for (int gi = 0; gi < groups; ++gi) {
    float x[kPer];
    float mn = 0.0f, mx = 0.0f;
    int imn = 0, imx = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      x[i] = src[gi * kGroup + i * 32 + lane];
      const int index = i * 32 + lane;
      if (i == 0 || x[i] < mn) mn = x[i], imn = index;
      if (i == 0 || x[i] > mx) mx = x[i], imx = index;
    }
    mn = device::warp_extreme<false, false>(mn, imn);
    mx = device::warp_extreme<true, false>(mx, imx);
    const bool use_min = fabsf(mn) > fabsf(mx);
    float scale = __fdiv_rn(__fsub_rn(mx, mn), n_bins);
    scale = scale < 1e-7f ? 1e-7f : scale;  // std::max(scale, eps)
    scale = use_min ? scale : -scale;
    const float edge = use_min ? mn : mx;
    const float q0 = rintf(__fdiv_rn(edge, scale));
    float bias = 0.0f;
    if (q0 != 0.0f) {
      scale = __fdiv_rn(edge, q0);
      bias = edge;
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const float q = fminf(fmaxf(rintf(__fdiv_rn(__fsub_rn(x[i], bias), scale)), 0.0f), n_bins);
      const uint32_t word = device::warp_pack_codes(static_cast<uint32_t>(q), kBits);
      if (lane < kBits) codes[(gi * kGroup + i * 32) * kBits / 32 + lane] = word;
    }
    if (lane == 0) {
      out.scales[row * groups + gi] = __float2bfloat16_rn(scale);
      out.biases[row * groups + gi] = __float2bfloat16_rn(bias);
    }
  }
}

template <int kBits, int kGroup>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    affine_write_kernel(const RowWrite a, const AffinePlanes k_out, const AffinePlanes v_out) {
  const int64_t r = warp_row();
  const int64_t dst = destination_row(a, r);
  if (dst < 0) return;  // the whole warp
  affine_row<kBits, kGroup>(a.k + r * a.head_dim, a.head_dim, dst, k_out);
  affine_row<kBits, kGroup>(a.v + r * a.head_dim, a.head_dim, dst, v_out);
}

// ---- TurboQuant (kv::turbo_key_quantize, kv::turbo_value_quantize) ----

struct TurboPlanes {
  uint8_t* k;           // U8[rows, head_dim·key_bits/8]
  uint8_t* v;           // U8[rows, head_dim·value_bits/8]
  __half* k_scales;     // F16[rows, head_dim/32]
  __half* k_zeros;      // F16[rows, head_dim/32]
  __half* v_scales;     // F16[rows, head_dim/32]
  const float* bounds;  // F32[2^value_bits − 1], ascending
  const float* signs;   // F32[head_dim]
  int key_bits, value_bits;
};

__device__ __forceinline__ float to_f16_and_back(float x) {
  return __half2float(__float2half_rn(x));
}

// One 32-dim group of keys (this lane's value x, dim 32·g + lane). kBits > 0 fixes key_bits at
// compile time (the default k8v3): the packing loop unrolls and the groups' chains interleave.
template <int kBits>
__device__ __forceinline__ void turbo_key_group(float x, int g, int head_dim, int64_t row,
                                                const TurboPlanes& out) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int bits = kBits > 0 ? kBits : out.key_bits;
  const bool is_signed = bits == 8;
  const float qmax = is_signed ? 127.0f : static_cast<float>((1 << bits) - 1);
  const float qmin = is_signed ? -127.0f : 0.0f;
  // std::minmax_element: the first minimum and the last maximum.
  const float mn = device::warp_extreme<false, false>(x, lane);
  const float mx = device::warp_extreme<true, true>(x, lane);
  float s = __fdiv_rn(__fsub_rn(mx, mn), is_signed ? 254.0f : qmax);
  if (!(s > 0)) s = mx != 0 ? __fdiv_rn(fabsf(mx), qmax) : 1.0f;
  const float floor_s =
      __fdiv_rn(is_signed ? __fdiv_rn(fabsf(__fadd_rn(mx, mn)), 2.0f) : fabsf(mn), 2000.0f);
  s = s < floor_s ? floor_s : s;  // std::max(s, floor_s)
  s = to_f16_and_back(s);
  if (!(s > 0)) s = 6.0e-8f;
  const float z = to_f16_and_back(
      rintf(is_signed ? __fdiv_rn(__fadd_rn(mx, mn), __fmul_rn(2.0f, s)) : __fdiv_rn(mn, s)));
  const float q = fminf(fmaxf(rintf(__fsub_rn(__fdiv_rn(x, s), z)), qmin), qmax);
  const uint32_t code = static_cast<uint32_t>(static_cast<int>(q)) & ((1u << bits) - 1u);
  const int groups = head_dim / 32;
  uint8_t* codes = out.k + row * (head_dim * bits / 8);
  if (bits == 8) {
    codes[32 * g + lane] = static_cast<uint8_t>(code);  // byte d is dim d's code: no packing
  } else {
    // The group's codes are `bits` whole words: 32·bits bits from byte 4·bits·g of the row.
    const uint32_t word = device::warp_pack_codes(code, bits);
    if (lane < bits) reinterpret_cast<uint32_t*>(codes)[g * bits + lane] = word;
  }
  if (lane == 0) {
    out.k_scales[row * groups + g] = __float2half_rn(s);
    out.k_zeros[row * groups + g] = __float2half_rn(z);
  }
}

// One row of values: the rotation, then per 32-dim group its RMS scale and each dim's Lloyd-Max
// cell — std::upper_bound's (first boundary > u) as a fixed-depth search over `bounds` (2^bits − 1
// entries in shared memory). Every slot's step runs before the next step, so the slots' latency
// chains (the sequential Σ y², the search) overlap.
template <int kSlots, int kBits>
__device__ __forceinline__ void turbo_value_row(const float* src,  // F32[head_dim = 32·kSlots]
                                                int64_t row, const TurboPlanes& out,
                                                const float* bounds) {
  constexpr int kDim = 32 * kSlots;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int bits = kBits > 0 ? kBits : out.value_bits;
  float y[kSlots];
#pragma unroll
  for (int c = 0; c < kSlots; ++c) y[c] = __fmul_rn(src[c * 32 + lane], out.signs[c * 32 + lane]);
  device::warp_fwht<kSlots>(y);
  const float norm = device::turbo_norm(kDim);
  float s[kSlots], u[kSlots];
#pragma unroll
  for (int c = 0; c < kSlots; ++c) {
    y[c] = __fmul_rn(y[c], norm);
    float sum = 0.0f;  // in dim order, as the codec's loop
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const float w = __shfl_sync(device::kFullMask, y[c], j);
      sum = __fadd_rn(sum, __fmul_rn(w, w));
    }
    s[c] = __fsqrt_rn(__fdiv_rn(sum, 32.0f));
    u[c] = __fdiv_rn(y[c], __fadd_rn(s[c], 1e-8f));
  }
  // The number of boundaries b with !(u < b): upper_bound's index, the bounds being ascending.
  uint32_t cell[kSlots];
#pragma unroll
  for (int c = 0; c < kSlots; ++c) cell[c] = 0;
#pragma unroll
  for (int step = 1 << (bits - 1); step > 0; step >>= 1) {
#pragma unroll
    for (int c = 0; c < kSlots; ++c)
      if (!(u[c] < bounds[cell[c] + step - 1])) cell[c] += step;
  }
  uint8_t* codes = out.v + row * (kDim * bits / 8);
#pragma unroll
  for (int c = 0; c < kSlots; ++c) {
    if (bits == 8) {
      codes[32 * c + lane] = static_cast<uint8_t>(cell[c]);
    } else {
      const uint32_t word = device::warp_pack_codes(cell[c], bits);
      if (lane < bits) reinterpret_cast<uint32_t*>(codes)[c * bits + lane] = word;
    }
    if (lane == 0) out.v_scales[row * kSlots + c] = __float2half_rn(s[c]);
  }
}

// kKeyBits / kValueBits > 0: widths fixed at compile time (k8v3, the default); 0 reads the planes'.
template <int kSlots, int kKeyBits, int kValueBits>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    turbo_write_kernel(const RowWrite a, const TurboPlanes out) {
  __shared__ float bounds[255];  // 2^value_bits − 1 ≤ 255 Lloyd-Max boundaries
  const int value_bits = kValueBits > 0 ? kValueBits : out.value_bits;
  for (int i = static_cast<int>(threadIdx.x); i < (1 << value_bits) - 1; i += blockDim.x)
    bounds[i] = out.bounds[i];
  __syncthreads();
  const int64_t r = warp_row();
  const int64_t dst = destination_row(a, r);
  if (dst < 0) return;  // the whole warp
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const float* k = a.k + r * a.head_dim;
  float x[kSlots];
#pragma unroll
  for (int g = 0; g < kSlots; ++g) x[g] = k[g * 32 + lane];
#pragma unroll
  for (int g = 0; g < kSlots; ++g) turbo_key_group<kKeyBits>(x[g], g, a.head_dim, dst, out);
  turbo_value_row<kSlots, kValueBits>(a.v + r * a.head_dim, dst, out, bounds);
}

void check_aligned(const Tensor& t, const char* what) {
  RINGLM_CHECK(reinterpret_cast<uintptr_t>(t.data) % 4 == 0, "kv_write: CUDA quantized KV ", what,
               " plane at ", t.data, " is not 4-byte aligned");
}

}  // namespace

void kv_write_quantized(const Tensor& k, const Tensor& v, const Tensor& slots,
                        ops::KvLayerView& kv) {
  const int64_t T = k.shape[0];
  if (T == 0) return;
  check_aligned(kv.k, "k");
  check_aligned(kv.v, "v");
  RowWrite a{};
  a.k = k.ptr<const float>();
  a.v = v.ptr<const float>();
  a.slots = slots.ptr<const int32_t>();
  a.kv_heads = kv.kv_heads();
  a.head_dim = kv.head_dim();
  a.rows = T * a.kv_heads;
  a.capacity = kv.k.shape[0] * kv.k.shape[1];
  Context& ctx = Context::get();
  a.errors = ctx.errors();
  const auto blocks = static_cast<unsigned>((a.rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const unsigned threads = kWarpsPerBlock * 32;
  if (kv.turbo()) {
    const int D = a.head_dim;
    kv::validate_turbo(kv.bits, kv.value_bits, D);
    TurboPlanes out{};
    out.k = kv.k.ptr<uint8_t>();
    out.v = kv.v.ptr<uint8_t>();
    out.k_scales = static_cast<__half*>(kv.k_scales.data);
    out.k_zeros = static_cast<__half*>(kv.k_biases.data);
    out.v_scales = static_cast<__half*>(kv.v_scales.data);
    out.bounds = turbo_boundaries_on_device(kv.value_bits);
    out.signs = turbo_signs_on_device(D);
    out.key_bits = kv.bits;
    out.value_bits = kv.value_bits;
    const bool k8v3 = kv.bits == 8 && kv.value_bits == 3;
    const auto launch = [&]<int kSlots>() {
      if (k8v3) {
        turbo_write_kernel<kSlots, 8, 3><<<blocks, threads, 0, ctx.stream()>>>(a, out);
      } else {
        turbo_write_kernel<kSlots, 0, 0><<<blocks, threads, 0, ctx.stream()>>>(a, out);
      }
    };
    device::with_turbo_slots(D, launch);
    check_launch("turbo_write_kernel");
    return;
  }
  RINGLM_CHECK(kv.affine(), "kv_write_quantized: a dense view");
  const auto planes = [](const Tensor& codes, const Tensor& scales, const Tensor& biases) {
    return AffinePlanes{codes.ptr<uint32_t>(), static_cast<__nv_bfloat16*>(scales.data),
                        static_cast<__nv_bfloat16*>(biases.data)};
  };
  const AffinePlanes k_out = planes(kv.k, kv.k_scales, kv.k_biases);
  const AffinePlanes v_out = planes(kv.v, kv.v_scales, kv.v_biases);
  const auto launch = [&]<int kBits, int kGroup>() {
    affine_write_kernel<kBits, kGroup><<<blocks, threads, 0, ctx.stream()>>>(a, k_out, v_out);
  };
  const int b = kv.bits, g = kv.group_size;
  if (b == 4 && g == 32) {
    launch.template operator()<4, 32>();
  } else if (b == 4 && g == 64) {
    launch.template operator()<4, 64>();
  } else if (b == 8 && g == 32) {
    launch.template operator()<8, 32>();
  } else {
    RINGLM_USER_CHECK(b == 8 && g == 64, "kv_write: affine KV on CUDA with bits ", b,
                      " and group_size ", g, " (supported: 4 or 8 bits, groups of 32 or 64)");
    launch.template operator()<8, 64>();
  }
  check_launch("affine_write_kernel");
}

}  // namespace ringlm::cuda
