// Causal GQA attention over paged K/V on the GPU (f32/bf16/f16 cache, or affine / TurboQuant codes
// decoded in registers by the readers of device/kv_readers.cuh), online softmax in f32.
//
// Core: a block of kWarps warps runs one (query token, query head) over a range of its keys.
// Warp w walks keys j = begin + w, begin + w + kWarps, ... ≤ end, finding each through the row's
// block table; lane l holds dims l, l + 32, ... of q, of the running output and of each K/V row
// (coalesced loads). Per key: s = (q·k) · scale (soft-capped: cap · tanh(s / cap));
// m' = max(m, s); l = l·e^(m−m') + e^(s−m'); acc = acc·e^(m−m') + e^(s−m')·v. The warps'
// (m, l, acc) merge in shared memory in warp order.
//
// Two kernels use it, chosen per row (never per batch):
// - rows with several queries (prefill chunks): one block per (token, head) over all its keys
//   [lo, pos] (lo = pos − window + 1 with a window, else 0); out = acc / l.
// - rows with one query (decode): split-K (flash decoding). The keys are cut at multiples of
//   split_keys absolute positions; one block per (row, head, part) writes its partial (m, l, acc)
//   and a second kernel merges the parts in order. Long contexts then fill the GPU at batch 1.
// Each query's output is a fixed sequence of operations on its own position, window and keys,
// whatever else is in the step: a row's bits are the same alone or batched.
#include <algorithm>
#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/kv_readers.cuh"
#include "backends/cuda/device_rows.h"
#include "backends/cuda/quantized_kv.h"

namespace ringlm::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreadsPerBlock = kWarps * 32;
// Keys per part of a decode query: short parts give few rows enough blocks to fill the GPU; many
// rows fill it anyway, and longer parts then cost less merging.
constexpr int kShortSplit = 128, kLongSplit = 512;
constexpr int kShortSplitMaxQueries = 1024;  // decode (row, head) pairs that still use short parts

struct AttnArgs {
  const float* q;  // [T, q_heads, D]
  float* out;      // [T, q_heads, D]
  const int32_t* query_start;  // device tables (ops::AttentionRows layout)
  const int32_t* context_len;
  const int32_t* block_table;
  int num_rows, max_blocks;
  int q_heads, kv_heads, head_dim, block_tokens;
  float scale, softcap;
  int window;
  bool split_decode;  // rows with one query go through the split-K kernels
  int split_keys;     // keys per part (kShortSplit or kLongSplit)
  int max_parts;      // parts per decode query (stride of the partials)
  float* part_ml;     // [num_rows, q_heads, max_parts, 2]: m, l
  float* part_acc;    // [num_rows, q_heads, max_parts, D]
};

struct Query {
  int row, n, pos, lo;  // its row, the row's query count, its position, its first key
};

__device__ Query locate(const AttnArgs& a, int t) {
  // The last row r with query_start[r] <= t (empty rows share their start with the next).
  int r = 0;
  for (int hi = a.num_rows - 1; r < hi;) {
    const int mid = (r + hi + 1) / 2;
    if (a.query_start[mid] <= t) {
      r = mid;
    } else {
      hi = mid - 1;
    }
  }
  Query qy;
  qy.row = r;
  const int q0 = a.query_start[r];
  qy.n = a.query_start[r + 1] - q0;
  qy.pos = a.context_len[r] - qy.n + (t - q0);
  qy.lo = a.window > 0 ? max(0, qy.pos - a.window + 1) : 0;
  return qy;
}

template <int kChunks>
struct Partials {
  float m[kWarps], l[kWarps];
  float acc[kWarps][kChunks * 32];
};

// Online softmax of (token t, head h) over keys [begin, end] (begin may exceed end: no keys).
// Leaves each warp's partial in `sh` and synchronizes the block.
template <typename Kv, int kChunks>
__device__ __forceinline__ void attend(const AttnArgs& a, const Kv& kv, int t, int h,
                                       const Query& qy, int begin, int end,
                                       Partials<kChunks>& sh) {
  const int g = h / (a.q_heads / a.kv_heads);
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int D = a.head_dim;
  const int32_t* table = a.block_table + static_cast<int64_t>(qy.row) * a.max_blocks;

  const float* qrow = a.q + (static_cast<int64_t>(t) * a.q_heads + h) * D;
  float qr[kChunks], acc[kChunks];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int d = lane + 32 * c;
    qr[c] = d < D ? qrow[d] : 0.0f;
    acc[c] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int j = begin + warp; j <= end; j += kWarps) {
    const int64_t slot =
        static_cast<int64_t>(table[j / a.block_tokens]) * a.block_tokens + j % a.block_tokens;
    const int64_t row = slot * a.kv_heads + g;
    float dot = 0.0f, vr[kChunks];
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int d = lane + 32 * c;
      vr[c] = 0.0f;
      if (d < D) {
        float kx[1], vx[1];
        kv.template key<1>(row, d, kx);
        kv.template value<1>(row, d, vx);
        dot += qr[c] * kx[0];
        vr[c] = vx[0];
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
    sh.m[warp] = m;
    sh.l[warp] = l;
  }
#pragma unroll
  for (int c = 0; c < kChunks; ++c) sh.acc[warp][lane + 32 * c] = acc[c];
  __syncthreads();
}

// The warps' merge weights: m_all = max m_w, weight_w = e^(m_w − m_all), l_all = Σ l_w·weight_w.
template <int kChunks>
__device__ __forceinline__ float merge_weights(const Partials<kChunks>& sh, float* weight,
                                               float& l_all) {
  float m_all = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, sh.m[w]);
  l_all = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = expf(sh.m[w] - m_all);  // 0 for a warp that saw no key (m = -inf, l = acc = 0)
    l_all += sh.l[w] * weight[w];
  }
  return m_all;
}

// Rows with several queries (and decode rows when split_decode is off): all keys, one block.
template <typename Kv, int kChunks>
__global__ void __launch_bounds__(kThreadsPerBlock) attention_kernel(const AttnArgs a, const Kv kv) {
  __shared__ Partials<kChunks> sh;
  const int t = static_cast<int>(blockIdx.x) / a.q_heads;
  const int h = static_cast<int>(blockIdx.x) % a.q_heads;
  const Query qy = locate(a, t);
  if (a.split_decode && qy.n == 1) return;
  attend<Kv, kChunks>(a, kv, t, h, qy, qy.lo, qy.pos, sh);
  float weight[kWarps], l_all;
  merge_weights(sh, weight, l_all);
  float* orow = a.out + (static_cast<int64_t>(t) * a.q_heads + h) * a.head_dim;
  for (int d = static_cast<int>(threadIdx.x); d < a.head_dim; d += kThreadsPerBlock) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o += sh.acc[w][d] * weight[w];
    orow[d] = o / l_all;
  }
}

// Split-K, first pass: block (row · q_heads + head, part) over keys of absolute positions
// [p·S, (p + 1)·S) ∩ [lo, pos], p = lo / S + part, S = split_keys.
template <typename Kv, int kChunks>
__global__ void __launch_bounds__(kThreadsPerBlock)
    attention_split_kernel(const AttnArgs a, const Kv kv) {
  __shared__ Partials<kChunks> sh;
  const int r = static_cast<int>(blockIdx.x) / a.q_heads;
  const int h = static_cast<int>(blockIdx.x) % a.q_heads;
  const int q0 = a.query_start[r];
  if (a.query_start[r + 1] - q0 != 1) return;
  const Query qy = locate(a, q0);
  const int S = a.split_keys;
  const int p = qy.lo / S + static_cast<int>(blockIdx.y);
  if (p > qy.pos / S) return;  // this query has fewer parts
  const int begin = max(qy.lo, p * S), end = min(qy.pos, p * S + S - 1);
  attend<Kv, kChunks>(a, kv, q0, h, qy, begin, end, sh);
  float weight[kWarps], l_all;
  const float m_all = merge_weights(sh, weight, l_all);
  const int64_t part = (static_cast<int64_t>(r) * a.q_heads + h) * a.max_parts + blockIdx.y;
  if (threadIdx.x == 0) {
    a.part_ml[2 * part] = m_all;
    a.part_ml[2 * part + 1] = l_all;
  }
  float* dst = a.part_acc + part * a.head_dim;
  for (int d = static_cast<int>(threadIdx.x); d < a.head_dim; d += kThreadsPerBlock) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o += sh.acc[w][d] * weight[w];
    dst[d] = o;
  }
}

// Split-K, second pass: block (row · q_heads + head) merges its parts in order.
__global__ void __launch_bounds__(kThreadsPerBlock) attention_merge_kernel(const AttnArgs a) {
  const int r = static_cast<int>(blockIdx.x) / a.q_heads;
  const int h = static_cast<int>(blockIdx.x) % a.q_heads;
  const int q0 = a.query_start[r];
  if (a.query_start[r + 1] - q0 != 1) return;
  const Query qy = locate(a, q0);
  const int parts = qy.pos / a.split_keys - qy.lo / a.split_keys + 1;
  const int64_t base = (static_cast<int64_t>(r) * a.q_heads + h) * a.max_parts;
  float m_all = -INFINITY;
  for (int p = 0; p < parts; ++p) m_all = fmaxf(m_all, a.part_ml[2 * (base + p)]);
  float l_all = 0.0f;
  for (int p = 0; p < parts; ++p)
    l_all += a.part_ml[2 * (base + p) + 1] * expf(a.part_ml[2 * (base + p)] - m_all);
  float* orow = a.out + (static_cast<int64_t>(q0) * a.q_heads + h) * a.head_dim;
  for (int d = static_cast<int>(threadIdx.x); d < a.head_dim; d += kThreadsPerBlock) {
    float o = 0.0f;
    for (int p = 0; p < parts; ++p)
      o += a.part_acc[(base + p) * a.head_dim + d] * expf(a.part_ml[2 * (base + p)] - m_all);
    orow[d] = o / l_all;
  }
}

template <typename Kv, int kChunks>
void launch(const AttnArgs& args, const Kv& kv, const RowsSummary& summary, int64_t T,
            cudaStream_t stream) {
  if (summary.other_rows > 0 || !args.split_decode) {
    attention_kernel<Kv, kChunks>
        <<<static_cast<unsigned>(T * args.q_heads), kThreadsPerBlock, 0, stream>>>(args, kv);
    check_launch("attention_kernel");
  }
  if (args.split_decode && summary.decode_rows > 0) {
    const dim3 grid(static_cast<unsigned>(args.num_rows * args.q_heads),
                    static_cast<unsigned>(args.max_parts));
    attention_split_kernel<Kv, kChunks><<<grid, kThreadsPerBlock, 0, stream>>>(args, kv);
    check_launch("attention_split_kernel");
    attention_merge_kernel<<<static_cast<unsigned>(args.num_rows * args.q_heads), kThreadsPerBlock,
                             0, stream>>>(args);
    check_launch("attention_merge_kernel");
  }
}

template <typename Kv>
void launch_for_format(const AttnArgs& args, const Kv& kv, const RowsSummary& summary, int64_t T,
                       cudaStream_t stream) {
  const int D = args.head_dim;
  if (D <= 32) {
    launch<Kv, 1>(args, kv, summary, T, stream);
  } else if (D <= 64) {
    launch<Kv, 2>(args, kv, summary, T, stream);
  } else if (D <= 128) {
    launch<Kv, 4>(args, kv, summary, T, stream);
  } else {
    launch<Kv, 8>(args, kv, summary, T, stream);
  }
}

void run_attention(const Tensor& q, const ops::KvLayerView& kv, const ops::AttentionRows& drows,
                   const RowsSummary& summary, const ops::AttentionParams& params, Tensor& out) {
  const int64_t T = q.shape[0], QH = q.shape[1], D = q.shape[2];
  if (T == 0) return;
  RINGLM_CHECK(D <= kMaxHeadDim, "attention: head_dim ", D,
               " is above the CUDA backend's limit of ", kMaxHeadDim);
  RINGLM_CHECK(T * QH <= INT32_MAX && int64_t{drows.num_rows} * QH <= INT32_MAX,
               "attention: ", q.describe(), " has too many (token, head) pairs");
  Context& ctx = Context::get();
  AttnArgs args{};
  args.q = q.ptr<const float>();
  args.out = out.ptr<float>();
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
  args.split_decode = true;
  args.split_keys = summary.decode_rows * QH <= kShortSplitMaxQueries ? kShortSplit : kLongSplit;
  args.max_parts =
      std::max(1, (summary.max_decode_context + args.split_keys - 1) / args.split_keys);
  if (summary.decode_rows > 0) {
    // Partials of every (row, head, part); rows that are not decode rows leave theirs unused.
    const int64_t slots = int64_t{drows.num_rows} * QH * args.max_parts;
    auto* scratch = static_cast<float*>(ctx.scratch(
        Scratch::AttentionPartials, static_cast<size_t>(slots * (2 + D)) * sizeof(float)));
    args.part_ml = scratch;
    args.part_acc = scratch + 2 * slots;
  }
  device::with_kv_reader(
      kv, [&](const auto& reader) { launch_for_format(args, reader, summary, T, ctx.stream()); });
  // TurboQuant: the kernels accumulated rotated values; un-rotate each output row once.
  if (kv.turbo()) turbo_unrotate_rows(out);
}

}  // namespace

void attention(const Tensor& q, const ops::KvLayerView& kv, const ops::AttentionRows& rows,
               const ops::AttentionParams& params, Tensor& out) {
  if (q.shape[0] == 0) return;
  void* dst = Context::get().scratch(Scratch::Rows, packed_rows_bytes(rows));
  run_attention(q, kv, upload_rows(rows, dst), summarize_rows(rows), params, out);
}

void attention(const Tensor& q, const ops::KvLayerView& kv, const DeviceRows& device_rows,
               const ops::AttentionParams& params, Tensor& out) {
  run_attention(q, kv, device_rows.view(), device_rows.summary(), params, out);
}

}  // namespace ringlm::cuda
