#include "engine/data_parallel.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "engine/stats_fields.h"

namespace fovea {

int64_t estimated_work(const Request& request) {
  constexpr int64_t kTokensPerTile = 256;  // InternVL2's 448-pixel tile after pixel shuffle
  constexpr int64_t kDefaultTiles = 13;    // max_dynamic_patch 12 + the thumbnail
  const int64_t tiles = request.max_tiles > 0 ? request.max_tiles + 1 : kDefaultTiles;
  const int64_t text = int64_t(request.prompt.size() + request.system.size()) / 4 + 1;
  return text + int64_t(request.images.size()) * tiles * kTokensPerTile + std::max(1, request.params.max_tokens);
}

std::vector<int> parse_gpu_list(const std::string& gpus, int device_count) {
  std::vector<int> out;
  if (gpus.empty()) return out;
  if (gpus == "all") {
    FOVEA_CHECK(device_count > 0, "--gpus all: no CUDA GPU is visible to this process");
    for (int i = 0; i < device_count; ++i) out.push_back(i);
    return out;
  }
  std::set<int> seen;
  size_t start = 0;
  while (start <= gpus.size()) {
    const size_t comma = std::min(gpus.find(',', start), gpus.size());
    const std::string item = gpus.substr(start, comma - start);
    FOVEA_CHECK(!item.empty() && item.size() < 4 && item.find_first_not_of("0123456789") == std::string::npos,
                "--gpus '", gpus, "': expected all or GPU indices like 0,1,3");
    const int index = std::stoi(item);
    FOVEA_CHECK(index < device_count, "--gpus '", gpus, "': GPU ", index, " does not exist (", device_count,
                " visible)");
    FOVEA_CHECK(seen.insert(index).second, "--gpus '", gpus, "': GPU ", index, " appears twice");
    out.push_back(index);
    start = comma + 1;
  }
  return out;
}

DataParallelService::DataParallelService(std::vector<std::unique_ptr<InferenceService>> engines,
                                         std::vector<std::string> labels, Options options)
    : options_(std::move(options)) {
  FOVEA_CHECK(!engines.empty() && engines.size() == labels.size(), "data parallel: ", engines.size(), " engines, ",
              labels.size(), " labels");
  if (!options_.work) options_.work = estimated_work;
  for (size_t i = 0; i < engines.size(); ++i) {
    FOVEA_CHECK(engines[i] != nullptr, "data parallel: engine ", i, " is missing");
    Slot slot;
    slot.service = std::move(engines[i]);
    slot.label = std::move(labels[i]);
    slots_.push_back(std::move(slot));
  }
}

// Engines stop (and cancel what they hold) before the dispatcher's maps go: their last callbacks touch them.
DataParallelService::~DataParallelService() {
  {
    std::unique_lock lock(mutex_);
    accepting_ = false;
    closing_ = true;  // a failure now is not retried: the engines it would go to are being destroyed
    idle_.wait(lock, [this] { return retrying_ == 0; });  // one under way may be submitting to any engine
  }
  for (Slot& slot : slots_) slot.service.reset();
}

int DataParallelService::choose_engine(const Hash128* image, const std::vector<bool>& excluded) const {
  if (image) {
    const auto it = affinity_.find(*image);
    if (it != affinity_.end() && !slots_[it->second.engine].failed && !excluded[it->second.engine])
      return int(it->second.engine);
  }
  int best = -1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].failed || excluded[i]) continue;
    if (best < 0 || slots_[i].queued_work < slots_[size_t(best)].queued_work) best = int(i);
  }
  return best;
}

void DataParallelService::remember_image(const Hash128& image, size_t engine) {
  const uint64_t stamp = ++affinity_clock_;
  affinity_[image] = Affinity{engine, stamp};
  affinity_order_.emplace_back(image, stamp);
  while (affinity_.size() > options_.affinity_images || affinity_order_.size() > 2 * options_.affinity_images + 16) {
    const auto [oldest, when] = affinity_order_.front();
    affinity_order_.pop_front();
    const auto it = affinity_.find(oldest);
    if (it != affinity_.end() && it->second.stamp == when) affinity_.erase(it);  // else: refreshed since
  }
}

void DataParallelService::mark_failed(size_t engine, const std::string& why) {
  Slot& slot = slots_[engine];
  if (slot.failed) return;
  slot.failed = true;
  slot.failure = why;
  std::fprintf(stderr, "fovea: engine %s taken out of rotation: %s\n", slot.label.c_str(), why.c_str());
}

int64_t DataParallelService::submit(Request request, RequestCallback callback) {
  // Seeded here, not by the engine: a retry then samples what the failed attempt would have.
  if (!request.params.seed) request.params.seed = random_seed();
  InFlight entry;
  entry.has_image = !request.images.empty();
  if (entry.has_image) entry.image = murmur3_128(request.images[0].bytes);
  entry.work = options_.work(request);
  entry.request = std::make_shared<const Request>(std::move(request));
  entry.callback = std::make_shared<RequestCallback>(std::move(callback));
  entry.retries_left = options_.engine_failure_retries;
  entry.tried.assign(slots_.size(), false);
  int64_t id;
  {
    std::lock_guard lock(mutex_);
    if (!accepting_) throw NotAcceptingError("engine is not accepting requests (draining or stopped)");
    id = next_id_++;
    in_flight_.emplace(id, std::move(entry));
  }
  std::string refusal;
  bool queue_full = false;
  try {
    refusal = place(id, &queue_full);
  } catch (...) {
    std::lock_guard lock(mutex_);
    in_flight_.erase(id);
    if (in_flight_.empty()) idle_.notify_all();
    throw;
  }
  if (refusal.empty()) return id;
  {
    std::lock_guard lock(mutex_);
    in_flight_.erase(id);
    if (in_flight_.empty()) idle_.notify_all();
  }
  if (queue_full) throw QueueFullError(refusal);
  throw EngineFailedError(refusal);
}

std::string DataParallelService::place(int64_t id, bool* full) {
  std::string queue_full;  // the last "queue full" refusal, reported when no engine takes the request
  for (;;) {
    size_t engine;
    int attempt;
    int64_t work;
    std::shared_ptr<const Request> request;
    {
      std::lock_guard lock(mutex_);
      InFlight& f = in_flight_.at(id);
      const int chosen = choose_engine(f.has_image ? &f.image : nullptr, f.tried);
      if (chosen < 0) {
        *full = !queue_full.empty();
        if (*full) return queue_full;
        std::string last;
        for (const Slot& s : slots_) last = s.failure.empty() ? last : s.label + ": " + s.failure;
        return str(kEngineFailedPrefix, ": no working engine left (", last, ")");
      }
      engine = size_t(chosen);
      attempt = ++f.attempt;
      f.engine = engine;
      f.engine_id = -1;
      f.delivered = false;
      f.tried[engine] = true;
      work = f.work;
      request = f.request;
      slots_[engine].queued_work += work;
      slots_[engine].in_flight++;
    }
    // The engine may finish the request (on its thread) before submit() returns here: on_event copes, and a
    // retry it starts makes this attempt stale (the checks on `attempt` below).
    RequestCallback wrapped = [this, id, attempt](const RequestEvent& event) { on_event(id, attempt, event); };
    int64_t engine_id = -1;
    try {
      engine_id = slots_[engine].service->submit(*request, std::move(wrapped));
    } catch (const QueueFullError& e) {
      unplace(engine, work);
      queue_full = e.what();
      continue;
    } catch (const EngineFailedError& e) {
      unplace(engine, work);
      std::lock_guard lock(mutex_);
      mark_failed(engine, e.what());
      continue;
    } catch (...) {
      unplace(engine, work);
      throw;  // the request's own fault, or a draining engine: every engine would say the same
    }
    bool cancel_now = false;
    {
      std::lock_guard lock(mutex_);
      const auto it = in_flight_.find(id);
      if (it != in_flight_.end() && it->second.attempt == attempt) {
        if (it->second.has_image) remember_image(it->second.image, engine);
        it->second.engine_id = engine_id;
        cancel_now = it->second.cancel_requested;
      }
    }
    if (cancel_now) slots_[engine].service->cancel(engine_id);
    return "";
  }
}

void DataParallelService::unplace(size_t engine, int64_t work) {
  std::lock_guard lock(mutex_);
  slots_[engine].queued_work -= work;
  slots_[engine].in_flight--;
}

void DataParallelService::on_event(int64_t id, int attempt, const RequestEvent& event) {
  std::shared_ptr<RequestCallback> callback;
  if (!event.finished) {
    {
      std::lock_guard lock(mutex_);
      const auto it = in_flight_.find(id);
      if (it == in_flight_.end() || it->second.attempt != attempt) return;
      it->second.delivered = true;
      callback = it->second.callback;
    }
    if (*callback) (*callback)(event);
    return;
  }
  RequestEvent final_event = event;
  bool restart = false;
  bool again = false;
  {
    std::lock_guard lock(mutex_);
    const auto it = in_flight_.find(id);
    if (it == in_flight_.end() || it->second.attempt != attempt) return;
    again = on_final(id, final_event, &callback, &restart);
  }
  if (again) return retry(id, std::move(final_event), std::move(callback), restart);
  if (*callback) (*callback)(final_event);
}

// Under mutex_. Runs on an engine thread with the request's final event, before the caller's callback sees it:
// the caller may read stats() as soon as it has its result.
bool DataParallelService::on_final(int64_t id, RequestEvent& event, std::shared_ptr<RequestCallback>* callback,
                                   bool* restart) {
  InFlight& f = in_flight_.at(id);
  Slot& slot = slots_[f.engine];
  slot.queued_work -= f.work;
  slot.in_flight--;
  if (event.error_kind == ErrorKind::EngineFailed) {
    mark_failed(f.engine, event.error);
    event.error += " (engine " + slot.label + ")";
    if (f.retries_left > 0 && !closing_ && !f.cancel_requested) {
      f.retries_left--;
      retrying_++;
      *restart = f.delivered;
      *callback = f.callback;
      return true;
    }
  }
  *callback = std::move(f.callback);
  in_flight_.erase(id);
  if (in_flight_.empty()) idle_.notify_all();
  return false;
}

// The failed attempt's events end with a restart (when it had delivered any); the request goes to another
// engine. None left, or every other one full: the original failure is its final event, with why.
void DataParallelService::retry(int64_t id, RequestEvent failure, std::shared_ptr<RequestCallback> callback,
                                bool restart) {
  if (restart && *callback) {
    RequestEvent void_so_far;
    void_so_far.restart = true;
    (*callback)(void_so_far);
  }
  std::string refusal;
  bool queue_full = false;
  try {
    refusal = place(id, &queue_full);
  } catch (const std::exception& e) {
    refusal = e.what();
  }
  {
    std::lock_guard lock(mutex_);
    if (!refusal.empty()) in_flight_.erase(id);
    retrying_--;
    idle_.notify_all();
  }
  if (refusal.empty()) return;
  failure.error += "; not retried: " + refusal;
  if (*callback) (*callback)(failure);
}

void DataParallelService::cancel(int64_t request_id) {
  size_t engine;
  int64_t engine_id;
  {
    std::lock_guard lock(mutex_);
    const auto it = in_flight_.find(request_id);
    if (it == in_flight_.end()) return;  // unknown or finished
    it->second.cancel_requested = true;  // no retry after this
    if (it->second.engine_id < 0) return;  // place() passes it on once the engine's id is known
    engine = it->second.engine;
    engine_id = it->second.engine_id;
  }
  slots_[engine].service->cancel(engine_id);
}

// Requests first, engines after: an engine drained while another still runs could not take that one's retries.
void DataParallelService::drain() {
  {
    std::unique_lock lock(mutex_);
    accepting_ = false;
    idle_.wait(lock, [this] { return in_flight_.empty(); });
  }
  for (Slot& slot : slots_) slot.service->drain();
}

EngineStats DataParallelService::stats() const {
  EngineStats total;
  total.failed = true;
  for (size_t i = 0; i < slots_.size(); ++i) {
    EngineStats s = slots_[i].service->stats();
    s.engines.clear();
    s.engine = slots_[i].label;
    {
      std::lock_guard lock(mutex_);
      if (slots_[i].failed) {
        s.failed = true;
        if (s.failure.empty()) s.failure = slots_[i].failure;
      }
    }
    add_stats(total, s);
    total.failed = total.failed && s.failed;
    total.engines.push_back(std::move(s));
  }
  if (total.failed) total.failure = "every engine has failed";
  return total;
}

std::string DataParallelService::model_name() const { return slots_[0].service->model_name(); }

std::string DataParallelService::token_text(int32_t token) const { return slots_[0].service->token_text(token); }

}  // namespace fovea
