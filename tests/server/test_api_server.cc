// The API server end to end over loopback sockets, with a fake engine.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "../engine/fake_service.h"
#include "engine/data_parallel.h"
#include "server/api_server.h"

namespace fovea {
namespace {

using Json = nlohmann::json;

struct Response {
  int status = 0;
  http::Request head;  // headers and body, through our own parser
  std::string body() const { return head.body; }
};

// One client connection speaking raw HTTP/1.1.
class Client {
 public:
  explicit Client(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  }
  ~Client() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void send(const std::string& data) { ASSERT_EQ(::send(fd_, data.data(), data.size(), MSG_NOSIGNAL), ssize_t(data.size())); }
  void send_request(const std::string& method, const std::string& path, const std::string& body = "",
                    const std::string& extra = "") {
    send(method + " " + path + " HTTP/1.1\r\nHost: x\r\n" + extra + "Content-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body);
  }
  // Reads one response (status line rewritten so the request parser can frame the body).
  Response read_response(int timeout_ms = 10000) {
    Response r;
    http::Limits limits;
    limits.max_header_bytes = 1 << 20;
    http::RequestParser parser(limits);
    bool rewritten = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      if (!rewritten && buffer_.find("\r\n") != std::string::npos) {
        r.status = std::atoi(buffer_.substr(9, 3).c_str());
        buffer_.replace(0, buffer_.find("\r\n"), "GET / HTTP/1.1");
        rewritten = true;
      }
      if (rewritten) {
        const auto state = parser.feed(buffer_);
        if (state == http::RequestParser::State::Done) break;
        if (state == http::RequestParser::State::Error) break;
      }
      pollfd p{fd_, POLLIN, 0};
      const int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
      if (left <= 0 || ::poll(&p, 1, left) != 1) break;
      char buf[8192];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        if (rewritten && !parser.headers_done()) break;
        // A close-delimited body: whatever arrived is the body.
        if (rewritten) r.head.body = buffer_;
        return r;
      }
      buffer_.append(buf, size_t(n));
    }
    r.head = parser.request();
    return r;
  }
  bool closed_by_peer(int timeout_ms = 2000) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) != 1) return false;
    char c;
    return ::recv(fd_, &c, 1, 0) == 0;
  }

 private:
  int fd_ = -1;
  std::string buffer_;
};

std::string chat_body(int max_tokens, bool stream, const std::string& extra = "") {
  return R"({"model":"fake-model","max_tokens":)" + std::to_string(max_tokens) + R"(,"stream":)" +
         (stream ? "true" : "false") + extra +
         R"(,"messages":[{"role":"user","content":[{"type":"text","text":"hi"},)"
         R"({"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]})";
}

// Waits (bounded) for a condition that another thread makes true.
template <typename F>
bool eventually(F condition, int timeout_ms = 5000) {
  for (int waited = 0; waited < timeout_ms; waited += 10) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

class ApiServerTest : public ::testing::Test {
 public:
  ApiServerTest() = default;
  ApiServer* server() { return server_.get(); }
  testing::FakeService* service() { return service_.get(); }

 protected:
  void start(ApiServerOptions options = {}, bool with_service = true) {
    options.http.port = 0;
    if (options.http.handler_threads == http::ServerOptions{}.handler_threads) options.http.handler_threads = 8;
    server_ = std::make_unique<ApiServer>(options);
    server_->start();
    if (with_service) server_->set_service(service_);
  }
  void TearDown() override {
    if (server_) server_->shutdown(2000);
  }
  std::shared_ptr<testing::FakeService> service_ = std::make_shared<testing::FakeService>();
  std::unique_ptr<ApiServer> server_;
};

TEST_F(ApiServerTest, HealthIs503UntilTheModelIsLoaded) {
  start({}, false);
  Client c(server_->port());
  c.send_request("GET", "/health");
  EXPECT_EQ(c.read_response().status, 503);
  c.send_request("POST", "/v1/chat/completions", chat_body(1, false));
  EXPECT_EQ(c.read_response().status, 503);
  server_->set_service(service_);
  c.send_request("GET", "/health");
  EXPECT_EQ(c.read_response().status, 200);
}

TEST_F(ApiServerTest, CompletionAndModelsOnOneKeptAliveConnection) {
  start();
  Client c(server_->port());
  c.send_request("POST", "/v1/chat/completions", chat_body(3, false, R"(,"logprobs":true,"top_logprobs":2)"));
  const Response r = c.read_response();
  ASSERT_EQ(r.status, 200) << r.body();
  const Json j = Json::parse(r.body());
  EXPECT_EQ(j["choices"][0]["message"]["content"], "t0 t1 t2");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 10);
  EXPECT_EQ(j["model"], "fake-model");
  ASSERT_EQ(j["choices"][0]["logprobs"]["content"].size(), 3u);
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"][1]["token"], "t1");
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"][1]["top_logprobs"].size(), 2u);
  ASSERT_EQ(service_->requests.size(), 1u);
  EXPECT_EQ(service_->requests[0].images[0].bytes, std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(service_->requests[0].prompt, "hi");

  c.send_request("GET", "/v1/models");
  const Response models = c.read_response();
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(Json::parse(models.body())["data"][0]["id"], "fake-model");
  c.send_request("GET", "/v1/models/fake-model");
  EXPECT_EQ(c.read_response().status, 200);
}

TEST_F(ApiServerTest, GuidedChoiceReturnsEveryChoicesLogprob) {
  start();
  Client c(server_->port());
  c.send_request("POST", "/v1/chat/completions", chat_body(1, false, R"(,"guided_choice":["yes","no"])"));
  const Response r = c.read_response();
  ASSERT_EQ(r.status, 200) << r.body();
  const Json j = Json::parse(r.body());
  EXPECT_EQ(j["choices"][0]["choice_logprobs"], Json::array({-1.0, -2.0}));  // the fake's: -1, -2, ...
  ASSERT_EQ(service_->requests.size(), 1u);
  EXPECT_EQ(service_->requests[0].params.choices, (std::vector<std::string>{"yes", "no"}));
  // Streamed: the finish chunk carries them.
  c.send_request("POST", "/v1/chat/completions", chat_body(1, true, R"(,"guided_choice":["yes","no"])"));
  const Response s = c.read_response();
  ASSERT_EQ(s.status, 200);
  Json finish;
  for (size_t pos = 0; (pos = s.head.body.find("data: {", pos)) != std::string::npos; pos += 6) {
    const Json e = Json::parse(s.head.body.substr(pos + 6, s.head.body.find("\n\n", pos) - pos - 6));
    if (!e["choices"].empty() && !e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0];
  }
  ASSERT_TRUE(finish.is_object()) << s.head.body;
  EXPECT_EQ(finish["choice_logprobs"], Json::array({-1.0, -2.0}));
}

TEST_F(ApiServerTest, StreamsServerSentEvents) {
  start();
  Client c(server_->port());
  c.send_request("POST", "/v1/chat/completions",
                 chat_body(4, true, R"(,"stream_options":{"include_usage":true})"));
  const Response r = c.read_response();
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.head.header("content-type"), "text/event-stream");
  EXPECT_EQ(r.head.header("transfer-encoding"), "chunked");
  std::vector<std::string> events;
  size_t pos = 0;
  const std::string& body = r.head.body;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    ASSERT_NE(end, std::string::npos);
    ASSERT_EQ(body.compare(pos, 6, "data: "), 0);
    events.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end + 2;
  }
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  std::string finish;
  bool saw_role = false, saw_usage = false;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const Json e = Json::parse(events[i]);
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    if (e.contains("usage")) {
      saw_usage = true;
      EXPECT_EQ(e["usage"]["completion_tokens"], 4);
      continue;
    }
    const Json& choice = e["choices"][0];
    saw_role = saw_role || choice["delta"].value("role", "") == "assistant";
    text += choice["delta"].value("content", "");
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  EXPECT_TRUE(saw_role);
  EXPECT_TRUE(saw_usage);
  EXPECT_EQ(text, "t0 t1 t2 t3");
  EXPECT_EQ(finish, "length");
  // The connection is still usable after a streamed response.
  c.send_request("GET", "/health");
  EXPECT_EQ(c.read_response().status, 200);
}

TEST_F(ApiServerTest, ErrorsHaveTheRightStatusAndShape) {
  ApiServerOptions options;
  options.api_key = "sekret";
  options.http.limits.max_body_bytes = 4096;
  start(options);
  Client c(server_->port());
  const std::string auth = "Authorization: Bearer sekret\r\n";
  auto expect_error = [&](const Response& r, int status) {
    EXPECT_EQ(r.status, status) << r.body();
    const Json j = Json::parse(r.body());
    EXPECT_TRUE(j["error"]["message"].is_string());
    EXPECT_TRUE(j["error"].contains("type") && j["error"].contains("param") && j["error"].contains("code"));
  };
  c.send_request("POST", "/v1/chat/completions", chat_body(1, false));
  expect_error(c.read_response(), 401);
  c.send_request("POST", "/v1/chat/completions", chat_body(1, false), "Authorization: Bearer wrong\r\n");
  expect_error(c.read_response(), 401);
  c.send_request("POST", "/v1/chat/completions", "{nope", auth);
  expect_error(c.read_response(), 400);
  c.send_request("POST", "/v1/chat/completions", R"({"model":"other","messages":[{"role":"user","content":"a"}]})", auth);
  expect_error(c.read_response(), 404);
  c.send_request("GET", "/v1/nothing", "", auth);
  expect_error(c.read_response(), 404);
  c.send_request("GET", "/v1/chat/completions", "", auth);
  expect_error(c.read_response(), 405);
  // An image the engine cannot decode fails the request with 400, not the server.
  c.send_request("POST", "/v1/chat/completions",
                 R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,YmFk"}}]}]})",
                 auth);
  expect_error(c.read_response(), 400);
  c.send_request("POST", "/v1/chat/completions", std::string(5000, ' '), auth);
  expect_error(c.read_response(), 413);
  EXPECT_TRUE(c.closed_by_peer());  // the unread body makes the connection unusable
  Client health(server_->port());
  health.send_request("GET", "/health");  // no key needed
  EXPECT_EQ(health.read_response().status, 200);
}

TEST_F(ApiServerTest, FullQueueAnswers429) {
  service_->queue_limit = 0;
  start();
  Client c(server_->port());
  c.send_request("POST", "/v1/chat/completions", chat_body(1, false));
  const Response r = c.read_response();
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(Json::parse(r.body())["error"]["code"], "rate_limit_exceeded");
}

TEST_F(ApiServerTest, ClientThatGoesAwayIsCancelled) {
  service_->token_delay_ms = 20;
  start();
  for (bool stream : {false, true}) {
    const int before = service_->cancels.load();
    {
      Client c(server_->port());
      c.send_request("POST", "/v1/chat/completions", chat_body(500, stream));
      ASSERT_TRUE(eventually([&] { return service_->in_flight() == 1; }));
      c.close();
    }
    EXPECT_TRUE(eventually([&] { return service_->cancels.load() == before + 1; })) << "stream " << stream;
    EXPECT_TRUE(eventually([&] { return service_->in_flight() == 0; }));
  }
  Client m(server_->port());
  m.send_request("GET", "/metrics");
  const Response metrics = m.read_response();
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body().find("fovea_kv_blocks_used 0\n"), std::string::npos) << metrics.body();
  EXPECT_NE(metrics.body().find("fovea_requests_cancelled_total 2\n"), std::string::npos);
  EXPECT_NE(metrics.body().find("# TYPE fovea_qpm gauge"), std::string::npos);
}

TEST_F(ApiServerTest, ChunkedRequestBodyAndPipelining) {
  start();
  Client c(server_->port());
  const std::string body = chat_body(2, false);
  c.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
         http::format_chunk(body.substr(0, 10)) + http::format_chunk(body.substr(10)) + http::chunk_terminator() +
         "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  const Response first = c.read_response();
  ASSERT_EQ(first.status, 200) << first.body();
  EXPECT_EQ(Json::parse(first.body())["choices"][0]["message"]["content"], "t0 t1");
  EXPECT_EQ(c.read_response().status, 200);
}

TEST_F(ApiServerTest, ExpectContinueGetsAnInterimResponse) {
  start();
  Client c(server_->port());
  const std::string body = chat_body(1, false);
  c.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n");
  EXPECT_EQ(c.read_response().status, 100);
  c.send(body);
  EXPECT_EQ(c.read_response().status, 200);
}

TEST_F(ApiServerTest, ASlowHeadHoldsNoHandlerAndTimesOut) {
  ApiServerOptions options;
  options.http.header_timeout_ms = 500;
  options.http.handler_threads = 1;  // so a slow client holding it would block everyone
  options.http.port = 0;
  server_ = std::make_unique<ApiServer>(options);
  server_->start();
  server_->set_service(service_);
  Client slow(server_->port());
  slow.send("GET /health HTTP/1.1\r\nHost: x\r\n");  // and nothing more
  Client quick(server_->port());
  quick.send_request("GET", "/health");
  EXPECT_EQ(quick.read_response(2000).status, 200);  // the only handler was free
  EXPECT_EQ(slow.read_response(5000).status, 408);
  EXPECT_TRUE(slow.closed_by_peer());
}

// Idle sockets at the connection limit make room for a newcomer (the least recently active goes); only when
// every connection is inside a request is the newcomer refused with 503.
TEST_F(ApiServerTest, IdleSocketsDoNotLockOthersOut) {
  service_->token_delay_ms = 20;
  ApiServerOptions options;
  options.http.max_connections = 4;
  start(options);
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(std::make_unique<Client>(server_->port()));
  ASSERT_TRUE(eventually([&] { return server_->counters().open_connections == 4; }));
  Client newcomer(server_->port());
  newcomer.send_request("GET", "/health");
  EXPECT_EQ(newcomer.read_response(2000).status, 200);
  EXPECT_TRUE(idle[0]->closed_by_peer());  // the oldest idle one made room

  std::vector<std::unique_ptr<Client>> busy;
  for (int i = 0; i < 4; ++i) {
    busy.push_back(std::make_unique<Client>(server_->port()));
    busy.back()->send_request("POST", "/v1/chat/completions", chat_body(100, false));
  }
  ASSERT_TRUE(eventually([&] { return service_->in_flight() == 4; }));
  Client refused(server_->port());
  EXPECT_EQ(refused.read_response().status, 503);
  for (auto& c : busy) c->close();
}

// Bodies are read by the poller: clients trickling bodies hold no handler, so the API still answers.
TEST_F(ApiServerTest, SlowBodiesHoldNoHandler) {
  ApiServerOptions options;
  options.http.handler_threads = 1;
  options.http.body_timeout_ms = 30000;
  start(options);
  std::vector<std::unique_ptr<Client>> slow;
  for (int i = 0; i < 3; ++i) {
    slow.push_back(std::make_unique<Client>(server_->port()));
    slow.back()->send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"mess");
  }
  Client quick(server_->port());
  quick.send_request("POST", "/v1/chat/completions", chat_body(2, false));
  EXPECT_EQ(quick.read_response(3000).status, 200);
}

// A body that stops arriving gets 408 once the body timeout passes, and the connection closes.
TEST_F(ApiServerTest, StalledBodyTimesOut) {
  ApiServerOptions options;
  options.http.body_timeout_ms = 300;
  start(options);
  Client c(server_->port());
  c.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mess");
  EXPECT_EQ(c.read_response(3000).status, 408);
  EXPECT_TRUE(c.closed_by_peer());
}

// Bodies held at once are bounded: one that would go beyond the budget gets 503; the budget comes back with
// the response.
TEST_F(ApiServerTest, BodyMemoryIsBounded) {
  ApiServerOptions options;
  options.http.max_body_memory = 1000;
  start(options);
  Client first(server_->port());
  first.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 800\r\n\r\n{");
  ASSERT_TRUE(eventually([&] { return server_->body_memory() == 800; }));
  Client second(server_->port());
  second.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 800\r\n\r\n{");
  const Response refused = second.read_response(3000);
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.head.header("retry-after"), "1");
  first.send(std::string(799, ' '));
  EXPECT_EQ(first.read_response(3000).status, 400);  // "{" and spaces: not JSON
  EXPECT_TRUE(eventually([&] { return server_->body_memory() == 0; }));
  Client third(server_->port());
  third.send_request("POST", "/v1/chat/completions", chat_body(1, false));
  EXPECT_EQ(third.read_response(3000).status, 200);
}

// A wrong key is refused on the head alone: the body (which may never come) is not waited for.
TEST_F(ApiServerTest, MissingKeyIsRefusedBeforeTheBody) {
  ApiServerOptions options;
  options.api_key = "sekret";
  start(options);
  Client c(server_->port());
  c.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n");
  const Response r = c.read_response(3000);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.head.header("www-authenticate"), "Bearer");
  EXPECT_TRUE(c.closed_by_peer());
}

// /health and /metrics are answered by the poller, also while every handler waits on the engine.
TEST_F(ApiServerTest, HealthAnswersWhileEveryHandlerIsBusy) {
  service_->token_delay_ms = 20;
  ApiServerOptions options;
  options.http.handler_threads = 1;
  start(options);
  Client busy(server_->port());
  busy.send_request("POST", "/v1/chat/completions", chat_body(200, false));
  ASSERT_TRUE(eventually([&] { return service_->in_flight() == 1; }));
  Client probe(server_->port());
  probe.send_request("GET", "/health");
  EXPECT_EQ(probe.read_response(1000).status, 200);
  probe.send_request("GET", "/metrics");
  const Response m = probe.read_response(1000);
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body().find("fovea_running_requests 1\n"), std::string::npos) << m.body();
  busy.close();
}

// Starts a request of max_tokens tokens (20 ms each), shuts the server down with the given drain timeout while
// it runs, and returns its response.
Response response_across_shutdown(ApiServerTest& test, int max_tokens, int drain_timeout_ms) {
  Client c(test.server()->port());
  c.send_request("POST", "/v1/chat/completions", chat_body(max_tokens, false));
  EXPECT_TRUE(eventually([&] { return test.service()->in_flight() == 1; }));
  std::thread stopper([&] { test.server()->shutdown(drain_timeout_ms); });
  const Response r = c.read_response();
  stopper.join();
  return r;
}

TEST_F(ApiServerTest, ShutdownLetsRequestsInFlightFinish) {
  service_->token_delay_ms = 20;
  start();
  const Response r = response_across_shutdown(*this, 10, 5000);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Json::parse(r.body())["usage"]["completion_tokens"], 10);
}

// A request still running when the drain timeout passes is cancelled (its client gets 503), so shutdown ends.
TEST_F(ApiServerTest, ShutdownCancelsWhatOutlivesTheDrainTimeout) {
  service_->token_delay_ms = 20;
  start();
  // 30,000 tokens at 20 ms would take 10 minutes: shutdown returning at all (the join) and the 503 show the cancel.
  const Response r = response_across_shutdown(*this, 30000, 300);
  EXPECT_EQ(r.status, 503) << r.body();
  EXPECT_EQ(service_->cancels.load(), 1);
}

// Holds every request until fail_all(), which sends each one token and then the engine-failure error a
// device failure gives; later submits are refused as by a failed engine.
class FailingEngine final : public InferenceService {
 public:
  int64_t submit(Request, RequestCallback callback) override {
    std::lock_guard lock(mutex_);
    if (failed_) throw EngineFailedError("engine failed: device lost");
    held_.push_back(std::move(callback));
    arrived_.notify_all();
    return int64_t(held_.size());
  }
  void cancel(int64_t) override {}
  void drain() override {}
  EngineStats stats() const override { return {}; }
  std::string model_name() const override { return "fake-model"; }
  std::string token_text(int32_t) const override { return ""; }

  bool wait_for_requests(size_t n) {
    std::unique_lock lock(mutex_);
    return arrived_.wait_for(lock, std::chrono::seconds(30), [&] { return held_.size() >= n; });
  }
  void fail_all() {
    std::vector<RequestCallback> held;
    {
      std::lock_guard lock(mutex_);
      failed_ = true;
      held.swap(held_);
    }
    for (const RequestCallback& callback : held) testing::fail_as_lost_device(callback);
  }

 private:
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<RequestCallback> held_;
  bool failed_ = false;
};

// `fovea serve --gpus/--replicas` gets the dispatcher's retry: requests on a replica that fails mid-batch are
// answered by the other one, whole; a stream that had already sent the lost replica's tokens ends with an
// engine_failed error instead of mixing two attempts.
TEST_F(ApiServerTest, AReplicaFailingMidBatchLosesNoRequest) {
  auto failing = std::make_unique<FailingEngine>();
  FailingEngine* replica = failing.get();
  std::vector<std::unique_ptr<InferenceService>> engines;
  engines.push_back(std::move(failing));
  engines.push_back(std::make_unique<testing::FakeService>());
  DataParallelService::Options routing;
  routing.work = [](const Request&) { return int64_t(0); };  // every tie goes to the lower index: all to `replica`
  ApiServerOptions options;
  options.http.port = 0;
  options.http.handler_threads = 16;
  server_ = std::make_unique<ApiServer>(options);
  server_->start();
  server_->set_service(
      std::make_shared<DataParallelService>(std::move(engines), std::vector<std::string>{"a", "b"}, routing));
  constexpr int kRequests = 8;
  std::vector<Response> responses(kRequests + 1);
  std::vector<std::thread> clients;
  for (int i = 0; i <= kRequests; ++i)
    clients.emplace_back([&, i] {
      Client c(server_->port());
      c.send_request("POST", "/v1/chat/completions", chat_body(3, i == kRequests));  // the last one streams
      responses[size_t(i)] = c.read_response(30000);
    });
  ASSERT_TRUE(replica->wait_for_requests(kRequests + 1));
  replica->fail_all();
  for (auto& t : clients) t.join();
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_EQ(responses[size_t(i)].status, 200) << responses[size_t(i)].body();
    const Json j = Json::parse(responses[size_t(i)].body());
    EXPECT_EQ(j["choices"][0]["message"]["content"], "t0 t1 t2") << "request " << i;  // nothing of the lost try
    EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  }
  const std::string stream = responses[kRequests].body();
  EXPECT_EQ(responses[kRequests].status, 200);
  EXPECT_NE(stream.find("\"engine_failed\""), std::string::npos) << stream;
  EXPECT_NE(stream.find("data: [DONE]"), std::string::npos) << stream;
  EXPECT_NE(stream.find("\"content\":\"lost\""), std::string::npos) << stream;
  EXPECT_EQ(stream.find("\"content\":\"t0\""), std::string::npos) << "the stream mixed two attempts: " << stream;
}

}  // namespace
}  // namespace fovea
