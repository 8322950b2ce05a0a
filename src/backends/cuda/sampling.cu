// Sampling on the GPU: engine/sampler.h's steps 5-6 for temperature > 0, one block per job.
//
//   w_i = exp(l_i / t - max(l) / t) in f64 (0 for a non-finite argument; the largest is 1);
//   min_p: w < min_p -> 0;
//   top_k: the k-th largest positive w is the threshold (ties with it kept) — radix selection
//     over the weights' bit patterns (positive doubles order as their bits), 8 bits per pass,
//     counts through shared-memory integer atomics (exact);
//   top_p: the cut c is the smallest weight whose strictly heavier mass K(c) = Σ_{w > c} w is
//     below top_p · Σ w — radix selection over the bit patterns as top_k, with masses in fixed
//     point (w · 2^s as 64-bit integers, s as large as the vocabulary allows: sums exact and
//     independent of order, each weight off by < 2^-s); the tokens of weight c are kept in id
//     order while the mass before them is below the limit;
//   the token: the first id, in id order, whose running sum of kept weights passes u · Σ kept
//     (each warp sums a contiguous segment; the block scans the segment that holds the
//     crossing), else the last id kept.
// Temperature 0: the first id of the largest logit (engine::argmax_token). A job that wants its
// logprob also gets l_token − (max + log Σ exp(l_i − max)), in f64, as engine/sampler.cc's
// fill_logprobs on the unprocessed row.
// Every sum has one fixed order per vocabulary size, and a job reads only its own row: a token
// does not depend on the other jobs. Against the host sampler (engine/sampler.cc: the same rules,
// other summation orders, Highway's exp) the token is the same except where u · Σ or the top_p
// limit falls within rounding of a boundary.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <span>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"

namespace ringlm::cuda {

namespace {

constexpr int kSampleThreads = 1024, kSampleWarps = kSampleThreads / 32;
// Radix passes count into this many histograms (4 warps each), so a popular digit's atomics
// are spread; each thread also adds runs of the same digit once.
constexpr int kHistCopies = 8;

struct SampleArgs {
  const float* logits;  // [rows, V], row stride ld
  int64_t ld, V;
  const SampleJob* jobs;
  double* weights;  // [jobs, V] scratch
  int32_t* tokens;  // [jobs]
  float* logprobs;  // [jobs], null when no job wants one
};

struct SampleShared {
  double partial[kSampleWarps];
  double total, target;
  float fpartial[33];
  unsigned long long hist_copies[kHistCopies * 256];
  unsigned long long digit[256];
  unsigned long long upartial[kSampleWarps];
  unsigned long long prefix, above;
  int remaining, found, last_kept, done, pick_warp;
  int warp_last[kSampleWarps];
  unsigned tie_masks[kSampleWarps];
};

__device__ __forceinline__ unsigned long long key_of(double w) {
  return static_cast<unsigned long long>(__double_as_longlong(w));
}
__device__ __forceinline__ double weight_of(unsigned long long key) {
  return __longlong_as_double(static_cast<long long>(key));
}

// Σ v over the block: lane 0's shuffle-down sum per warp, then warp 0 over the warps in order.
__device__ double block_sum_fixed(double v, SampleShared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(device::kFullMask, v, o);
  __syncthreads();  // the previous call's readers are done with sh.total
  if (lane == 0) sh.partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    double t = sh.partial[lane];
    for (int o = 16; o > 0; o >>= 1) t += __shfl_down_sync(device::kFullMask, t, o);
    if (lane == 0) sh.total = t;
  }
  __syncthreads();
  return sh.total;
}

// sh.digit[b] = Σ value(w) over the positive weights whose bit pattern matches `prefix` above
// bit shift + 8 and has digit b at bits [shift, shift + 8). Integer sums: any order, same result.
template <class Value>
__device__ void digit_histogram(const double* w, int64_t V, int shift, Value value,
                                SampleShared& sh) {
  for (int b = static_cast<int>(threadIdx.x); b < kHistCopies * 256; b += kSampleThreads)
    sh.hist_copies[b] = 0;
  __syncthreads();
  const unsigned long long high = shift == 56 ? 0ull : ~((1ull << (shift + 8)) - 1);
  const unsigned long long prefix = sh.prefix & high;
  unsigned long long* mine =
      sh.hist_copies + (threadIdx.x >> 5) / (kSampleWarps / kHistCopies) * 256;
  int run = -1;
  unsigned long long sum = 0;
  for (int64_t i = threadIdx.x; i < V; i += kSampleThreads) {
    const double v = w[i];
    const unsigned long long key = key_of(v);
    if (v <= 0.0 || (key & high) != prefix) continue;
    const int b = static_cast<int>((key >> shift) & 255);
    if (b != run) {
      if (run >= 0) atomicAdd(mine + run, sum);
      run = b;
      sum = 0;
    }
    sum += value(v);
  }
  if (run >= 0) atomicAdd(mine + run, sum);
  __syncthreads();
  for (int b = static_cast<int>(threadIdx.x); b < 256; b += kSampleThreads) {
    unsigned long long total = 0;
    for (int c = 0; c < kHistCopies; ++c) total += sh.hist_copies[c * 256 + b];
    sh.digit[b] = total;
  }
  __syncthreads();
}

// The k-th largest positive weight (0 when fewer than k are positive).
__device__ double top_k_threshold(const double* w, int64_t V, int k, SampleShared& sh) {
  double positive = 0.0;  // counts are exact in a double
  for (int64_t i = threadIdx.x; i < V; i += kSampleThreads) positive += w[i] > 0.0 ? 1.0 : 0.0;
  if (block_sum_fixed(positive, sh) < k) return 0.0;
  if (threadIdx.x == 0) {
    sh.prefix = 0;
    sh.remaining = k;
  }
  __syncthreads();
  for (int shift = 56; shift >= 0; shift -= 8) {
    digit_histogram(
        w, V, shift, [](double) { return 1ull; }, sh);
    if (threadIdx.x == 0) {
      int above = 0;
      for (int b = 255; b >= 0; --b) {
        const auto count = static_cast<int>(sh.digit[b]);
        if (above + count >= sh.remaining) {
          sh.prefix |= static_cast<unsigned long long>(b) << shift;
          sh.remaining -= above;
          break;
        }
        above += count;
      }
    }
    __syncthreads();
  }
  return weight_of(sh.prefix);
}

// Weights in fixed point: w · 2^shift with Σ over V weights below 2^62 (w <= 1).
struct FixedPoint {
  double scale;
  __device__ explicit FixedPoint(int64_t V) {
    int bits = 0;
    while ((int64_t{1} << bits) < V) ++bits;
    scale = ldexp(1.0, 62 - bits);
  }
  __device__ unsigned long long operator()(double w) const {
    return static_cast<unsigned long long>(w * scale);
  }
};

// Σ v over the block (integers: any order gives the same sum).
__device__ unsigned long long block_sum_exact(unsigned long long v, SampleShared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(device::kFullMask, v, o);
  __syncthreads();  // the previous call's readers are done with sh.upartial
  if (lane == 0) sh.upartial[warp] = v;
  __syncthreads();
  unsigned long long total = 0;
  for (int wp = 0; wp < kSampleWarps; ++wp) total += sh.upartial[wp];
  return total;
}

// top_p: zeroes the weights past the cut (see the file comment).
__device__ void apply_top_p(double* w, int64_t V, float top_p, SampleShared& sh) {
  const FixedPoint fixed(V);
  unsigned long long own = 0;
  for (int64_t i = threadIdx.x; i < V; i += kSampleThreads) own += fixed(w[i]);
  const auto limit = static_cast<unsigned long long>(static_cast<double>(top_p) *
                                                     static_cast<double>(block_sum_exact(own, sh)));
  // Digit by digit from the top: the bucket where the heavier mass first reaches the limit.
  if (threadIdx.x == 0) {
    sh.prefix = 0;
    sh.above = 0;
  }
  __syncthreads();
  for (int shift = 56; shift >= 0; shift -= 8) {
    digit_histogram(w, V, shift, fixed, sh);
    if (threadIdx.x == 0) {
      for (int b = 255; b >= 0; --b) {
        if (sh.above + sh.digit[b] >= limit || b == 0) {
          sh.prefix |= static_cast<unsigned long long>(b) << shift;
          break;
        }
        sh.above += sh.digit[b];
      }
    }
    __syncthreads();
  }
  // K(cut) = above < limit <= above + the ties' mass: the first n ties in id order are kept,
  // n the fewest whose mass reaches the limit from `above`.
  const double cut = weight_of(sh.prefix);
  const unsigned long long cut_fixed = fixed(cut), above = sh.above;
  const unsigned long long keep =
      cut_fixed == 0 ? ~0ull : (limit - above + cut_fixed - 1) / cut_fixed;
  double ties = 0.0;
  for (int64_t i = threadIdx.x; i < V; i += kSampleThreads) ties += w[i] == cut ? 1.0 : 0.0;
  if (block_sum_fixed(ties, sh) <= static_cast<double>(keep)) {
    for (int64_t i = threadIdx.x; i < V; i += kSampleThreads)
      if (w[i] < cut) w[i] = 0.0;
    return;
  }
  if (threadIdx.x == 0) {
    sh.last_kept = -1;
    sh.remaining = static_cast<int>(keep);
  }
  __syncthreads();
  for (int64_t base = 0; base < V && sh.remaining > 0; base += kSampleThreads) {
    const int64_t i = base + threadIdx.x;
    const unsigned mask = __ballot_sync(device::kFullMask, i < V && w[i] == cut);
    if ((threadIdx.x & 31) == 0) sh.tie_masks[threadIdx.x >> 5] = mask;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int wp = 0; wp < kSampleWarps && sh.remaining > 0; ++wp) {
        for (unsigned m = sh.tie_masks[wp]; m != 0 && sh.remaining > 0; m &= m - 1) {
          sh.last_kept = static_cast<int>(base) + 32 * wp + __ffs(static_cast<int>(m)) - 1;
          --sh.remaining;
        }
      }
    }
    __syncthreads();
  }
  const int last_kept = sh.last_kept;
  for (int64_t i = threadIdx.x; i < V; i += kSampleThreads) {
    const double v = w[i];
    if (v < cut || (v == cut && i > last_kept)) w[i] = 0.0;
  }
}

// Σ over the warp, every lane getting the same value (a fixed butterfly order).
__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(device::kFullMask, v, o);
  return v;
}

// Σ of v over the threads before this one, in thread order (fixed: warp shuffles, then the warp
// totals summed in order).
__device__ double block_exclusive_scan(double v, SampleShared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  double inclusive = v;
  for (int o = 1; o < 32; o <<= 1) {
    const double up = __shfl_up_sync(device::kFullMask, inclusive, o);
    if (lane >= o) inclusive += up;
  }
  __syncthreads();  // earlier readers of sh.partial are done
  if (lane == 31) sh.partial[warp] = inclusive;
  __syncthreads();
  double before = __shfl_up_sync(device::kFullMask, inclusive, 1);  // the lane before's sum
  if (lane == 0) before = 0.0;
  double warps_before = 0.0;
  for (int wp = 0; wp < warp; ++wp) warps_before += sh.partial[wp];
  return warps_before + before;
}

// The first id, in id order, whose running sum of the weights passes u · Σ w, else the last id
// with a positive weight (0 if none). Each warp sums a contiguous segment of ids; thread 0 picks
// the segment where the running total of segments passes u · Σ; the block then scans that
// segment, each thread a contiguous run of ids. Fixed orders throughout; where the segment's
// scan and its total round apart at the crossing, the segment's last positive id.
__device__ int inverse_cdf(const double* w, int64_t V, double u, SampleShared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t seg = (V + kSampleWarps - 1) / kSampleWarps;
  const int64_t begin = warp * seg < V ? warp * seg : V;
  const int64_t end = begin + seg < V ? begin + seg : V;
  __syncthreads();  // every thread's weights are written
  double own = 0.0;
  int last = -1;
  for (int64_t i = begin + lane; i < end; i += 32) {
    const double v = w[i];
    own += v;
    if (v > 0.0) last = static_cast<int>(i);
  }
  own = warp_sum(own);
  for (int o = 16; o > 0; o >>= 1) last = max(last, __shfl_xor_sync(device::kFullMask, last, o));
  if (lane == 0) {
    sh.partial[warp] = own;
    sh.warp_last[warp] = last;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int wp = 0; wp < kSampleWarps; ++wp) total += sh.partial[wp];
    const double target = u * total;
    double before = 0.0;
    sh.pick_warp = -1;
    sh.last_kept = 0;
    for (int wp = 0; wp < kSampleWarps; ++wp) {
      if (sh.warp_last[wp] >= 0) sh.last_kept = sh.warp_last[wp];
      if (sh.pick_warp < 0 && sh.warp_last[wp] >= 0 && before + sh.partial[wp] > target) {
        sh.pick_warp = wp;
        sh.total = before;  // the mass before the picked segment
      }
      before += sh.partial[wp];
    }
    sh.target = target;
    sh.found = INT_MAX;
  }
  __syncthreads();
  const int pick = sh.pick_warp;
  if (pick < 0) return sh.last_kept;
  const int64_t seg_begin = pick * seg, seg_end = seg_begin + seg < V ? seg_begin + seg : V;
  const int64_t per = (seg + kSampleThreads - 1) / kSampleThreads;
  const int64_t first = seg_begin + threadIdx.x * per;
  const int64_t stop = first + per < seg_end ? first + per : seg_end;
  double mine = 0.0;
  for (int64_t i = first; i < stop; ++i) mine += w[i];
  double running = sh.total + block_exclusive_scan(mine, sh);
  const double target = sh.target;
  for (int64_t i = first; i < stop; ++i) {
    const double v = w[i];
    running += v;
    if (v > 0.0 && running > target) {
      atomicMin(&sh.found, static_cast<int>(i));
      break;
    }
  }
  __syncthreads();
  return sh.found != INT_MAX ? sh.found : sh.warp_last[pick];
}

// The job's result: its token and, when wanted, the token's log-probability under the row's
// softmax at temperature 1 (log_total = max + log Σ exp(l_i − max), computed by every thread).
__device__ void write_result(const SampleArgs& a, const SampleJob& job, const float* row,
                             int32_t token, double log_total) {
  if (threadIdx.x != 0) return;
  a.tokens[blockIdx.x] = token;
  if (job.want_logprob)
    a.logprobs[blockIdx.x] = static_cast<float>(static_cast<double>(row[token]) - log_total);
}

__global__ void __launch_bounds__(kSampleThreads) sample_kernel(const SampleArgs a) {
  __shared__ SampleShared sh;
  const SampleJob job = a.jobs[blockIdx.x];
  const float* row = a.logits + int64_t{job.row} * a.ld;
  double* w = a.weights + int64_t{blockIdx.x} * a.V;
  const int64_t V = a.V;

  float largest = -INFINITY;
  for (int64_t i = threadIdx.x; i < V; i += kSampleThreads) largest = fmaxf(largest, row[i]);
  largest = device::block_max(largest, sh.fpartial);
  double log_total = 0.0;
  if (job.want_logprob) {
    double own = 0.0;
    for (int64_t i = threadIdx.x; i < V; i += kSampleThreads)
      own += exp(static_cast<double>(row[i]) - static_cast<double>(largest));
    log_total = static_cast<double>(largest) + log(block_sum_fixed(own, sh));
  }
  if (job.temperature == 0.0f) {  // greedy: the first id holding the largest logit
    if (threadIdx.x == 0) sh.found = INT_MAX;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < V; i += kSampleThreads) {
      if (row[i] == largest) {
        atomicMin(&sh.found, static_cast<int>(i));
        break;
      }
    }
    __syncthreads();
    return write_result(a, job, row, sh.found != INT_MAX ? sh.found : 0, log_total);
  }
  const double t = job.temperature, top = static_cast<double>(largest) / t;
  if (!isfinite(top)) {  // every token suppressed: the lowest id, as the host sampler
    return write_result(a, job, row, 0, log_total);
  }
  const double min_p = job.min_p;
  for (int64_t i = threadIdx.x; i < V; i += kSampleThreads) {
    const double arg = static_cast<double>(row[i]) / t - top;
    double v = isfinite(arg) ? exp(arg) : 0.0;
    if (v < min_p) v = 0.0;
    w[i] = v;
  }
  // Until inverse_cdf, each thread touches only its own elements (i ≡ threadIdx.x).
  if (job.top_k > 0 && job.top_k < V) {
    const double threshold = top_k_threshold(w, V, job.top_k, sh);
    for (int64_t i = threadIdx.x; i < V; i += kSampleThreads)
      if (w[i] < threshold) w[i] = 0.0;
  }
  if (job.top_p < 1.0f) apply_top_p(w, V, job.top_p, sh);

  write_result(a, job, row, inverse_cdf(w, V, job.u, sh), log_total);
}

}  // namespace

void sample(const Tensor& logits, std::span<const SampleJob> jobs, Tensor& tokens,
            Tensor* logprobs) {
  const int64_t rows = logits.shape[0], V = logits.shape[1];
  const auto J = static_cast<int64_t>(jobs.size());
  if (J == 0) return;
  RINGLM_CHECK(logits.dtype == DType::F32 && logits.ndim == 2 && logits.strides[1] == 1,
               "sample: logits ", logits.describe(),
               " must be F32 [rows, vocab] with unit columns");
  RINGLM_CHECK(tokens.dtype == DType::I32 && tokens.numel() == J, "sample: tokens ",
               tokens.describe(), " must be I32[", J, "]");
  RINGLM_CHECK(V >= 1 && V <= INT_MAX && J <= 65535, "sample: ", J, " jobs over rows of ", V,
               " logits");
  RINGLM_CHECK(logprobs == nullptr || (logprobs->dtype == DType::F32 && logprobs->numel() == J),
               "sample: logprobs ", logprobs ? logprobs->describe() : "", " must be F32[", J, "]");
  for (const SampleJob& j : jobs) {
    RINGLM_CHECK(j.row >= 0 && j.row < rows, "sample: job row ", j.row, " of ", rows);
    RINGLM_CHECK(!j.want_logprob || logprobs != nullptr, "sample: a job wants its logprob and ",
                 "there is no logprobs tensor");
    RINGLM_CHECK(j.temperature >= 0.0f && std::isfinite(j.temperature) && j.top_k >= 0 &&
                     j.top_p > 0.0f && j.top_p <= 1.0f && j.min_p >= 0.0f && j.min_p <= 1.0f &&
                     j.u >= 0.0 && j.u < 1.0,
                 "sample: invalid job (temperature ", j.temperature, ", top_k ", j.top_k,
                 ", top_p ", j.top_p, ", min_p ", j.min_p, ", u ", j.u, ")");
  }
  Context& ctx = Context::get();
  auto* device_jobs = static_cast<SampleJob*>(
      ctx.scratch(Scratch::SampleJobs, static_cast<size_t>(J) * sizeof(SampleJob)));
  ctx.copy_to_device(device_jobs, jobs.data(), jobs.size_bytes());
  // One block fills an SM (1024 threads × 64 registers), so launches of one job per SM lose
  // nothing against one launch of all jobs and bound the f64 weight scratch to SMs × V.
  static const int64_t per_launch = [] {
    int device = 0, sms = 0;
    RINGLM_CUDA_CHECK(cudaGetDevice(&device));
    RINGLM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return int64_t{std::max(sms, 1)};
  }();
  const int64_t chunk = std::min(J, per_launch);
  auto* weights = static_cast<double*>(
      ctx.scratch(Scratch::SampleWeights, static_cast<size_t>(chunk * V) * sizeof(double)));
  for (int64_t first = 0; first < J; first += chunk) {
    const SampleArgs args{logits.ptr<const float>(),
                          logits.strides[0],
                          V,
                          device_jobs + first,
                          weights,
                          tokens.ptr<int32_t>() + first,
                          logprobs != nullptr ? logprobs->ptr<float>() + first : nullptr};
    sample_kernel<<<static_cast<unsigned>(std::min(chunk, J - first)), kSampleThreads, 0,
                    ctx.stream()>>>(args);
  }
  check_launch("sample_kernel");
}

}  // namespace ringlm::cuda
