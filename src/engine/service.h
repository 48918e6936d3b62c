// InferenceService and make_engine_service live in the public header; this include keeps
// working for internal code.
#pragma once
#include "engine/engine.h"
#include "fovea/engine.h"

namespace fovea {

// Fault injection, for tests only (no command reads it): engine `engine` of the service (0 for a lone engine)
// fails as if its device had, after `steps` scheduler steps with work (Engine::fail_after_steps).
struct InjectedFailure {
  size_t engine = 0;
  int steps = 0;  // 0: no failure
};
std::unique_ptr<InferenceService> make_engine_service_with_failure(const EngineConfig& config,
                                                                   const InjectedFailure& failure);

}  // namespace fovea
