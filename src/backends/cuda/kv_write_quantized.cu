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
#include "backends/cuda/device/pdl.cuh"
#include "backends/cuda/device/quant_common.cuh"
#include "backends/cuda/device/turbo_encode.cuh"
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

// ---- TurboQuant (device/turbo_encode.cuh) ----

// kKeyBits / kValueBits > 0: widths fixed at compile time (k8v3, the default); 0 reads the planes'.
template <int kSlots, int kKeyBits, int kValueBits>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    turbo_write_kernel(const RowWrite a, const device::TurboPlanes out) {
  __shared__ float bounds[device::kMaxTurboBounds];
  device::load_turbo_bounds<kValueBits>(out, bounds);  // a constant table: before the wait
  __syncthreads();
  device::wait_prior_grid();
  device::launch_dependents();
  const int64_t r = warp_row();
  const int64_t dst = destination_row(a, r);
  if (dst < 0) return;  // the whole warp
  const int lane = static_cast<int>(threadIdx.x) & 31;
  float k[kSlots];
#pragma unroll
  for (int g = 0; g < kSlots; ++g) k[g] = a.k[r * a.head_dim + g * 32 + lane];
  device::turbo_encode_row<kSlots, kKeyBits, kValueBits>(k, a.v + r * a.head_dim, dst, out, bounds);
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
    const device::TurboPlanes out = device::turbo_planes(kv);
    device::with_turbo_write(kv, [&]<int kSlots, int kKeyBits, int kValueBits>() {
      launch_pdl(turbo_write_kernel<kSlots, kKeyBits, kValueBits>, dim3(blocks), dim3(threads), 0,
                 ctx.stream(), a, out);
    });
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
