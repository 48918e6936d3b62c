// The engine: takes requests (images + text + generation parameters) from any thread, preprocesses and tokenises
// them on a thread pool, schedules them with continuous batching onto a ModelRunner, and reports results through
// callbacks. Internal: callers go through InferenceService (include/fovea/engine.h), which wraps one Engine or a
// data-parallel dispatcher over several. The request/result/config types are the public ones.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fovea/options.h"
#include "fovea/request.h"
#include "fovea/result.h"

namespace fovea {

// The wording that starts every error an engine's failure gives its requests and refusals (for people reading
// logs and results; code tests ErrorKind::EngineFailed or EngineFailedError instead).
inline constexpr const char* kEngineFailedPrefix = "engine failed";

class ModelRunner;
class ThreadPool;

class Engine {
 public:
  // Loads the model onto the chosen backend and starts the scheduler thread.
  // prep_pool: null gives the engine its own preprocessing pool (config.preprocess_threads, 0: all cores). Engines
  // of one data-parallel service share one (engine_service.cc), so a busy engine uses the cores an idle one
  // leaves; config.preprocess_threads is then this engine's share, which sizes its prefetch window.
  explicit Engine(const EngineConfig& config, std::shared_ptr<ThreadPool> prep_pool = nullptr);
  // For tests: an engine over a runner built elsewhere (e.g. a fake); the tokenizer is read from model_dir.
  Engine(const EngineConfig& config, std::unique_ptr<ModelRunner> runner, std::shared_ptr<ThreadPool> prep_pool = nullptr);
  ~Engine();  // stops after cancelling what is left
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. Returns a request id, or throws QueueFullError when max_queue is reached, NotAcceptingError
  // once draining, EngineFailedError after its device failed.
  // The callback runs on an engine thread; it must not block for long.
  int64_t submit(Request request, RequestCallback callback);
  void cancel(int64_t request_id);  // frees its KV; its final event says "cancelled"
  // Stops taking requests and returns once everything submitted has finished.
  void drain();
  EngineStats stats() const;
  const std::string& model_name() const;
  // Test hook (fault injection): after `steps` more scheduler iterations with work, the engine behaves as if its
  // device failed (fovea::DeviceError). Tests reach it through make_engine_service_with_failure (engine/service.h).
  void fail_after_steps(int steps);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace fovea
