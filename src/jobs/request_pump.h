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
  // Builds job i's request; returns false with *error set when the job fails before reaching the engine
  // (e.g. its image file cannot be read): it is then reported as finished with that error.
  std::function<bool(size_t index, Request* request, std::string* error)> make_request;
  // Receives finished jobs in batches, on the calling thread.
  std::function<void(std::vector<FinishedRequest>& finished)> on_finished;
  // Optional: every event of a job as the engine sends it, final included, on an engine thread (must not block).
  // It comes before the job is reported finished; a job retried after its engine failed starts over (a second
  // make_request call for that index says so).
  std::function<void(size_t index, const RequestEvent& event)> on_event;
  // Called at least every few hundred milliseconds while jobs run (progress display).
  std::function<void()> on_tick;
  // A job whose request failed because its engine failed (ErrorKind::EngineFailed) is built and submitted again
  // up to this many times; behind the data-parallel dispatcher it then runs on another engine.
  int engine_failure_retries = 0;
};

// Runs jobs 0..count-1 and returns when every one has finished. A full engine queue is not an error: the pump
// waits for a completion and submits again.
void pump_requests(InferenceService& service, size_t count, int concurrency, const PumpCallbacks& callbacks);

}  // namespace fovea
