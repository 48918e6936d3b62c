// What the server and the batch commands need from the engine, as an interface: the Engine in production
// (make_engine_service), a fake in unit tests, so HTTP, JSON mapping and job bookkeeping are tested without a
// model.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "engine/engine.h"

namespace fovea {

class InferenceService {
 public:
  virtual ~InferenceService() = default;
  // As Engine::submit: throws fovea::Error containing "queue full" when the queue is at its limit.
  virtual int64_t submit(Request request, RequestCallback callback) = 0;
  virtual void cancel(int64_t request_id) = 0;
  virtual void drain() = 0;
  virtual EngineStats stats() const = 0;
  virtual std::string model_name() const = 0;
  // The text of one token, for logprobs ("" when unknown).
  virtual std::string token_text(int32_t token) const = 0;
};

// True when an exception from submit() means "queue full" (the server answers 429, batch jobs wait and retry).
bool is_queue_full_error(const std::exception& e);

// Loads the model (this takes a while) and wraps the Engine; the tokenizer for token_text is read from the
// model directory.
std::unique_ptr<InferenceService> make_engine_service(const EngineConfig& config);

}  // namespace fovea
