// Feeds many requests to an InferenceService with at most `concurrency` in flight and hands their results
// back on the calling thread (so file writes and progress never run on an engine thread). Shared by
// `fovea run` and `fovea bench`.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fovea/engine.h"

namespace fovea {

struct FinishedRequest {
  size_t index = 0;            // which job
  std::string text;            // all text deltas joined
  std::vector<int32_t> tokens; // all generated token ids
  std::vector<TokenLogprob> logprobs;  // all logprob deltas (when the request asked for them)
  RequestEvent final;          // the final event (error, answer_logprobs, token counts, ms)
};

struct PumpCallbacks {
  // Builds job i's request; returns false with *error set when the job fails before reaching the engine: it is
  // then reported as finished with that error, of kind InvalidRequest; a RequestError thrown (an image that
  // cannot be read: requests/request_images.h) gives its own kind.
  std::function<bool(size_t index, Request* request, std::string* error)> make_request;
  // Receives finished jobs in batches, on the calling thread.
  std::function<void(std::vector<FinishedRequest>& finished)> on_finished;
  // Optional: every event of a job as the engine sends it, final included, on an engine thread (must not block).
  // It comes before the job is reported finished. A `restart` event (fovea/result.h) voids the job's earlier
  // ones: its engine failed and the data-parallel dispatcher runs it again on another (FinishedRequest holds
  // only the last attempt's deltas).
  std::function<void(size_t index, const RequestEvent& event)> on_event;
  // Called at least every few hundred milliseconds while jobs run (progress display).
  std::function<void()> on_tick;
};

// Runs jobs 0..count-1 and returns when every one has finished. A full engine queue is not an error: the pump
// waits for a completion and submits again.
void pump_requests(InferenceService& service, size_t count, int concurrency, const PumpCallbacks& callbacks);

}  // namespace fovea
