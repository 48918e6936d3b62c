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
#include "cli/engine_options.h"
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
    "          --max-images N (per request, 16)\n"
    "          --max-body-memory N (request bodies held at once, default 1 GiB; beyond it: 503)\n"
    "  --served-model-name NAME  --default-max-tokens N (256)  --drain-timeout-s N (30)\n"
    "The API key may also come from the environment variable FOVEA_API_KEY.\n";

struct ServeConfig {
  EngineConfig engine;
  ApiServerOptions api;
  int drain_timeout_ms = 30000;
};

ServeConfig parse_serve_args(const std::vector<std::string>& raw) {
  const Args args(raw);
  std::vector<std::string> known = engine_option_flags();
  known.insert(known.end(), {"--host", "--port", "--api-key", "--allowed-media-dir", "--allow-remote-media",
                             "--allow-s3-media", "--ca-file", "--s3-endpoint", "--max-media-bytes",
                             "--remote-timeout-ms", "--max-body-bytes", "--max-body-memory", "--max-connections",
                             "--threads", "--max-images", "--served-model-name", "--default-max-tokens",
                             "--drain-timeout-s", "--help"});
  args.allow_only(known);
  if (args.has("--help")) throw UsageError("");
  ServeConfig c;
  c.engine = parse_engine_options(args);
  const TilingOptions tiling = parse_tiling_options(args);
  c.api.parse.tiling = tiling.tiling;
  c.api.parse.max_tiles = tiling.max_tiles;
  const char* env_key = std::getenv("FOVEA_API_KEY");
  c.api.api_key = args.get("--api-key", env_key ? env_key : "");
  c.api.http.host = args.get("--host", "127.0.0.1");
  c.api.served_model_name = args.get("--served-model-name");
  c.api.media.allowed_media_dir = args.get("--allowed-media-dir");
  c.api.media.allow_remote = args.has("--allow-remote-media") || args.has("--allow-s3-media");
  c.api.media.allow_s3 = args.has("--allow-s3-media");
  c.api.media.ca_file = args.get("--ca-file");
  c.api.media.s3_endpoint = args.get("--s3-endpoint");
  c.api.http.port = args.get_int("--port", 8000);
  c.api.http.limits.max_body_bytes = size_t(args.get_double("--max-body-bytes", 64.0 * 1024 * 1024));
  c.api.http.max_connections = args.get_int("--max-connections", 1024);
  c.api.http.max_body_memory = size_t(args.get_double("--max-body-memory", 1024.0 * 1024 * 1024));
  c.api.http.handler_threads = args.get_int("--threads", 256);
  c.api.media.max_bytes = int64_t(args.get_double("--max-media-bytes", 20.0 * 1024 * 1024));
  c.api.media.remote_timeout_ms = args.get_int("--remote-timeout-ms", 10000);
  c.api.parse.max_images = args.get_int("--max-images", 16);
  c.api.parse.default_max_tokens = args.get_int("--default-max-tokens", 256);
  c.drain_timeout_ms = int(args.get_double("--drain-timeout-s", 30) * 1000);
  if (c.api.http.port < 0 || c.api.http.port > 65535) throw UsageError("--port must be 0..65535");
  if (c.api.http.max_connections < 1 || c.api.http.handler_threads < 1) throw UsageError("limits must be positive");
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
    return print_usage_error("serve", e, kUsage + engine_options_usage());
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
