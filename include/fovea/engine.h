// Fovea's public API: an inference service that takes requests from any thread and streams events back. The
// CLI (`fovea run`, `serve`, `bench`), the HTTP server and the Python module all go through it; tests put a fake
// behind the same interface. make_engine_service loads the model once per device and, when several engines
// are asked for (EngineConfig::gpus / replicas), returns a data-parallel dispatcher over them.
#pragma once
#include <cstdint>
#include <exception>
#include <memory>
#include <string>

#include "fovea/options.h"
#include "fovea/request.h"
#include "fovea/result.h"

namespace fovea {

class InferenceService {
 public:
  virtual ~InferenceService() = default;
  // Thread-safe. Returns a request id. Throws fovea::Error containing "queue full" when the queue is at its
  // limit, or "engine failed" when no working engine is left. The callback runs on an engine thread and must
  // not block for long; it gets every event of the request, the last one final.
  virtual int64_t submit(Request request, RequestCallback callback) = 0;
  virtual void cancel(int64_t request_id) = 0;  // its final event says "cancelled"
  // Stops taking requests and returns once everything submitted has finished.
  virtual void drain() = 0;
  virtual EngineStats stats() const = 0;
  virtual std::string model_name() const = 0;
  // The text of one token, for logprobs ("" when unknown).
  virtual std::string token_text(int32_t token) const = 0;
};

// True when an exception from submit() means "queue full" (the server answers 429, batch jobs wait and retry).
bool is_queue_full_error(const std::exception& e);

// Every error that an engine's failure (CUDA error, device out of memory) gives its requests starts with this;
// the request itself was fine and may be run again on another engine.
inline constexpr const char* kEngineFailedPrefix = "engine failed";
bool is_engine_failure_error(const std::string& message);

// Loads the model (this takes a while): one engine, or one per GPU / replica behind a data-parallel dispatcher.
// The tokenizer for token_text is read from the model directory.
std::unique_ptr<InferenceService> make_engine_service(const EngineConfig& config);

}  // namespace fovea
