#include "core/thread_pool.h"

#include <algorithm>
#include <memory>

namespace ringlm {

namespace {
thread_local bool tls_inside_pool = false;
std::unique_ptr<ThreadPool>& global_slot() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
std::mutex global_mutex;
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  int n = num_threads > 0 ? num_threads : static_cast<int>(std::thread::hardware_concurrency());
  n = std::max(n, 1);
  for (int i = 1; i < n; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  tls_inside_pool = true;
  for (;;) {
    std::unique_lock<std::mutex> lock(mutex_);
    work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const auto* job = job_;
    const auto chunk = static_cast<size_t>(index) < chunks_.size()
                           ? chunks_[static_cast<size_t>(index)]
                           : std::pair<int64_t, int64_t>{0, 0};
    lock.unlock();
    if (chunk.first < chunk.second) (*job)(chunk.first, chunk.second);
    lock.lock();
    if (--pending_ == 0) work_done_.notify_one();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t units = (n + grain - 1) / grain;
  const int64_t parts = std::min<int64_t>(units, num_threads());
  if (parts <= 1 || tls_inside_pool) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> submit(submit_mutex_);
  std::vector<std::pair<int64_t, int64_t>> chunks(static_cast<size_t>(num_threads()), {0, 0});
  for (int64_t p = 0; p < parts; ++p) {
    const int64_t begin = std::min(n, (units * p / parts) * grain);
    const int64_t end = std::min(n, (units * (p + 1) / parts) * grain);
    chunks[static_cast<size_t>(p)] = {begin, end};
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    chunks_ = std::move(chunks);
    job_ = &fn;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  work_ready_.notify_all();
  tls_inside_pool = true;
  if (chunks_[0].first < chunks_[0].second) fn(chunks_[0].first, chunks_[0].second);
  tls_inside_pool = false;
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
}

ThreadPool& ThreadPool::global() {
  std::lock_guard<std::mutex> lock(global_mutex);
  auto& slot = global_slot();
  if (!slot) slot = std::make_unique<ThreadPool>(0);
  return *slot;
}

void ThreadPool::set_global_threads(int num_threads) {
  std::lock_guard<std::mutex> lock(global_mutex);
  global_slot() = std::make_unique<ThreadPool>(num_threads);
}

}  // namespace ringlm
