// Fovea's public API: an inference service that takes requests from any thread and streams events back. The
// CLI (`fovea run`, `serve`, `bench`), the HTTP server and the Python module all go through it; tests put a fake
// behind the same interface. make_engine_service loads the model once per device and, when several engines
// are asked for (EngineConfig::gpus / replicas), returns a data-parallel dispatcher over them.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "fovea/error.h"
#include "fovea/options.h"
#include "fovea/request.h"
#include "fovea/result.h"

namespace fovea {

class InferenceService {
 public:
  virtual ~InferenceService() = default;
  // Thread-safe. Returns a request id. Refusals are typed (fovea/error.h): QueueFullError when the queue is at
  // its limit, NotAcceptingError once draining, EngineFailedError when no working engine is left. The callback
  // runs on an engine thread and must not block for long; it gets every event of the request, the last one final.
  virtual int64_t submit(Request request, RequestCallback callback) = 0;
  virtual void cancel(int64_t request_id) = 0;  // its final event says "cancelled"
  // Stops taking requests and returns once everything submitted has finished.
  virtual void drain() = 0;
  virtual EngineStats stats() const = 0;
  virtual std::string model_name() const = 0;
  // The text of one token, for logprobs ("" when unknown).
  virtual std::string token_text(int32_t token) const = 0;
};

// Loads the model (this takes a while): one engine, or one per GPU / replica behind a data-parallel dispatcher.
// The tokenizer for token_text is read from the model directory.
std::unique_ptr<InferenceService> make_engine_service(const EngineConfig& config);

}  // namespace fovea
