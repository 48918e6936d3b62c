#include "fetch/prefetch.h"

#include <algorithm>

namespace fovea {

Prefetcher::Prefetcher(std::vector<std::string> urls, const FetchOptions& options, int window, int parallel)
    : urls_(std::move(urls)), options_(options), window_(size_t(std::max(1, window))) {
  options_.cancel = &stop_;
  size_t remote = 0;
  for (const auto& u : urls_) remote += !u.empty();
  const size_t threads = std::min(remote, size_t(std::max(1, parallel)));
  for (size_t t = 0; t < threads; ++t) workers_.emplace_back([this] { work(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void Prefetcher::work() {
  std::unique_lock lock(mutex_);
  while (true) {
    // Skip items that need no download; start the next one inside the window.
    while (next_ < urls_.size() && urls_[next_].empty()) ++next_;
    cv_.wait(lock, [&] { return stop_ || next_ >= urls_.size() || next_ < consumer_ + window_; });
    if (stop_ || next_ >= urls_.size()) return;
    if (urls_[next_].empty()) continue;
    const size_t i = next_++;
    const std::string url = urls_[i];
    lock.unlock();
    Prefetched item;
    try {
      item.bytes = fetch_bytes(url, options_);
    } catch (const std::exception& e) {
      item.error = e.what();
    }
    lock.lock();
    ready_[i] = std::move(item);
    cv_.notify_all();
  }
}

Prefetched Prefetcher::take(size_t i) {
  if (i >= urls_.size() || urls_[i].empty()) return {};
  std::unique_lock lock(mutex_);
  consumer_ = std::max(consumer_, i);
  cv_.notify_all();  // the window moved
  cv_.wait(lock, [&] { return ready_.count(i) > 0; });
  Prefetched item = std::move(ready_[i]);
  ready_.erase(i);
  return item;
}

}  // namespace fovea
