// POST /v1/chat/completions: submit to the engine, then turn its events into one JSON response or an SSE
// stream. The handler thread waits on the request's event queue and, between events, checks whether the client
// is still there; a client that went away gets its request cancelled (which frees its KV blocks).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <mutex>

#include "core/clock.h"
#include "server/api_server.h"

namespace fovea {
namespace {

using openai::Json;

// Events of one request, pushed by the engine thread and taken by the handler thread.
class PendingRequest {
 public:
  void push(const RequestEvent& event) {
    {
      std::lock_guard lock(mutex_);
      events_.push_back(event);
    }
    cv_.notify_one();
  }
  std::vector<RequestEvent> take(int wait_ms) {
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [this] { return !events_.empty(); });
    std::vector<RequestEvent> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
    events_.clear();
    return out;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<RequestEvent> events_;
};

// Why submit() refused (fovea/error.h): a full queue (429), a draining service (503), no working engine left
// (503), or the request itself (400).
openai::ApiError submit_error(const std::exception& e) {
  openai::ApiError error;
  if (dynamic_cast<const QueueFullError*>(&e)) {
    error.status = 429;
    error.message = "the server is at capacity; retry later";
    error.type = "rate_limit_error";
    error.code = "rate_limit_exceeded";
  } else if (dynamic_cast<const NotAcceptingError*>(&e)) {
    error.status = 503;
    error.message = "the server is shutting down";
    error.type = "server_error";
    error.code = "unavailable";
  } else if (dynamic_cast<const EngineFailedError*>(&e)) {
    error.status = 503;
    error.message = e.what();
    error.type = "server_error";
    error.code = error_kind_name(ErrorKind::EngineFailed);
  } else {
    error.status = 400;
    error.message = e.what();
  }
  return error;
}

// What has been generated so far.
struct Accumulated {
  std::string text;
  Json logprobs = Json::array();
  int prompt_tokens = 0;
  int completion_tokens = 0;

  // Adds one event; returns its logprob entries (null unless the client asked for logprobs).
  Json add(const RequestEvent& ev, const openai::ChatRequest& chat, const openai::TokenText& token_text) {
    text += ev.text_delta;
    completion_tokens = std::max(completion_tokens + int(ev.token_delta.size()), ev.completion_tokens);
    prompt_tokens = std::max(prompt_tokens, ev.prompt_tokens);
    if (!chat.logprobs) return Json();
    Json lp = openai::logprob_content(ev.logprob_delta, chat.top_logprobs, token_text);
    for (const auto& item : lp) logprobs.push_back(item);
    return lp;
  }
};

// The SSE events of one engine event: its delta, and after the final one the finish chunk, the usage chunk
// (stream_options.include_usage) or the error, then [DONE].
std::string stream_events(const openai::Completion& c, const openai::ChatRequest& chat,
                          const std::vector<std::string>& answers, const RequestEvent& ev, const Json& lp,
                          const Accumulated& acc) {
  std::string sse;
  if (!ev.text_delta.empty() || (chat.logprobs && !lp.empty()))
    sse += http::sse_event(openai::dump(openai::chunk_json(c, Json{{"content", ev.text_delta}}, "", lp)));
  if (!ev.finished) return sse;
  if (!ev.error.empty() || ev.finish_reason == "cancelled") {
    sse += http::sse_event(openai::dump(openai::error_json(openai::engine_error(ev))));
  } else {
    Json finish = openai::chunk_json(c, Json::object(), openai::finish_reason_for(ev.finish_reason), Json());
    // As in the whole reply: choice_logprobs / answer_logprobs on the finish chunk.
    openai::add_scores(&finish["choices"][0], answers, ev);
    sse += http::sse_event(openai::dump(finish));
    if (chat.include_usage)
      sse += http::sse_event(openai::dump(openai::usage_chunk_json(c, acc.prompt_tokens, acc.completion_tokens)));
  }
  return sse + http::sse_event("[DONE]");
}

}  // namespace

void ApiServer::handle_chat(http::Exchange& ex, InferenceService& service) {
  openai::ChatRequest chat;
  openai::ApiError error;
  const openai::MediaLoader loader = [this](const std::string& url) { return load_image_url(url, options_.media); };
  if (!openai::parse_chat_request(ex.request().body, options_.parse, loader, &chat, &error))
    return reply_error(ex, error);
  const std::string name = model_name(service);
  if (!chat.model.empty() && chat.model != name) {
    error.status = 404;
    error.message = "the model '" + excerpt(chat.model) + "' does not exist (this server serves '" + name + "')";
    error.param = "model";
    error.code = "model_not_found";
    return reply_error(ex, error);
  }

  const std::vector<std::string> answers = chat.request.params.answers;  // the request itself goes to the engine
  auto pending = std::make_shared<PendingRequest>();
  int64_t request_id = -1;
  try {
    request_id = service.submit(std::move(chat.request), [pending](const RequestEvent& e) { pending->push(e); });
  } catch (const std::exception& e) {
    return reply_error(ex, submit_error(e));
  }

  // Known to shutdown() until this handler returns, so a request still running past the drain timeout is
  // cancelled rather than waited for.
  {
    std::lock_guard lock(mutex_);
    in_flight_.insert(request_id);
  }
  struct Untrack {
    ApiServer* server;
    int64_t id;
    ~Untrack() { server->untrack(id); }
  } untrack{this, request_id};

  const openai::Completion completion{str("chatcmpl-", started_unix_, "-", next_completion_++), int64_t(std::time(nullptr)),
                                      name};
  const openai::TokenText token_text = [&service](int32_t t) { return service.token_text(t); };
  Accumulated acc;
  bool stream_started = false;
  auto cancel = [&] {
    service.cancel(request_id);
    cancelled_++;
    ex.close_after();
  };

  auto next_check = std::chrono::steady_clock::now();
  for (;;) {
    std::vector<RequestEvent> events = pending->take(50);
    // Checked on a clock, not only when idle: a request producing tokens steadily is never idle.
    if (std::chrono::steady_clock::now() >= next_check) {
      if (ex.client_gone()) return cancel();
      next_check = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    }
    if (events.empty()) continue;
    std::string sse;
    for (const RequestEvent& ev : events) {
      if (ev.restart) {
        // Its engine failed; the dispatcher runs it again on another. A reply not yet sent starts over; a stream
        // cannot take back what it sent, so it ends with an error (and the retry is cancelled).
        if (!stream_started || (acc.text.empty() && acc.completion_tokens == 0)) {
          acc = Accumulated{};
          continue;
        }
        service.cancel(request_id);
        openai::ApiError lost;
        lost.status = 500;
        lost.type = "server_error";
        lost.code = error_kind_name(ErrorKind::EngineFailed);
        lost.message = "the engine failed while streaming; the request was not retried because its output had "
                       "already been sent (a request that is not streamed is retried)";
        ex.write_chunk(sse + http::sse_event(openai::dump(openai::error_json(lost))) + http::sse_event("[DONE]"));
        ex.end_stream();
        return;
      }
      const Json lp = acc.add(ev, chat, token_text);
      const bool failed = ev.finished && (!ev.error.empty() || ev.finish_reason == "cancelled");
      if (failed && !stream_started) return reply_error(ex, openai::engine_error(ev));
      if (ev.finished && ev.error.empty()) completions_.add(monotonic_seconds());
      if (!chat.stream) {
        if (!ev.finished) continue;
        Json body = openai::completion_json(completion, acc.text, openai::finish_reason_for(ev.finish_reason),
                                            chat.logprobs ? acc.logprobs : Json(), acc.prompt_tokens,
                                            acc.completion_tokens);
        // Extensions: with guided_choice/choices every choice's total log-prob, with answers each one's.
        openai::add_scores(&body["choices"][0], answers, ev);
        return reply(ex, 200, "application/json", openai::dump(body));
      }
      if (!stream_started) {
        // The head waits for the first event, so a request that fails at once still gets its status code.
        stream_started = true;
        count(200);
        if (!ex.begin_stream(200, "text/event-stream", {"Cache-Control: no-cache"})) return cancel();
        sse += http::sse_event(
            openai::dump(openai::chunk_json(completion, Json{{"role", "assistant"}, {"content", ""}}, "", Json())));
      }
      sse += stream_events(completion, chat, answers, ev, lp, acc);
      if (ev.finished) {
        ex.write_chunk(sse);
        ex.end_stream();
        return;
      }
    }
    if (!sse.empty() && !ex.write_chunk(sse)) return cancel();
  }
}

}  // namespace fovea
