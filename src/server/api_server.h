// `fovea serve`'s HTTP layer: routes (/v1/chat/completions, /v1/models, /health, /metrics), the API key, the
// mapping of engine events to OpenAI responses and SSE streams, cancelling the request of a client that went
// away, and draining on shutdown. The InferenceService is set once the model has loaded; until then /health
// says 503.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "server/http_server.h"
#include "media/media.h"
#include "server/metrics.h"
#include "openai/protocol.h"
#include "fovea/engine.h"

namespace fovea {

struct ApiServerOptions {
  http::ServerOptions http;
  std::string api_key;            // empty: no authentication
  std::string served_model_name;  // empty: the engine's model name
  MediaOptions media;
  openai::ParseOptions parse;
};

class ApiServer {
 public:
  explicit ApiServer(ApiServerOptions options);
  ~ApiServer();

  void start();  // listens; throws fovea::Error when the address is taken
  int port() const { return http_.port(); }
  void set_service(std::shared_ptr<InferenceService> service);  // the model is loaded: start answering
  // Refuses new work (503), waits up to timeout_ms for requests in flight, cancels those still running (their
  // clients get 503), drains the engine, stops.
  void shutdown(int timeout_ms);
  ServerCounters counters() const;
  size_t body_memory() const { return http_.body_memory(); }  // request body bytes held now

 private:
  void handle(http::Exchange& ex);
  // On the poller thread, once a head is parsed: /health and /metrics are answered there (they must answer
  // while every handler waits on the engine), and a /v1/ request without the right key is refused before its
  // body is read.
  bool triage(const http::Request& head, http::QuickReply* reply);
  // The 401 for a /v1/ request without the right API key; nullopt when the key is right or none is set.
  std::optional<openai::ApiError> auth_error(const http::Request& head) const;
  std::string health_body(int* status) const;
  void reply(http::Exchange& ex, int status, const std::string& content_type, const std::string& body,
             const std::vector<std::string>& extra_headers = {});
  void reply_error(http::Exchange& ex, const openai::ApiError& error);
  void handle_chat(http::Exchange& ex, InferenceService& service);
  void handle_models(http::Exchange& ex, InferenceService& service);
  void count(int status);
  void untrack(int64_t request_id);
  std::shared_ptr<InferenceService> service() const;
  std::string model_name(const InferenceService& service) const;

  ApiServerOptions options_;
  http::Server http_;
  mutable std::mutex mutex_;  // guards service_, responses_by_status_ and in_flight_
  std::shared_ptr<InferenceService> service_;
  std::map<int, int64_t> responses_by_status_;
  std::set<int64_t> in_flight_;  // engine request ids being handled: cancelled when the drain timeout passes
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> cancelled_{0};
  std::atomic<int64_t> next_completion_{0};
  RateWindow completions_;
  int64_t started_unix_ = 0;
};

}  // namespace fovea
