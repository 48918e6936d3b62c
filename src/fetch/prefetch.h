// Downloads ahead of a consumer that takes items in order (`fovea run` building requests one task after the
// other), so fetching task i+1..i+window overlaps the inference of earlier tasks. At most `parallel`
// downloads run at once and at most `window` items past the one being taken are fetched or held, which bounds
// memory by window x max_bytes.
#pragma once
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fetch/fetch.h"

namespace fovea {

struct Prefetched {
  std::string bytes;
  std::string error;  // non-empty: the fetch failed (a one-line message naming the URL)
};

class Prefetcher {
 public:
  // urls[i] empty: item i needs no download (take(i) returns at once with nothing).
  Prefetcher(std::vector<std::string> urls, const FetchOptions& options, int window, int parallel);
  ~Prefetcher();  // cancels downloads in flight and joins the workers
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Item i's bytes, waiting for its download. Items are taken in increasing order, each once.
  Prefetched take(size_t i);

 private:
  void work();

  std::vector<std::string> urls_;
  FetchOptions options_;
  size_t window_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
  size_t next_ = 0;      // the next item a worker starts
  size_t consumer_ = 0;  // the item the consumer takes next
  std::map<size_t, Prefetched> ready_;
  std::vector<std::thread> workers_;
};

}  // namespace fovea
