#include "backends/cuda/step_graph.h"

#include "backends/cuda/runtime.h"
#include "core/log.h"

namespace ringlm::cuda {

StepGraphs::~StepGraphs() {
  for (auto& [key, entry] : graphs_) {
    if (entry.exec != nullptr) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(entry.exec));
  }
}

void StepGraphs::run(std::vector<int64_t> key, const std::function<void()>& enqueue) {
  Context& ctx = Context::get();
  key.push_back(static_cast<int64_t>(ctx.scratch_generation()));
  Entry& entry = graphs_[key];
  if (entry.exec != nullptr) {
    RINGLM_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(entry.exec), ctx.stream()));
    ++replays_;
    return;
  }
  if (entry.eager_only || entry.runs++ == 0) {
    enqueue();  // the first run sizes every scratch buffer the shape needs
    return;
  }
  RINGLM_CUDA_CHECK(cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeThreadLocal));
  bool captured = true;
  try {
    enqueue();
  } catch (const std::exception& e) {
    captured = false;
    RINGLM_LOG(Warn, "CUDA graph capture of a decode step failed (", e.what(),
               "); this shape stays eager");
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(ctx.stream(), &graph);
  cudaGraphExec_t exec = nullptr;
  if (captured && end == cudaSuccess && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
    entry.exec = exec;
  } else {
    (void)cudaGetLastError();
    entry.eager_only = true;
  }
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  // If the capture changed scratch buffers, the key no longer describes it: drop it.
  if (entry.exec != nullptr && static_cast<int64_t>(ctx.scratch_generation()) != key.back()) {
    (void)cudaGraphExecDestroy(exec);
    entry.exec = nullptr;
    entry.eager_only = true;
  }
  if (entry.exec != nullptr) {
    RINGLM_CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream()));
  } else {
    enqueue();  // nothing of the failed capture ran
  }
}

}  // namespace ringlm::cuda
