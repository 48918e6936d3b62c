// The production InferenceService: one Engine plus the model's tokenizer (for logprob token texts), or several
// behind the data-parallel dispatcher (engine/data_parallel.h) when EngineConfig::gpus / replicas ask for more
// than one. Kept in its own file so that tests linking fovea_server with a fake service do not pull in the engine.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <thread>

#include "backend/backend.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/data_parallel.h"
#include "engine/service.h"
#include "tokenizer/tokenizer.h"

namespace fovea {
namespace {

class EngineService final : public InferenceService {
 public:
  EngineService(const EngineConfig& config, std::shared_ptr<ThreadPool> prep_pool) : engine_(config, std::move(prep_pool)) {
    try {
      tokenizer_ = load_tokenizer(config.model_dir);
    } catch (const std::exception&) {
      tokenizer_.reset();  // logprob token texts become "" rather than failing the whole server
    }
  }
  int64_t submit(Request request, RequestCallback callback) override {
    return engine_.submit(std::move(request), std::move(callback));
  }
  void cancel(int64_t request_id) override { engine_.cancel(request_id); }
  void drain() override { engine_.drain(); }
  EngineStats stats() const override { return engine_.stats(); }
  std::string model_name() const override { return engine_.model_name(); }
  std::string token_text(int32_t token) const override {
    if (!tokenizer_ || token < 0 || token >= tokenizer_->vocab_size()) return "";
    return tokenizer_->decode({token}, false);
  }
  Engine& engine() { return engine_; }

 private:
  Engine engine_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

std::unique_ptr<InferenceService> make_one(const EngineConfig& config, size_t index,
                                           std::shared_ptr<ThreadPool> prep_pool, const InjectedFailure& failure) {
  auto service = std::make_unique<EngineService>(config, std::move(prep_pool));
  if (failure.steps > 0 && failure.engine == index) service->engine().fail_after_steps(failure.steps);
  return service;
}

// What to build: one config per engine and its label, and the preprocessing pool they share when several.
struct Plan {
  std::vector<EngineConfig> configs;
  std::vector<std::string> labels;
  int shared_pool_threads = 0;  // the shared pool's size (0: all cores)
};

Plan plan_engines(const EngineConfig& config) {
  FOVEA_CHECK(config.replicas >= 1, "--replicas must be at least 1");
  const bool cpu = config.backend == "cpu" || (config.backend == "auto" && !cuda_backend_available());
  Plan plan;
  if (!config.gpus.empty()) {
    FOVEA_CHECK(!cpu, "--gpus needs the CUDA backend (", config.backend == "cpu" ? "--backend cpu was given" :
                "no GPU is visible", "); the CPU backend takes --replicas N");
    FOVEA_CHECK(config.replicas == 1, "--gpus and --replicas exclude each other (one engine per GPU)");
    for (const int gpu : parse_gpu_list(config.gpus, cuda_device_count())) {
      EngineConfig one = config;
      one.gpus = std::to_string(gpu);
      plan.configs.push_back(one);
      plan.labels.push_back("cuda:" + std::to_string(gpu));
    }
  } else {
    FOVEA_CHECK(cpu || config.replicas == 1, "--replicas is for the CPU backend; on GPUs use --gpus");
    for (int r = 0; r < config.replicas; ++r) {
      EngineConfig one = config;
      one.replicas = 1;
      plan.configs.push_back(one);
      plan.labels.push_back((cpu ? "cpu#" : "cuda:") + std::to_string(r));
    }
  }
  // Several engines share one preprocessing pool of preprocess_threads (0: all cores), so the cores serve
  // whichever engine has images to decode; each engine's share of it sizes that engine's prefetch window.
  if (plan.configs.size() > 1) {
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    plan.shared_pool_threads = config.preprocess_threads > 0 ? config.preprocess_threads : cores;
    for (EngineConfig& c : plan.configs)
      c.preprocess_threads = std::max(1, plan.shared_pool_threads / int(plan.configs.size()));
  }
  return plan;
}

}  // namespace

std::unique_ptr<InferenceService> make_engine_service(const EngineConfig& config) {
  return make_engine_service_with_failure(config, InjectedFailure{});
}

std::unique_ptr<InferenceService> make_engine_service_with_failure(const EngineConfig& config,
                                                                   const InjectedFailure& failure) {
  Plan plan = plan_engines(config);
  // An explicit --gpus goes through the dispatcher even for one GPU (the same path as for eight: its cost is
  // measured by bench/gpu/data_parallel_check.sh); the default stays one bare engine.
  if (plan.configs.size() == 1 && config.gpus.empty()) return make_one(plan.configs[0], 0, nullptr, failure);
  // Engines load in parallel, each on its own thread (which make_cuda_backend binds to the engine's GPU).
  const size_t n = plan.configs.size();
  auto prep_pool = n > 1 ? std::make_shared<ThreadPool>(plan.shared_pool_threads) : nullptr;
  std::vector<std::unique_ptr<InferenceService>> engines(n);
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> loaders;
  for (size_t i = 0; i < n; ++i)
    loaders.emplace_back([&, i] {
      try {
        engines[i] = make_one(plan.configs[i], i, prep_pool, failure);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  for (std::thread& t : loaders) t.join();
  for (size_t i = 0; i < n; ++i) {
    if (!errors[i]) continue;
    try {
      std::rethrow_exception(errors[i]);
    } catch (const std::exception& e) {
      FOVEA_FAIL("engine ", plan.labels[i], " could not start: ", e.what());
    }
  }
  std::fprintf(stderr, "fovea: %zu engines (data parallel):", n);
  for (const std::string& label : plan.labels) std::fprintf(stderr, " %s", label.c_str());
  std::fputc('\n', stderr);
  DataParallelService::Options options;
  options.engine_failure_retries = config.engine_failure_retries;
  return std::make_unique<DataParallelService>(std::move(engines), std::move(plan.labels), options);
}

}  // namespace fovea
