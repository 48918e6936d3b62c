// A fixed pool of worker threads. parallel_for splits [0, n) into chunks; submit queues one task.
#pragma once
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

namespace fovea {

class ThreadPool {
 public:
  explicit ThreadPool(int threads = 0);  // 0: hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()); }
  std::future<void> submit(std::function<void()> task);
  // Runs body(begin, end) over chunks of [0, n) on the pool and the calling thread; rethrows the first error.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body, int64_t min_chunk = 1);

  static ThreadPool& global();  // shared pool sized to the machine, created on first use

 private:
  void worker();
  std::vector<std::thread> workers_;
  std::queue<std::packaged_task<void()>> tasks_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

}  // namespace fovea
