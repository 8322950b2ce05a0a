// StepGraphs: decode steps replayed as CUDA graphs. A decode step's kernels depend only on its
// shape — rows, each group's block-table width (StepPlan rounds it to a power of two) — and on
// buffers that stay put between steps (weights, KV pools, the arena, the uploaded tables, the
// backend's scratch). The first step of a shape runs eagerly (it sizes the scratch), the second
// is captured into a graph, later ones replay it: one launch instead of hundreds. Plain C++.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

namespace ringlm::cuda {

class StepGraphs {
 public:
  StepGraphs() = default;
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  // Runs `enqueue` (which queues the step's work on the backend stream) for a step of shape
  // `key`, or replays the graph captured for that shape. `key` must name everything the queued
  // work depends on besides the contents of the fixed buffers; the backend's scratch generation
  // is added here. A capture that fails (some op synchronizes) leaves that shape eager.
  void run(std::vector<int64_t> key, const std::function<void()>& enqueue);
  int64_t replays() const { return replays_; }
  size_t graphs() const { return graphs_.size(); }

 private:
  struct Entry {
    int runs = 0;
    void* exec = nullptr;  // cudaGraphExec_t
    bool eager_only = false;
  };
  std::map<std::vector<int64_t>, Entry> graphs_;
  int64_t replays_ = 0;
};

}  // namespace ringlm::cuda
