#include "jobs/request_pump.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "core/error.h"

namespace fovea {
namespace {

// Where engine threads leave finished requests for the pump's thread.
struct Mailbox {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<FinishedRequest> finished;

  void post(FinishedRequest&& f) {
    {
      std::lock_guard lock(mutex);
      finished.push_back(std::move(f));
    }
    cv.notify_one();
  }
  std::vector<FinishedRequest> take(int wait_ms) {
    std::unique_lock lock(mutex);
    cv.wait_for(lock, std::chrono::milliseconds(wait_ms), [this] { return !finished.empty(); });
    std::vector<FinishedRequest> out;
    out.swap(finished);
    return out;
  }
};

// Collects one request's deltas; the engine calls it for that request in order.
RequestCallback collector(size_t index, std::shared_ptr<Mailbox> mailbox, const PumpCallbacks& callbacks) {
  auto partial = std::make_shared<FinishedRequest>();
  partial->index = index;
  return [partial, mailbox, on_event = callbacks.on_event, index](const RequestEvent& ev) {
    if (on_event) on_event(index, ev);
    if (ev.restart) {  // the dispatcher runs it again on another engine: what came so far is void
      *partial = FinishedRequest{};
      partial->index = index;
      return;
    }
    partial->text += ev.text_delta;
    partial->tokens.insert(partial->tokens.end(), ev.token_delta.begin(), ev.token_delta.end());
    partial->logprobs.insert(partial->logprobs.end(), ev.logprob_delta.begin(), ev.logprob_delta.end());
    if (!ev.finished) return;
    partial->final = ev;
    mailbox->post(std::move(*partial));
  };
}

}  // namespace

void pump_requests(InferenceService& service, size_t count, int concurrency, const PumpCallbacks& callbacks) {
  auto mailbox = std::make_shared<Mailbox>();
  size_t next = 0;
  size_t in_flight = 0;
  size_t finished_total = 0;
  bool have_pending = false;  // `pending` was built but refused by a full queue: submit it again later
  Request pending;
  size_t pending_index = 0;
  concurrency = std::max(1, concurrency);
  while (finished_total < count) {
    bool queue_full = false;
    while (!queue_full && in_flight < size_t(concurrency) && (have_pending || next < count)) {
      if (!have_pending) {
        pending = Request{};
        pending_index = next++;
        std::string error;
        ErrorKind kind = ErrorKind::InvalidRequest;  // its input could not be resolved
        try {
          if (callbacks.make_request(pending_index, &pending, &error)) error.clear();
          else if (error.empty()) error = "invalid request";
        } catch (const RequestError& e) {  // e.g. an image it could not read: InvalidImage
          error = e.what();
          kind = e.kind();
        }
        if (!error.empty()) {
          FinishedRequest failed;
          failed.index = pending_index;
          failed.final.finished = true;
          failed.final.finish_reason = "error";
          failed.final.error = client_error_text(error);
          failed.final.error_kind = kind;
          mailbox->post(std::move(failed));
          ++in_flight;
          continue;
        }
        have_pending = true;
      }
      try {
        service.submit(pending, collector(pending_index, mailbox, callbacks));
        have_pending = false;
        ++in_flight;
      } catch (const QueueFullError&) {
        queue_full = true;
        continue;
      } catch (const std::exception& e) {
        FinishedRequest failed;
        failed.index = pending_index;
        failed.final.finished = true;
        failed.final.finish_reason = "error";
        failed.final.error = client_error_text(e.what());
        // Refused by a failed engine (EngineFailedError: a dispatcher with none left) or our own problem.
        failed.final.error_kind =
            dynamic_cast<const EngineFailedError*>(&e) ? ErrorKind::EngineFailed : ErrorKind::Internal;
        mailbox->post(std::move(failed));
        have_pending = false;
        ++in_flight;
      }
    }
    std::vector<FinishedRequest> finished = mailbox->take(queue_full ? 20 : 250);
    in_flight -= finished.size();
    finished_total += finished.size();
    if (!finished.empty()) callbacks.on_finished(finished);
    if (callbacks.on_tick) callbacks.on_tick();
  }
}

}  // namespace fovea
