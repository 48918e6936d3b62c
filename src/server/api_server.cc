#include "server/api_server.h"

#include <ctime>

#include "core/clock.h"

namespace fovea {

ApiServer::ApiServer(ApiServerOptions options)
    : options_(std::move(options)),
      http_(options_.http, [this](http::Exchange& ex) { handle(ex); },
            [this](const http::Request& head, bool, http::QuickReply* reply) { return triage(head, reply); }) {
  started_unix_ = int64_t(std::time(nullptr));
}

ApiServer::~ApiServer() { http_.stop(); }

void ApiServer::start() { http_.start(); }

void ApiServer::set_service(std::shared_ptr<InferenceService> service) {
  std::lock_guard lock(mutex_);
  service_ = std::move(service);
}

std::shared_ptr<InferenceService> ApiServer::service() const {
  std::lock_guard lock(mutex_);
  return service_;
}

std::string ApiServer::model_name(const InferenceService& service) const {
  return options_.served_model_name.empty() ? service.model_name() : options_.served_model_name;
}

void ApiServer::shutdown(int timeout_ms) {
  draining_ = true;
  http_.stop_accepting();
  auto s = service();
  if (!http_.wait_idle(timeout_ms) && s) {
    std::set<int64_t> running;
    {
      std::lock_guard lock(mutex_);
      running = in_flight_;
    }
    for (const int64_t id : running) s->cancel(id);
    http_.wait_idle(timeout_ms);
  }
  if (s) s->drain();
  http_.stop();
}

void ApiServer::count(int status) {
  std::lock_guard lock(mutex_);
  responses_by_status_[status]++;
}

void ApiServer::untrack(int64_t request_id) {
  std::lock_guard lock(mutex_);
  in_flight_.erase(request_id);
}

ServerCounters ApiServer::counters() const {
  ServerCounters c;
  {
    std::lock_guard lock(mutex_);
    c.responses_by_status = responses_by_status_;
    c.model_loaded = service_ != nullptr;
  }
  c.requests_cancelled = cancelled_.load();
  c.open_connections = http_.open_connections();
  c.active_requests = http_.active_requests();
  c.qpm = completions_.per_minute(monotonic_seconds());
  return c;
}

void ApiServer::reply(http::Exchange& ex, int status, const std::string& content_type, const std::string& body,
                      const std::vector<std::string>& extra_headers) {
  count(status);
  ex.respond(status, content_type, body, extra_headers);
}

void ApiServer::reply_error(http::Exchange& ex, const openai::ApiError& error) {
  std::vector<std::string> headers;
  if (error.status == 401) headers.push_back("WWW-Authenticate: Bearer");
  if (error.status == 429 || error.status == 503) headers.push_back("Retry-After: 1");
  reply(ex, error.status, "application/json", openai::dump(openai::error_json(error)), headers);
}

namespace {

openai::ApiError api_error(int status, std::string message, std::string type, std::string code = "",
                           std::string param = "") {
  openai::ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  e.param = std::move(param);
  return e;
}

// Compares without an early exit, so the key cannot be guessed byte by byte from response times.
bool same_secret(const std::string& given, const std::string& key) {
  if (given.size() != key.size() || key.empty()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ key[i]);
  return diff == 0;
}

}  // namespace

std::optional<openai::ApiError> ApiServer::auth_error(const http::Request& head) const {
  if (options_.api_key.empty()) return std::nullopt;
  const std::string auth = head.header("authorization");
  const std::string token = auth.rfind("Bearer ", 0) == 0 ? auth.substr(7) : "";
  if (same_secret(token, options_.api_key)) return std::nullopt;
  return api_error(401, auth.empty() ? "missing API key (Authorization: Bearer ...)" : "incorrect API key provided",
                   "invalid_request_error", "invalid_api_key");
}

std::string ApiServer::health_body(int* status) const {
  const bool ready = service() != nullptr && !draining_;
  *status = ready ? 200 : 503;
  return ready ? R"({"status":"ok"})" : (draining_ ? R"({"status":"draining"})" : R"({"status":"loading"})");
}

bool ApiServer::triage(const http::Request& head, http::QuickReply* reply) {
  const bool is_get = head.method == "GET" || head.method == "HEAD";
  std::optional<openai::ApiError> error;
  if ((head.path == "/health" || head.path == "/metrics") && !is_get) {
    error = api_error(405, "use GET", "invalid_request_error");
  } else if (head.path == "/health") {
    reply->body = health_body(&reply->status);
    reply->content_type = "application/json";
  } else if (head.path == "/metrics") {
    auto s = service();
    reply->status = 200;
    reply->content_type = "text/plain; version=0.0.4";
    reply->body = render_metrics(s ? s->stats() : EngineStats{}, counters());
  } else if (head.path.rfind("/v1/", 0) == 0) {
    error = auth_error(head);
    if (!error) return false;  // a handler takes it once its body is in
  } else {
    return false;
  }
  if (error) {
    reply->status = error->status;
    reply->content_type = "application/json";
    reply->body = openai::dump(openai::error_json(*error));
    if (error->status == 401) reply->extra_headers.push_back("WWW-Authenticate: Bearer");
  }
  count(reply->status);
  return true;
}

void ApiServer::handle(http::Exchange& ex) {
  const http::Request& req = ex.request();
  const std::string& path = req.path;
  const bool is_get = req.method == "GET" || req.method == "HEAD";
  // /health and /metrics never get here: triage() answers them on the poller.
  if (path.rfind("/v1/", 0) != 0)
    return reply_error(ex, api_error(404, "no route for " + req.method + " " + path, "invalid_request_error",
                                     "unknown_url"));
  if (const auto error = auth_error(req)) return reply_error(ex, *error);
  auto s = service();
  if (!s || draining_)
    return reply_error(ex, api_error(503, draining_ ? "the server is shutting down" : "the model is still loading",
                                     "server_error", "unavailable"));
  if (path == "/v1/chat/completions") {
    if (req.method != "POST") return reply_error(ex, api_error(405, "use POST", "invalid_request_error"));
    return handle_chat(ex, *s);
  }
  if (path == "/v1/models" || path.rfind("/v1/models/", 0) == 0) {
    if (!is_get) return reply_error(ex, api_error(405, "use GET", "invalid_request_error"));
    return handle_models(ex, *s);
  }
  reply_error(ex, api_error(404, "no route for " + req.method + " " + path, "invalid_request_error", "unknown_url"));
}

void ApiServer::handle_models(http::Exchange& ex, InferenceService& service) {
  const std::string name = model_name(service);
  const std::string& path = ex.request().path;
  if (path == "/v1/models") return reply(ex, 200, "application/json", openai::dump(openai::models_json(name, started_unix_)));
  const std::string asked = path.substr(std::string("/v1/models/").size());
  if (asked != name)
    return reply_error(ex, api_error(404, "the model '" + asked + "' does not exist", "invalid_request_error",
                                     "model_not_found", "model"));
  reply(ex, 200, "application/json", openai::dump(openai::models_json(name, started_unix_)["data"][0]));
}

}  // namespace fovea
