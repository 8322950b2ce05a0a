// A fixed pool of worker threads for data-parallel loops. parallel_for splits [0, n) into at most
// one contiguous chunk per thread (the caller's thread takes a share too) and waits for all.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ringlm {

class ThreadPool {
 public:
  // num_threads counts the calling thread; 0 means one per hardware thread.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over chunks of [0, n), each chunk a multiple of `grain` (but the last).
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // The process-wide pool used by the CPU backend.
  static ThreadPool& global();
  static void set_global_threads(int num_threads);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  std::vector<std::pair<int64_t, int64_t>> chunks_;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
  std::mutex submit_mutex_;  // one parallel_for at a time; nested calls run inline
};

}  // namespace ringlm
