// InferenceService, make_engine_service and the error classifiers live in the public header; this include keeps
// working for internal code.
#pragma once
#include "engine/engine.h"
#include "fovea/engine.h"
