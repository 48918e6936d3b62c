// Engine internals shared by engine.cc (threads, submission, events) and engine_load.cc (building the real
// runner). Threading contract: docs/design.md, "Threads and ownership".
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/request_prep.h"
#include "engine/scheduler.h"
#include "runtime/runner.h"
#include "tokenizer/tokenizer.h"

namespace fovea {

class Backend;

struct Engine::Impl {
  // ---- fixed after construction ----
  EngineConfig config;
  std::string model_name;
  std::shared_ptr<void> keep_alive;      // what the runner borrows (backend, weights), released after it
  std::unique_ptr<ModelRunner> runner;   // owned here, called only from the scheduler thread
  std::unique_ptr<Tokenizer> tokenizer;  // const use only: shared by the pool and the scheduler thread
  RecentImages recent_images{16};  // shared by the pool's preparations (prep_context.recent)
  PrepContext prep_context;
  int prefetch_limit = 0;
  // Runs first on the scheduler thread: binds it to the engine's GPU (CUDA's current device is per thread).
  std::function<void()> bind_scheduler_thread;

  // ---- scheduler thread only ----
  std::unique_ptr<Scheduler> scheduler;
  std::unordered_set<int64_t> cancel_on_arrival;  // cancelled while being preprocessed
  std::string device_failure;  // non-empty once the device failed: every request gets this error

  std::atomic<int> fail_after_steps{0};  // test hook (Engine::fail_after_steps); 0: never

  // ---- guarded by mutex ----
  mutable std::mutex mutex;
  std::condition_variable wake_scheduler;
  std::condition_variable all_done;
  struct Pending {
    int64_t id = -1;
    Request request;
    Clock::time_point submitted;
  };
  struct FailedPreparation {
    int64_t id = -1;
    std::string error;
    ErrorKind kind = ErrorKind::Internal;
    Clock::time_point submitted;
  };
  std::deque<Pending> to_prepare;  // submitted, not yet handed to the pool
  int preparing = 0;               // on the pool now
  std::vector<PreparedRequest> prepared;
  std::vector<FailedPreparation> prepare_failed;
  std::vector<int64_t> cancel_requests;
  std::unordered_map<int64_t, std::shared_ptr<RequestCallback>> callbacks;  // requests not yet finished
  int64_t next_id = 1;
  bool accepting = true;
  bool stopping = false;
  EngineStats stats;  // stats.failure is set (under the mutex) when the device fails; submit() then refuses

  // Declared late: an own pool is destroyed (joined) before the state its tasks touch. A shared one outlives the
  // engine; finish_leftovers waits until none of this engine's tasks is queued or running there.
  std::shared_ptr<ThreadPool> pool;
  std::thread scheduler_thread;

  void start();  // builds the scheduler and starts the thread; runner and tokenizer must be set
  void stop();
  void scheduler_loop();
  void run_iteration(std::vector<PreparedRequest>& arrived, std::vector<FailedPreparation>& failed,
                     std::vector<int64_t>& cancels);
  void dispatch_preparation(std::unique_lock<std::mutex>& lock);
  void prepare_on_pool(Pending pending);
  void handle_cancel(int64_t id);
  void deliver(int64_t id, const RequestEvent& event);
  void publish_stats();
  void finish_leftovers();
  void fail_engine(const std::string& why);
  void fail_arrivals(std::vector<PreparedRequest>& arrived, std::vector<FailedPreparation>& failed);
  // error_kind: what a failure ("error" reason) was; cancellations carry None.
  void emit_final(int64_t id, Clock::time_point submitted, const std::string& reason, const std::string& error,
                  ErrorKind error_kind = ErrorKind::None);
};

}  // namespace fovea
