// Causal GQA attention over paged K/V on the GPU (f32/bf16/f16 cache), online softmax in f32.
//
// One block per (query token, query head), kWarps warps. Warp w walks the token's keys
// j = lo + w, lo + w + kWarps, ... ≤ pos (lo = pos − window + 1 with a window, else 0), finding
// each through the row's block table; lane l holds dims l, l + 32, ... of q, of the running
// output and of each K/V row (coalesced loads). Per key: s = (q·k) · scale (soft-capped:
// cap · tanh(s / cap)); m' = max(m, s); l = l·e^(m−m') + e^(s−m'); acc = acc·e^(m−m') + e^(s−m')·v.
// The warps' partial (m, l, acc) merge in shared memory; out = acc / l.
//
// The operations that produce a query's output depend only on its position, window and keys —
// not on the other rows or queries of the step (batch invariance, bitwise).
#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device_rows.h"

namespace ringlm::cuda {

namespace {

constexpr int kWarps = 4;

struct AttnArgs {
  const float* q;  // [T, q_heads, D]
  float* out;      // [T, q_heads, D]
  const void* k;   // [num_blocks, block_tokens, kv_heads, D]
  const void* v;
  const int32_t* query_start;  // device tables (ops::AttentionRows layout)
  const int32_t* context_len;
  const int32_t* block_table;
  int num_rows, max_blocks;
  int q_heads, kv_heads, head_dim, block_tokens;
  float scale, softcap;
  int window;
};

// kChunks = dims per lane (head_dim <= 32 · kChunks).
template <typename KV, int kChunks>
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(const AttnArgs a) {
  __shared__ float s_m[kWarps], s_l[kWarps];
  __shared__ float s_acc[kWarps][kChunks * 32];
  const int t = static_cast<int>(blockIdx.x) / a.q_heads;
  const int h = static_cast<int>(blockIdx.x) % a.q_heads;
  const int g = h / (a.q_heads / a.kv_heads);
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int D = a.head_dim;

  // The row of token t: the last r with query_start[r] <= t (empty rows share their start).
  int r = 0;
  for (int hi = a.num_rows - 1; r < hi;) {
    const int mid = (r + hi + 1) / 2;
    if (a.query_start[mid] <= t) {
      r = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int q0 = a.query_start[r], n = a.query_start[r + 1] - q0;
  const int pos = a.context_len[r] - n + (t - q0);
  const int lo = a.window > 0 ? max(0, pos - a.window + 1) : 0;
  const int32_t* table = a.block_table + static_cast<int64_t>(r) * a.max_blocks;
  const auto* kbase = static_cast<const KV*>(a.k);
  const auto* vbase = static_cast<const KV*>(a.v);
  const int64_t token_stride = static_cast<int64_t>(a.kv_heads) * D;

  const float* qrow = a.q + (static_cast<int64_t>(t) * a.q_heads + h) * D;
  float qr[kChunks], acc[kChunks];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int d = lane + 32 * c;
    qr[c] = d < D ? qrow[d] : 0.0f;
    acc[c] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int j = lo + warp; j <= pos; j += kWarps) {
    const int64_t slot =
        static_cast<int64_t>(table[j / a.block_tokens]) * a.block_tokens + j % a.block_tokens;
    const int64_t off = slot * token_stride + static_cast<int64_t>(g) * D;
    float dot = 0.0f, vr[kChunks];
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int d = lane + 32 * c;
      vr[c] = 0.0f;
      if (d < D) {
        dot += qr[c] * device::to_f32(kbase[off + d]);
        vr[c] = device::to_f32(vbase[off + d]);
      }
    }
    dot = device::warp_sum(dot);
    float s = dot * a.scale;
    if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new);  // 0 for the first key (m = -inf)
    const float p = expf(s - m_new);
    l = l * corr + p;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) acc[c] = acc[c] * corr + p * vr[c];
    m = m_new;
  }

  if (lane == 0) {
    s_m[warp] = m;
    s_l[warp] = l;
  }
#pragma unroll
  for (int c = 0; c < kChunks; ++c) s_acc[warp][lane + 32 * c] = acc[c];
  __syncthreads();
  float m_all = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, s_m[w]);
  float weight[kWarps], l_all = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = expf(s_m[w] - m_all);  // 0 for a warp that saw no key
    l_all += s_l[w] * weight[w];
  }
  float* orow = a.out + (static_cast<int64_t>(t) * a.q_heads + h) * D;
  for (int d = static_cast<int>(threadIdx.x); d < D; d += kWarps * 32) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o += s_acc[w][d] * weight[w];
    orow[d] = o / l_all;
  }
}

template <typename KV>
void launch_for_dtype(const AttnArgs& args, unsigned blocks, cudaStream_t stream) {
  const int D = args.head_dim;
  if (D <= 32) {
    attention_kernel<KV, 1><<<blocks, kWarps * 32, 0, stream>>>(args);
  } else if (D <= 64) {
    attention_kernel<KV, 2><<<blocks, kWarps * 32, 0, stream>>>(args);
  } else if (D <= 128) {
    attention_kernel<KV, 4><<<blocks, kWarps * 32, 0, stream>>>(args);
  } else {
    attention_kernel<KV, 8><<<blocks, kWarps * 32, 0, stream>>>(args);
  }
}

void run_attention(const Tensor& q, const ops::KvLayerView& kv, const ops::AttentionRows& drows,
                   const ops::AttentionParams& params, Tensor& out) {
  const int64_t T = q.shape[0], QH = q.shape[1], D = q.shape[2];
  if (T == 0) return;
  RINGLM_CHECK(D <= kMaxHeadDim, "attention: head_dim ", D, " is above the CUDA backend's limit of ",
               kMaxHeadDim);
  RINGLM_CHECK(T * QH <= INT32_MAX, "attention: ", q.describe(), " has too many (token, head) pairs");
  AttnArgs args{};
  args.q = q.ptr<const float>();
  args.out = out.ptr<float>();
  args.k = kv.k.data;
  args.v = kv.v.data;
  args.query_start = drows.query_start;
  args.context_len = drows.context_len;
  args.block_table = drows.block_table;
  args.num_rows = drows.num_rows;
  args.max_blocks = drows.max_blocks;
  args.q_heads = static_cast<int>(QH);
  args.kv_heads = kv.kv_heads();
  args.head_dim = static_cast<int>(D);
  args.block_tokens = kv.block_tokens();
  args.scale = params.scale;
  args.softcap = params.softcap;
  args.window = params.window;
  Context& ctx = Context::get();
  device::dispatch_float(kv.k.dtype, [&]<typename KV>(KV*) {
    launch_for_dtype<KV>(args, static_cast<unsigned>(T * QH), ctx.stream());
  });
  check_launch("attention_kernel");
}

}  // namespace

void attention(const Tensor& q, const ops::KvLayerView& kv, const ops::AttentionRows& rows,
               const ops::AttentionParams& params, Tensor& out) {
  if (q.shape[0] == 0) return;
  Context& ctx = Context::get();
  void* dst = ctx.scratch(Scratch::Rows, packed_rows_bytes(rows));
  run_attention(q, kv, upload_rows(rows, dst), params, out);
}

void attention(const Tensor& q, const ops::KvLayerView& kv, const DeviceRows& device_rows,
               const ops::AttentionParams& params, Tensor& out) {
  run_attention(q, kv, device_rows.view(), params, out);
}

}  // namespace ringlm::cuda
