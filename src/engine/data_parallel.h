// Data parallelism over the GPUs of one machine (or N CPU replicas): one InferenceService in front of several
// engines, each a whole model on its own device with its own scheduler and KV/vision caches; they share one
// preprocessing pool (engine_service.cc).
//
// Routing, per request:
//   1. image affinity: a request whose first image (hash of its bytes) was recently sent to a working engine
//      goes there too, so questions about one image meet that engine's vision and prefix caches;
//   2. otherwise the working engine with the least queued work: the estimated tokens (text, image tiles x tokens
//      per tile, max_tokens) of its unfinished requests, ties to the lower index.
// A full queue sends the request to the next engine; all full gives "queue full" as one engine would.
// An engine whose device failed (its requests end with ErrorKind::EngineFailed, or its submit() says so) is
// taken out of rotation and the others go on. Its in-flight requests run again on another engine
// (Options::engine_failure_retries times, once by default): here, so that every door (run, serve, bench,
// Python, Ray) gets the same retry. A request that had already streamed deltas gets a `restart` event first
// (fovea/result.h). A request given no seed is given one here, so that its retry samples as the first attempt
// did. Ids are the dispatcher's own and survive a retry, so cancel() reaches the right engine.
#pragma once
#include <cstdint>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/hash.h"
#include "fovea/engine.h"

namespace fovea {

// The routing estimate of a request's work in tokens: text (~4 bytes per token), every image at the tiling's
// upper bound (max_tiles + thumbnail, 13 by default: the real count is known only after decoding, on the
// engine's pool) x 256 tokens per tile, plus max_tokens.
int64_t estimated_work(const Request& request);

// "" -> {} (the default device), "all" -> 0..device_count-1, "0,1,3" -> {0, 1, 3}. Throws fovea::Error on a
// malformed list, a repeated index or an index >= device_count.
std::vector<int> parse_gpu_list(const std::string& gpus, int device_count);

class DataParallelService final : public InferenceService {
 public:
  struct Options {
    size_t affinity_images = 4096;  // images remembered for routing (the most recent ones)
    std::function<int64_t(const Request&)> work = estimated_work;
    int engine_failure_retries = 1;  // per request, each time on an engine it has not been on
  };
  // labels[i] names engine i in stats, /metrics and errors ("cuda:0", "cpu#1").
  DataParallelService(std::vector<std::unique_ptr<InferenceService>> engines, std::vector<std::string> labels,
                      Options options);
  DataParallelService(std::vector<std::unique_ptr<InferenceService>> engines, std::vector<std::string> labels)
      : DataParallelService(std::move(engines), std::move(labels), Options()) {}
  ~DataParallelService() override;

  int64_t submit(Request request, RequestCallback callback) override;
  void cancel(int64_t request_id) override;
  void drain() override;
  EngineStats stats() const override;  // the sums, plus each engine's own in `engines`
  std::string model_name() const override;
  std::string token_text(int32_t token) const override;

  size_t size() const { return slots_.size(); }

 private:
  struct Slot {
    std::unique_ptr<InferenceService> service;
    std::string label;
    int64_t queued_work = 0;  // estimated tokens of its unfinished requests
    int in_flight = 0;
    bool failed = false;
    std::string failure;
  };
  struct InFlight {
    std::shared_ptr<const Request> request;  // kept for a retry on another engine
    std::shared_ptr<RequestCallback> callback;  // shared, so that passing an event copies no std::function
    int64_t work = 0;
    bool has_image = false;
    Hash128 image;              // of the first image, for affinity
    size_t engine = 0;
    int64_t engine_id = -1;     // -1 until the engine's submit() returned
    int attempt = 0;            // placements so far; events of an earlier one are ignored
    int retries_left = 0;
    std::vector<bool> tried;    // engines this request has been sent to
    bool delivered = false;     // this attempt has passed deltas to the caller
    bool cancel_requested = false;
  };

  // Under mutex_: the engine for the next attempt, skipping `excluded`; -1 when none is working.
  int choose_engine(const Hash128* image, const std::vector<bool>& excluded) const;
  void remember_image(const Hash128& image, size_t engine);
  void mark_failed(size_t engine, const std::string& why);
  // Sends request `id` to a working engine it has not tried. "" when one took it; else why none did, with
  // *queue_full telling a full queue (QueueFullError) from no working engine (EngineFailedError). Any other
  // refusal (the request's own fault, a draining engine) is thrown.
  std::string place(int64_t id, bool* queue_full);
  void unplace(size_t engine, int64_t work);  // undoes place()'s bookkeeping for an engine that refused
  void on_event(int64_t id, int attempt, const RequestEvent& event);
  // The request's final event, on an engine thread: true when it is to run again (its engine failed).
  bool on_final(int64_t id, RequestEvent& event, std::shared_ptr<RequestCallback>* callback, bool* restart);
  void retry(int64_t id, RequestEvent failure, std::shared_ptr<RequestCallback> callback, bool restart);

  std::vector<Slot> slots_;
  Options options_;
  mutable std::mutex mutex_;
  std::unordered_map<int64_t, InFlight> in_flight_;
  std::condition_variable idle_;  // in_flight_ became empty or retrying_ 0 (drain, the destructor wait)
  bool accepting_ = true;         // false once drain() or the destructor began: no new requests
  bool closing_ = false;          // the destructor began: no retries
  int retrying_ = 0;              // retries between their engine's final event and their new placement
  struct Affinity {
    size_t engine = 0;   // where the image was last sent
    uint64_t stamp = 0;  // when: matches the newest of its entries in affinity_order_
  };
  std::unordered_map<Hash128, Affinity, Hash128Hasher> affinity_;
  std::deque<std::pair<Hash128, uint64_t>> affinity_order_;  // (image, stamp), oldest first, for eviction
  uint64_t affinity_clock_ = 0;
  int64_t next_id_ = 1;
};

}  // namespace fovea
