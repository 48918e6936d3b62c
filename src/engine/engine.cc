// Engine: submission from any thread, the preprocessing pool, the scheduler thread, event delivery, stats.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>

#include "core/error.h"
#include "engine/engine_impl.h"
#include "fovea/engine.h"

namespace fovea {

Engine::Engine(const EngineConfig& config, std::unique_ptr<ModelRunner> runner, std::shared_ptr<ThreadPool> prep_pool)
    : impl_(std::make_unique<Impl>()) {
  FOVEA_CHECK(runner != nullptr, "Engine needs a runner");
  impl_->config = config;
  impl_->pool = std::move(prep_pool);
  impl_->runner = std::move(runner);
  impl_->tokenizer = load_tokenizer(config.model_dir);
  impl_->start();
}

Engine::~Engine() { impl_->stop(); }

const std::string& Engine::model_name() const { return impl_->model_name; }

void Engine::Impl::start() {
  const ModelDesc& desc = runner->desc();
  if (model_name.empty()) {
    std::string dir = config.model_dir;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    model_name = dir.substr(dir.find_last_of('/') == std::string::npos ? 0 : dir.find_last_of('/') + 1);
  }
  prep_context.desc = &desc;
  prep_context.tokenizer = tokenizer.get();
  prep_context.max_token_bytes = longest_token_bytes(*tokenizer);
  if (config.max_image_pixels > 0) prep_context.limits.max_pixels = config.max_image_pixels;
  // Every request is prepared the same way, so a ViT batch never mixes byte tiles with float ones.
  prep_context.gpu_normalize = config.gpu_normalize && runner->accepts_u8_tiles();
  prep_context.recent = &recent_images;

  SchedulerConfig sc;
  sc.max_step_tokens = config.max_step_tokens;
  sc.max_batch_seqs = config.max_batch_seqs;
  sc.prefix_cache = config.prefix_cache;
  sc.vision_cache_tiles = config.vision_cache_tiles;
  scheduler = std::make_unique<Scheduler>(*runner, tokenizer.get(), sc,
                                          [this](int64_t id, const RequestEvent& e) { deliver(id, e); });
  if (!pool) pool = std::make_shared<ThreadPool>(config.preprocess_threads);
  // Enough prepared requests to fill the next steps, few enough that pixel tensors (up to ~31 MB for 13
  // tiles) do not pile up in memory when the GPU is the bottleneck. On a shared pool, this engine's share.
  const int threads = config.preprocess_threads > 0 ? std::min(config.preprocess_threads, pool->size()) : pool->size();
  prefetch_limit = std::max(16, 2 * threads + 4);
  stats.kv_blocks_total = scheduler->blocks().num_blocks();
  scheduler->set_before_run([this] { publish_stats(); });
  scheduler_thread = std::thread([this] { scheduler_loop(); });
}

void Engine::Impl::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
    accepting = false;
  }
  wake_scheduler.notify_all();
  if (scheduler_thread.joinable()) scheduler_thread.join();
  pool.reset();  // joins an own pool; a shared one runs nothing of ours now (finish_leftovers waited for it)
  scheduler.reset();  // releases cached embeddings while the runner is still alive
  runner.reset();
}

int64_t Engine::submit(Request request, RequestCallback callback) {
  Impl& impl = *impl_;
  int64_t id;
  {
    std::lock_guard<std::mutex> lock(impl.mutex);
    if (!impl.stats.failure.empty()) throw EngineFailedError(impl.stats.failure);
    if (!impl.accepting) throw NotAcceptingError("engine is not accepting requests (draining or stopped)");
    if (int(impl.callbacks.size()) >= impl.config.max_queue)
      throw QueueFullError(str("queue full: ", impl.callbacks.size(), " requests in flight (max_queue ",
                               impl.config.max_queue, ")"));
    id = impl.next_id++;
    impl.callbacks.emplace(id, std::make_shared<RequestCallback>(std::move(callback)));
    impl.to_prepare.push_back(Impl::Pending{id, std::move(request), Clock::now()});
    ++impl.stats.requests_submitted;
  }
  impl.wake_scheduler.notify_all();
  return id;
}

void Engine::cancel(int64_t request_id) {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->cancel_requests.push_back(request_id);
  }
  impl_->wake_scheduler.notify_all();
}

void Engine::drain() {
  std::unique_lock<std::mutex> lock(impl_->mutex);
  impl_->accepting = false;
  impl_->all_done.wait(lock, [this] { return impl_->callbacks.empty(); });
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->stats;
}

void Engine::Impl::scheduler_loop() {
  if (bind_scheduler_thread) {
    try {
      bind_scheduler_thread();
    } catch (const std::exception& e) {
      fail_engine(e.what());
    }
  }
  for (;;) {
    std::vector<PreparedRequest> arrived;
    std::vector<FailedPreparation> failed;
    std::vector<int64_t> cancels;
    {
      std::unique_lock<std::mutex> lock(mutex);
      wake_scheduler.wait(lock, [this] {
        return stopping || !prepared.empty() || !prepare_failed.empty() || !cancel_requests.empty() ||
               scheduler->has_work() || (!to_prepare.empty() && preparing < prefetch_limit);
      });
      if (stopping) break;
      arrived.swap(prepared);
      failed.swap(prepare_failed);
      cancels.swap(cancel_requests);
    }
    try {
      run_iteration(arrived, failed, cancels);
    } catch (const DeviceError& e) {
      fail_engine(e.what());
    } catch (const std::exception& e) {
      // Only a bug gets here (request errors are caught per request). Fail what is held rather than let the
      // exception end the thread, which would terminate the process.
      try {
        scheduler->fail_all(std::string("internal engine error: ") + e.what(), ErrorKind::Internal);
      } catch (...) {
        // The state is beyond repair; keep the thread (and the process) alive for what comes next.
      }
    }
    publish_stats();
  }
  finish_leftovers();
}

void Engine::Impl::run_iteration(std::vector<PreparedRequest>& arrived, std::vector<FailedPreparation>& failed,
                                 std::vector<int64_t>& cancels) {
  if (!device_failure.empty()) return fail_arrivals(arrived, failed);
  for (const FailedPreparation& f : failed) {
    // Cancelled while on the pool: its final event says so (it must get one either way).
    if (cancel_on_arrival.erase(f.id)) {
      emit_final(f.id, f.submitted, "cancelled", "");
    } else {
      emit_final(f.id, f.submitted, "error", f.error, f.kind);
    }
  }
  for (PreparedRequest& request : arrived) {
    if (cancel_on_arrival.erase(request.id)) {
      emit_final(request.id, request.submitted, "cancelled", "");
    } else {
      scheduler->add(std::move(request));
    }
  }
  for (const int64_t id : cancels) handle_cancel(id);
  {
    std::unique_lock<std::mutex> lock(mutex);
    dispatch_preparation(lock);
  }
  if (scheduler->has_work()) {
    if (fail_after_steps.load() > 0 && fail_after_steps.fetch_sub(1) == 1)
      throw DeviceError("injected device failure (test hook)");
    scheduler->step();
  }
}

void Engine::fail_after_steps(int steps) { impl_->fail_after_steps.store(std::max(0, steps)); }

// The device failed (engine/engine.h): everything held fails with one "engine failed: ..." error, submit()
// refuses from now on, and requests still on the preprocessing pool fail as they come back (fail_arrivals).
void Engine::Impl::fail_engine(const std::string& why) {
  device_failure = std::string(kEngineFailedPrefix) + ": " + why;
  std::fprintf(stderr, "fovea: %s\n", device_failure.c_str());
  std::deque<Pending> never_prepared;
  {
    std::lock_guard<std::mutex> lock(mutex);
    stats.failed = true;
    stats.failure = device_failure;
    accepting = false;
    never_prepared.swap(to_prepare);
  }
  try {
    scheduler->fail_all(device_failure, ErrorKind::EngineFailed);
  } catch (...) {
    // Nothing more can be done for those; the engine stays up to answer the rest.
  }
  for (const Pending& p : never_prepared) emit_final(p.id, p.submitted, "error", device_failure, ErrorKind::EngineFailed);
}

void Engine::Impl::fail_arrivals(std::vector<PreparedRequest>& arrived, std::vector<FailedPreparation>& failed) {
  for (const FailedPreparation& f : failed) {
    const bool cancelled = cancel_on_arrival.erase(f.id) > 0;
    emit_final(f.id, f.submitted, cancelled ? "cancelled" : "error", cancelled ? "" : device_failure,
               cancelled ? ErrorKind::None : ErrorKind::EngineFailed);
  }
  for (const PreparedRequest& r : arrived) {
    const bool cancelled = cancel_on_arrival.erase(r.id) > 0;
    emit_final(r.id, r.submitted, cancelled ? "cancelled" : "error", cancelled ? "" : device_failure,
               cancelled ? ErrorKind::None : ErrorKind::EngineFailed);
  }
}

// Hands requests to the pool while fewer than prefetch_limit are being prepared or wait for admission.
void Engine::Impl::dispatch_preparation(std::unique_lock<std::mutex>& lock) {
  // Requests waiting for a prefix another one is computing do not hold the window: the next questions about
  // other images keep coming, so steps stay full while an image's questions wait one step for its prefix
  // (bounded, as their tiles are held until admission).
  const int held = scheduler->waiting() - std::min(scheduler->waiting_for_prefix(), 4 * prefetch_limit);
  while (!to_prepare.empty() && preparing + int(prepared.size()) + held < prefetch_limit) {
    Pending pending = std::move(to_prepare.front());
    to_prepare.pop_front();
    ++preparing;
    pool->submit(
        [this, p = std::make_shared<Pending>(std::move(pending))]() mutable { prepare_on_pool(std::move(*p)); });
  }
}

void Engine::Impl::prepare_on_pool(Pending pending) {
  const auto t0 = Clock::now();
  PreparedRequest result;
  std::string error;
  ErrorKind kind = ErrorKind::None;
  try {
    result = prepare_request(pending.id, pending.request, prep_context);
    result.submitted = pending.submitted;
  } catch (const RequestError& e) {
    error = e.what();
    kind = e.kind();
  } catch (const Error& e) {
    error = e.what();
    kind = ErrorKind::InvalidRequest;  // preparation reads only the request: its checks are about its input
  } catch (const std::exception& e) {
    error = e.what();
    kind = ErrorKind::Internal;  // e.g. out of host memory
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  {
    std::lock_guard<std::mutex> lock(mutex);
    --preparing;
    stats.preprocess_ms += ms;
    if (error.empty()) {
      prepared.push_back(std::move(result));
    } else {
      prepare_failed.push_back(FailedPreparation{pending.id, error, kind, pending.submitted});
    }
    // Under the lock: once `preparing` reads 0 the engine may be destroyed while a shared pool lives on, so
    // this task must not touch the engine after it unlocks.
    wake_scheduler.notify_all();
  }
}

void Engine::Impl::handle_cancel(int64_t id) {
  if (scheduler->cancel(id)) return;
  Clock::time_point submitted;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!callbacks.count(id)) return;  // unknown or already finished
    const auto it = std::find_if(to_prepare.begin(), to_prepare.end(), [id](const Pending& p) { return p.id == id; });
    if (it == to_prepare.end()) {
      cancel_on_arrival.insert(id);  // on the pool now: finished when its preparation comes back
      return;
    }
    submitted = it->submitted;
    to_prepare.erase(it);
  }
  emit_final(id, submitted, "cancelled", "");
}

void Engine::Impl::emit_final(int64_t id, Clock::time_point submitted, const std::string& reason,
                              const std::string& error, ErrorKind error_kind) {
  RequestEvent event;
  event.finished = true;
  event.finish_reason = reason;
  event.error = error;
  event.error_kind = reason == "error" ? error_kind : ErrorKind::None;
  event.ms = std::chrono::duration<double, std::milli>(Clock::now() - submitted).count();
  deliver(id, event);
}

// Runs the request's callback on the scheduler thread (the only caller of deliver); a throwing callback is the caller's
// bug and must not take the engine down, so its exception is dropped.
void Engine::Impl::deliver(int64_t id, const RequestEvent& raw_event) {
  // The error leaves the engine here, for every door: as a client may read it (no file:line, bounded).
  RequestEvent sanitized;
  if (!raw_event.error.empty()) {
    sanitized = raw_event;
    sanitized.error = client_error_text(raw_event.error);
  }
  const RequestEvent& event = raw_event.error.empty() ? raw_event : sanitized;
  // Stats first: whoever waits for this final event (drain, a test, a caller reading stats() in its callback) must see
  // the blocks it just released and the request counted as finished or failed.
  if (event.finished) publish_stats();
  std::shared_ptr<RequestCallback> callback;
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = callbacks.find(id);
    if (it == callbacks.end()) return;
    callback = it->second;
    if (event.finished) {
      if (event.error.empty() || event.finish_reason == "cancelled") {
        ++stats.requests_finished;  // cancelled at shutdown: not the request's failure
      } else {
        ++stats.requests_failed;
      }
    }
  }
  try {
    if (*callback) (*callback)(event);
  } catch (...) {
  }
  if (!event.finished) return;
  {
    std::lock_guard<std::mutex> lock(mutex);
    callbacks.erase(id);
  }
  all_done.notify_all();
}

void Engine::Impl::publish_stats() {
  const SchedulerCounters& c = scheduler->counters();
  std::lock_guard<std::mutex> lock(mutex);
  stats.prompt_tokens = c.prompt_tokens;
  stats.completion_tokens = c.completion_tokens;
  stats.prefix_cache_hit_tokens = c.prefix_cache_hit_tokens;
  stats.prefill_tokens = c.prefill_tokens;
  stats.inflight_prefix_waits = c.inflight_prefix_waits;
  stats.inflight_prefix_hit_tokens = c.inflight_prefix_hit_tokens;
  stats.vision_cache_hits = c.vision_cache_hits;
  stats.vision_cache_misses = c.vision_cache_misses;
  stats.vit_ms = c.vit_ms;
  stats.llm_ms = c.llm_ms;
  stats.queue_depth = int(to_prepare.size()) + preparing + int(prepared.size()) + scheduler->waiting();
  stats.running = scheduler->running();
  stats.kv_blocks_total = scheduler->blocks().num_blocks();
  stats.kv_blocks_used = scheduler->blocks().used_blocks();
}

// Shutdown: every request still held gets its final "cancelled" event, including those on the pool now.
void Engine::Impl::finish_leftovers() {
  scheduler->cancel_all("engine stopped");
  std::deque<Pending> never_prepared;
  {
    std::unique_lock<std::mutex> lock(mutex);
    never_prepared.swap(to_prepare);
    wake_scheduler.wait(lock, [this] { return preparing == 0; });
  }
  for (const Pending& p : never_prepared) emit_final(p.id, p.submitted, "cancelled", "engine stopped");
  std::vector<PreparedRequest> arrived;
  std::vector<FailedPreparation> failed;
  {
    std::lock_guard<std::mutex> lock(mutex);
    arrived.swap(prepared);
    failed.swap(prepare_failed);
  }
  for (const PreparedRequest& r : arrived) emit_final(r.id, r.submitted, "cancelled", "engine stopped");
  for (const FailedPreparation& f : failed) emit_final(f.id, f.submitted, "cancelled", "engine stopped");
  publish_stats();
}

}  // namespace fovea
