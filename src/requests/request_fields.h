// The per-request fields that every JSON door reads (a `fovea run` tasks line, an OpenAI body in `fovea serve`
// or a batch file): one rule per field, so that a value means the same thing and fails with the same message
// whichever door it came through. The names and ranges are those of vLLM's OpenAI server (OpenAI's fields and
// its extra ones). The Python Request takes the same names with vLLM SamplingParams' ranges
// (python/fovea/_sampling.py), which are wider in two places: temperature has no upper bound, seed is unsigned.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "fovea/request.h"

namespace fovea {

// Why a field was refused: a message for the client and the field's name (OpenAI's error `param`).
struct FieldError {
  std::string message;
  std::string param;
};

// temperature [0, 2], top_p [0, 1], top_k (-1, 0: every token), min_p [0, 1], repetition_penalty (0, 1e6],
// presence_penalty / frequency_penalty [-2, 2], seed (any 64-bit integer), stop (a string or up to 4 non-empty
// strings), stop_token_ids (up to 64 ids), ignore_eos. Absent or null: *params keeps its value.
bool read_sampling_fields(const nlohmann::json& object, GenerationParams* params, FieldError* error);

// Fovea's fields: answers (log-probs of each answer's first token), choices or guided_choice (1 to 64 answers to
// score; the reply is the most likely), tiling ("official" or "compact") and max_tiles (1 to 256; the model's
// max_dynamic_patch bounds it). Absent or null: *request keeps its value.
bool read_fovea_fields(const nlohmann::json& object, Request* request, FieldError* error);

// An optional integer in [lo, hi] (a float with no fraction counts); false with *error when present and not one.
bool read_int_field(const nlohmann::json& object, const char* name, int64_t lo, int64_t hi, int64_t* out,
                    bool* present, FieldError* error);

}  // namespace fovea
