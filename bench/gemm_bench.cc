// The decode GEMMs of a model shape, timed on the GPU: what ringlm's matmul calls today
// (cublasGemmEx, CUBLAS_GEMM_DEFAULT, bf16 in, f32 out, 32 MiB workspace: backends/cuda/matmul.cu)
// against every algorithm cuBLASLt's heuristic offers for the same problem. Per (shape, M): µs
// per GEMM and the bytes it must move (weights + x + y) over that time, for the default call and
// the best Lt algorithm with its configuration (tile, stages, split-K, reduction). The weights
// cycle through copies totalling >= 4× the L2 so each GEMM reads them from HBM, as in a decode
// step where the other layers' weights evict them. Values do not matter for speed (constant bytes).
// On Hopper also ringlm's own stream_gemm (backends/cuda/stream_gemm.h, the TMA + wgmma stream-K
// kernel that matmul.cu would run in place of cublasGemmEx when switched on) for the same
// problem: µs, TB/s and its speed against cublasGemmEx ("own/Ex" > 1: faster).
// Last line: the RINGLM_CUDA_LT_RANKS value naming each shape whose best Lt candidate beat
// cublasGemmEx by >= 3 % (backends/cuda/gemm_lt.h of wip/cublaslt-ranks.patch: matmul.cu runs
// the named shapes with that candidate), for a same-binary A/B.
//   gemm_bench [--m 3,8,16,32,64,128,256] [--shapes qkv:6144x4096,o:4096x4096,...]
//              [--iters 40] [--algos 24] [--json]
// Default shapes: Llama-3.1-8B's q/k/v (joined), o, gate/up (joined up to 64 rows, else gate and
// up apart) and down projections.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cuda/runtime.h"
#include "backends/cuda/stream_gemm.h"

namespace {

void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
  std::exit(1);
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "%s: cuBLAS status %d\n", what, static_cast<int>(status));
  std::exit(1);
}

struct Shape {
  std::string name;
  int64_t n, k;  // weights [n, k]
};

struct Options {
  std::vector<int64_t> ms = {3, 8, 16, 32, 64, 128, 256};
  std::vector<Shape> shapes = {{"qkv", 6144, 4096},
                               {"o", 4096, 4096},
                               {"gate_up", 28672, 4096},
                               {"gate", 14336, 4096},
                               {"down", 4096, 14336}};
  int iters = 40;
  int algos = 24;
  bool json = false;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, sep);)
    if (!part.empty()) out.push_back(part);
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--m") {
      o.ms.clear();
      for (const std::string& m : split(value(), ',')) o.ms.push_back(std::stoll(m));
    } else if (a == "--shapes") {
      o.shapes.clear();
      for (const std::string& s : split(value(), ',')) {
        const auto colon = s.find(':'), x = s.find('x');
        if (colon == std::string::npos || x == std::string::npos || x < colon) {
          std::fprintf(stderr, "--shapes: NAME:NxK, not %s\n", s.c_str());
          std::exit(2);
        }
        o.shapes.push_back({s.substr(0, colon), std::stoll(s.substr(colon + 1, x - colon - 1)),
                            std::stoll(s.substr(x + 1))});
      }
    } else if (a == "--iters") {
      o.iters = std::stoi(value());
    } else if (a == "--algos") {
      o.algos = std::stoi(value());
    } else if (a == "--json") {
      o.json = true;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      std::exit(2);
    }
  }
  return o;
}

// Device buffers of one problem: `copies` weight matrices, x, y and the cuBLAS workspace.
struct Buffers {
  std::vector<void*> weights;
  void* x = nullptr;
  void* y = nullptr;
};

constexpr size_t kWorkspace = size_t{32} << 20;  // as backends/cuda/runtime.cc

struct Timing {
  double us = 0;
  bool ok = false;
};

// Mean µs of `launch(copy)` over iters launches cycling the weight copies (after a warm-up pass).
template <typename Launch>
Timing time_launches(int copies, int iters, cudaStream_t stream, Launch&& launch) {
  for (int c = 0; c < copies; ++c)
    if (!launch(c)) return {};
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "event");
  check_cuda(cudaEventCreate(&stop), "event");
  check_cuda(cudaEventRecord(start, stream), "record");
  for (int i = 0; i < iters; ++i)
    if (!launch(i % copies)) return {};
  check_cuda(cudaEventRecord(stop, stream), "record");
  check_cuda(cudaEventSynchronize(stop), "sync");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, start, stop), "elapsed");
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  return {1000.0 * ms / iters, true};
}

uint32_t algo_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  uint32_t value = 0;
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &value, sizeof(value), &written) !=
      CUBLAS_STATUS_SUCCESS)
    return 0;
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  // ringlm's context stream: stream_gemm launches there, and so does everything timed here.
  cudaStream_t stream = ringlm::cuda::Context::get().stream();
  const bool own_gemm = ringlm::cuda::stream_gemm_device_supported();
  if (own_gemm) {
    ringlm::cuda::set_stream_gemm(true);
    ringlm::cuda::set_stream_gemm_min_rows(1);
  }
  cublasHandle_t blas;
  check_cublas(cublasCreate(&blas), "cublasCreate");
  check_cublas(cublasSetStream(blas, stream), "cublasSetStream");
  check_cublas(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  void* workspace = nullptr;
  check_cuda(cudaMalloc(&workspace, kWorkspace), "workspace");
  check_cublas(cublasSetWorkspace(blas, workspace, kWorkspace), "cublasSetWorkspace");
  cublasLtHandle_t lt;
  check_cublas(cublasLtCreate(&lt), "cublasLtCreate");
  int device = 0;
  check_cuda(cudaGetDevice(&device), "device");
  int l2 = 0;
  check_cuda(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "L2 size");

  std::fprintf(opt.json ? stderr : stdout,
               "%-8s %5s %7s | %9s %7s | %9s %7s %6s | %8s %7s %6s | best Lt algo\n", "shape", "M",
               "algos", "gemmEx us", "TB/s", "best us", "TB/s", "gain", "own us", "TB/s", "own/Ex");
  std::string ranks;  // the shapes where an Lt candidate beats cublasGemmEx by >= 3 %
  for (const Shape& s : opt.shapes) {
    const size_t weight_bytes = static_cast<size_t>(s.n * s.k) * 2;
    const int copies =
        static_cast<int>(std::max<size_t>(2, (4 * static_cast<size_t>(l2)) / weight_bytes + 1));
    Buffers b;
    for (int c = 0; c < copies; ++c) {
      void* w = nullptr;
      check_cuda(cudaMalloc(&w, weight_bytes), "weights");
      check_cuda(cudaMemset(w, 0x3c, weight_bytes), "weights");  // bf16 0x3c3c = 0.0115
      b.weights.push_back(w);
    }
    const int64_t max_m = *std::max_element(opt.ms.begin(), opt.ms.end());
    check_cuda(cudaMalloc(&b.x, static_cast<size_t>(max_m * s.k) * 2), "x");
    check_cuda(cudaMemset(b.x, 0x3c, static_cast<size_t>(max_m * s.k) * 2), "x");
    check_cuda(cudaMalloc(&b.y, static_cast<size_t>(max_m * s.n) * 4), "y");
    for (int64_t M : opt.ms) {
      const int n = static_cast<int>(s.n), m = static_cast<int>(M), k = static_cast<int>(s.k);
      const float alpha = 1.0f, beta = 0.0f;
      // Row-major y[M, N] = x[M, K] · w[N, K]ᵀ as column-major yᵀ = op_T(w) · xᵀ (matmul.cu).
      const Timing gemm_ex = time_launches(copies, opt.iters, stream, [&](int c) {
        return cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, b.weights[c],
                            CUDA_R_16BF, k, b.x, CUDA_R_16BF, k, &beta, b.y, CUDA_R_32F, n,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
      });
      Timing own;
      if (own_gemm && M <= ringlm::cuda::kStreamGemmMaxRows) {
        own = time_launches(copies, opt.iters, stream, [&](int c) {
          ringlm::cuda::stream_gemm({b.x, s.k, b.weights[c], ringlm::DType::BF16, M, s.n, s.k,
                                     static_cast<float*>(b.y), s.n, false});
          return cudaPeekAtLastError() == cudaSuccess;
        });
      }
      cublasLtMatmulDesc_t op;
      check_cublas(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
      const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      check_cublas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
                   "transa");
      check_cublas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)),
                   "transb");
      cublasLtMatrixLayout_t la, lb, lc;
      check_cublas(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.k, s.n, s.k), "layout a");
      check_cublas(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.k, M, s.k), "layout b");
      check_cublas(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, s.n, M, s.n), "layout c");
      cublasLtMatmulPreference_t pref;
      check_cublas(cublasLtMatmulPreferenceCreate(&pref), "preference");
      const size_t ws = kWorkspace;
      check_cublas(cublasLtMatmulPreferenceSetAttribute(
                       pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
                   "workspace preference");
      std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(opt.algos));
      int found = 0;
      check_cublas(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, opt.algos,
                                                  results.data(), &found),
                   "heuristic");
      Timing best;
      int best_index = -1;
      for (int i = 0; i < found; ++i) {
        if (results[static_cast<size_t>(i)].state != CUBLAS_STATUS_SUCCESS) continue;
        const cublasLtMatmulAlgo_t& algo = results[static_cast<size_t>(i)].algo;
        const Timing t = time_launches(copies, opt.iters, stream, [&](int c) {
          return cublasLtMatmul(lt, op, &alpha, b.weights[c], la, b.x, lb, &beta, b.y, lc, b.y, lc,
                                &algo, workspace, kWorkspace, stream) == CUBLAS_STATUS_SUCCESS;
        });
        if (t.ok && (!best.ok || t.us < best.us)) {
          best = t;
          best_index = i;
        }
      }
      const double bytes = static_cast<double>(weight_bytes) + static_cast<double>(M * s.k) * 2 +
                           static_cast<double>(M * s.n) * 4;
      const auto tbps = [&](const Timing& t) { return t.ok ? bytes / (t.us * 1e-6) / 1e12 : 0.0; };
      uint32_t tile = 0, stages = 0, split_k = 0, reduction = 0, id = 0;
      if (best_index >= 0) {
        const cublasLtMatmulAlgo_t& algo = results[static_cast<size_t>(best_index)].algo;
        id = algo_config(algo, CUBLASLT_ALGO_CONFIG_ID);
        tile = algo_config(algo, CUBLASLT_ALGO_CONFIG_TILE_ID);
        stages = algo_config(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID);
        split_k = algo_config(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
        reduction = algo_config(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
      }
      const double gain = gemm_ex.ok && best.ok ? gemm_ex.us / best.us : 0.0;
      const double own_gain = gemm_ex.ok && own.ok ? gemm_ex.us / own.us : 0.0;
      if (gain >= 1.03) {  // worth a rank-table entry (backends/cuda/gemm_lt.h)
        if (!ranks.empty()) ranks += ",";
        ranks += std::to_string(s.n) + "x" + std::to_string(s.k) + "@" + std::to_string(M) + "=" +
                 std::to_string(best_index);
      }
      // The table on stdout, or with --json one JSON object per line there and the table on
      // stderr.
      FILE* table = opt.json ? stderr : stdout;
      if (opt.json) {
        std::printf(
            "{\"shape\": \"%s\", \"n\": %lld, \"k\": %lld, \"m\": %lld, \"algos\": %d, "
            "\"gemm_ex_us\": %.2f, \"gemm_ex_tbps\": %.3f, \"best_us\": %.2f, \"best_tbps\": "
            "%.3f, \"best_rank\": %d, \"algo_id\": %u, \"tile\": %u, \"stages\": %u, "
            "\"split_k\": %u, \"reduction\": %u, \"own_us\": %.2f, \"own_tbps\": %.3f}\n",
            s.name.c_str(), static_cast<long long>(s.n), static_cast<long long>(s.k),
            static_cast<long long>(M), found, gemm_ex.us, tbps(gemm_ex), best.us, tbps(best),
            best_index, id, tile, stages, split_k, reduction, own.us, tbps(own));
      }
      std::fprintf(table,
                   "%-8s %5lld %7d | %9.2f %7.3f | %9.2f %7.3f %5.3fx | %8.2f %7.3f %5.3fx | rank "
                   "%d id %u tile %u stages %u split-k %u reduction %u\n",
                   s.name.c_str(), static_cast<long long>(M), found, gemm_ex.us, tbps(gemm_ex),
                   best.us, tbps(best), gain, own.us, tbps(own), own_gain, best_index, id, tile,
                   stages, split_k, reduction);
      std::fflush(stdout);
      (void)cublasLtMatmulPreferenceDestroy(pref);
      (void)cublasLtMatrixLayoutDestroy(la);
      (void)cublasLtMatrixLayoutDestroy(lb);
      (void)cublasLtMatrixLayoutDestroy(lc);
      (void)cublasLtMatmulDescDestroy(op);
    }
    for (void* w : b.weights) (void)cudaFree(w);
    (void)cudaFree(b.x);
    (void)cudaFree(b.y);
  }
  std::fprintf(opt.json ? stderr : stdout, "RINGLM_CUDA_LT_RANKS=%s\n", ranks.c_str());
  (void)cublasLtDestroy(lt);
  (void)cublasDestroy(blas);
  (void)cudaFree(workspace);
  return 0;
}
