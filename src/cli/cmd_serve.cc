// fovea serve: the OpenAI-compatible HTTP server. It listens first (so /health can say 503 while the model
// loads), then loads the model; SIGTERM or SIGINT drains the requests in flight and stops.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "cli/command.h"
#include "core/error.h"
#include "server/api_server.h"

namespace fovea {
namespace {

const char* kUsage =
    "usage: fovea serve --model DIR [--host 127.0.0.1] [--port 8000] [--api-key KEY]\n"
    "  media: --allowed-media-dir DIR (local paths)  --allow-remote-media (http(s):// URLs)  --max-media-bytes N\n"
    "         --remote-timeout-ms N  --allow-s3-media (s3:// URLs too, read with the server's AWS credentials)\n"
    "         --ca-file PEM (TLS roots; default FOVEA_CA_BUNDLE or the system's)  --s3-endpoint URL\n"
    "  limits: --max-body-bytes N (default 64 MiB)  --max-connections N (1024; at the limit the least recently\n"
    "          active idle connection is closed)  --threads N (handlers, 256)\n"
    "          --max-queue N (engine queue; beyond it: 429)  --max-images N (per request, 16)\n"
    "          --max-body-memory N (request bodies held at once, default 1 GiB; beyond it: 503)\n"
    "  model: --backend cpu|cuda|auto  --max-tiles N  --policy official|compact  --kv-blocks N\n"
    "  --gpus all|0,1,3 (one engine per GPU, data parallel)   --replicas N (CPU backend: N engines)\n"
    "         --served-model-name NAME  --default-max-tokens N (256)  --drain-timeout-s N (30)\n"
    "         --no-cuda-graphs (launch decode steps op by op)\n"
    "         --cpu-normalize (tiles leave the host as normalised float32, not as bytes normalised on the device)\n"
    "         --quantization none|fp8|fp8-tensor|fp8-channel|fp8-block|fp8-channel-act128|fp8-all|w4a16 (W8A8 E4M3\n"
    "           for the LLM's projections;\n"
    "           scales per tensor, per channel x per token, 128x128 x 1x128 blocks, or per channel x 1x128;\n"
    "           fp8 = fp8-channel;\n"
    "           fp8-all: fp8 for the ViT's linears too; w4a16: the LLM's projections 4-bit: a 4-bit\n"
    "           checkpoint kept packed, or 4-bit dummy weights)\n"
    "         --w4 auto|packed|dequantize (4-bit AWQ/GPTQ checkpoints: keep the LLM's linears 4-bit on the device\n"
    "           (W4A16) or load them as bf16; auto: packed on CUDA)\n"
    "         --load-format auto|dummy (dummy: random weights of config.json's shapes made on the device,\n"
    "           no safetensors read; for benchmarking a model whose checkpoint is not at hand)\n"
    "         --batch-invariant (a request's outputs independent of its batch-mates; CUDA: slower kernels)\n"
    "The API key may also come from the environment variable FOVEA_API_KEY.\n";

struct UsageError {
  std::string message;
};

struct ServeConfig {
  EngineConfig engine;
  ApiServerOptions api;
  int drain_timeout_ms = 30000;
};

ServeConfig parse_serve_args(const std::vector<std::string>& raw) {
  const Args args(raw);
  try {
    args.allow_only({"--model", "--host", "--port", "--api-key", "--allowed-media-dir", "--allow-remote-media",
                     "--allow-s3-media", "--ca-file", "--s3-endpoint",
                     "--max-media-bytes", "--remote-timeout-ms", "--max-body-bytes", "--max-body-memory",
                     "--max-connections",
                     "--threads", "--max-queue", "--max-images", "--backend", "--max-tiles", "--policy",
                     "--kv-blocks", "--served-model-name", "--default-max-tokens", "--drain-timeout-s",
                     "--no-cuda-graphs", "--cpu-normalize", "--quantization", "--w4", "--load-format", "--batch-invariant", "--gpus", "--replicas", "--help"});
  } catch (const Error& e) {
    const std::string m = e.what();
    throw UsageError{m.substr(m.find("unknown option"))};
  }
  if (args.has("--help")) throw UsageError{""};
  ServeConfig c;
  c.engine.model_dir = args.get("--model");
  if (c.engine.model_dir.empty()) throw UsageError{"--model DIR is required"};
  c.engine.cuda_graphs = !args.has("--no-cuda-graphs");
  c.engine.gpu_normalize = !args.has("--cpu-normalize");
  c.engine.quantization = args.get("--quantization", "none");
  c.engine.batch_invariant = args.has("--batch-invariant");
  c.engine.w4 = args.get("--w4", "auto");
  c.engine.load_format = args.get("--load-format", "auto");
  const char* env_key = std::getenv("FOVEA_API_KEY");
  c.api.api_key = args.get("--api-key", env_key ? env_key : "");
  c.api.http.host = args.get("--host", "127.0.0.1");
  c.api.served_model_name = args.get("--served-model-name");
  c.api.media.allowed_media_dir = args.get("--allowed-media-dir");
  c.api.media.allow_remote = args.has("--allow-remote-media") || args.has("--allow-s3-media");
  c.api.media.allow_s3 = args.has("--allow-s3-media");
  c.api.media.ca_file = args.get("--ca-file");
  c.api.media.s3_endpoint = args.get("--s3-endpoint");
  c.engine.backend = args.get("--backend", "auto");
  c.engine.gpus = args.get("--gpus");
  try {
    c.api.http.port = args.get_int("--port", 8000);
    c.api.http.limits.max_body_bytes = size_t(args.get_double("--max-body-bytes", 64.0 * 1024 * 1024));
    c.api.http.max_connections = args.get_int("--max-connections", 1024);
    c.api.http.max_body_memory = size_t(args.get_double("--max-body-memory", 1024.0 * 1024 * 1024));
    c.api.http.handler_threads = args.get_int("--threads", 256);
    c.api.media.max_bytes = int64_t(args.get_double("--max-media-bytes", 20.0 * 1024 * 1024));
    c.api.media.remote_timeout_ms = args.get_int("--remote-timeout-ms", 10000);
    c.api.parse.max_images = args.get_int("--max-images", 16);
    c.api.parse.max_tiles = args.get_int("--max-tiles", 0);
    c.api.parse.default_max_tokens = args.get_int("--default-max-tokens", 256);
    c.engine.max_queue = args.get_int("--max-queue", c.engine.max_queue);
    c.engine.kv_blocks = args.get_int("--kv-blocks", 0);
    c.engine.replicas = args.get_int("--replicas", 1);
    c.drain_timeout_ms = int(args.get_double("--drain-timeout-s", 30) * 1000);
  } catch (const Error& e) {
    const std::string m = e.what();
    throw UsageError{m.substr(m.find("--"))};
  }
  const std::string policy = args.get("--policy", "official");
  if (policy != "official" && policy != "compact") throw UsageError{"--policy must be official or compact"};
  c.api.parse.tiling = policy == "compact" ? TilingPolicy::Compact : TilingPolicy::Official;
  if (c.api.http.port < 0 || c.api.http.port > 65535) throw UsageError{"--port must be 0..65535"};
  if (c.api.http.max_connections < 1 || c.api.http.handler_threads < 1) throw UsageError{"limits must be positive"};
  if (c.engine.max_queue < 1) throw UsageError{"--max-queue must be at least 1"};
  return c;
}

// Each connection is a file descriptor: the soft limit (often 1024) is raised toward the hard one so that
// --max-connections, not EMFILE, is what a crowd of clients meets.
void raise_open_files_limit(int max_connections) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t wanted = std::min<rlim_t>(limit.rlim_max, rlim_t(max_connections) + 256);
  if (limit.rlim_cur < wanted) {
    limit.rlim_cur = wanted;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// Signals are taken by one thread with sigwait, so no handler runs inside locked library code.
class StopSignal {
 public:
  StopSignal() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);  // inherited by every thread started after this
    signal(SIGPIPE, SIG_IGN);
    waiter_ = std::thread([this, set] {
      int sig = 0;
      sigwait(&set, &sig);
      {
        std::lock_guard lock(mutex_);
        received_ = sig;
      }
      cv_.notify_all();
    });
    waiter_.detach();  // it ends with the process; there is no portable way to interrupt sigwait
  }
  int wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return received_ != 0; });
    return received_;
  }
  bool received() {
    std::lock_guard lock(mutex_);
    return received_ != 0;
  }

 private:
  std::thread waiter_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int received_ = 0;
};

int serve_main(const std::vector<std::string>& raw) {
  ServeConfig config;
  try {
    config = parse_serve_args(raw);
  } catch (const UsageError& e) {
    if (!e.message.empty()) std::fprintf(stderr, "fovea serve: %s\n", e.message.c_str());
    std::fputs(kUsage, stderr);
    return e.message.empty() ? 0 : 2;
  }
  static StopSignal* stop = new StopSignal();  // lives to process exit with its detached thread
  raise_open_files_limit(config.api.http.max_connections);
  // Large buffers (request bodies, prompts, their JSON and copies) are mapped and unmapped on their own: with the
  // default dynamic threshold glibc soon keeps them in per-thread arenas, and with hundreds of handler threads
  // over-long requests left ~1 GB retained.
  ::mallopt(M_MMAP_THRESHOLD, 4 << 20);
  ApiServer server(config.api);
  server.start();
  std::fprintf(stderr, "fovea serve: listening on http://%s:%d (loading %s)\n", config.api.http.host.c_str(),
               server.port(), config.engine.model_dir.c_str());
  std::shared_ptr<InferenceService> service = make_engine_service(config.engine);
  server.set_service(service);
  std::fprintf(stderr, "fovea serve: model %s ready\n", service->model_name().c_str());
  const int sig = stop->wait();
  std::fprintf(stderr, "fovea serve: signal %d, draining\n", sig);
  // shutdown() waits the drain timeout, cancels what is left and waits that long again; should anything still
  // hold it (a bug, a stuck device), the process ends anyway rather than outlive its supervisor's patience.
  std::thread([limit_ms = 2 * config.drain_timeout_ms + 10000] {
    std::this_thread::sleep_for(std::chrono::milliseconds(limit_ms));
    std::fprintf(stderr, "fovea serve: shutdown did not finish within %d ms, exiting\n", limit_ms);
    std::_Exit(1);
  }).detach();
  server.shutdown(config.drain_timeout_ms);
  std::fprintf(stderr, "fovea serve: stopped\n");
  return 0;
}

const CommandRegistration registration{"serve", "OpenAI-compatible HTTP server (/v1/chat/completions)", serve_main};

}  // namespace
}  // namespace fovea
