// What Fovea reports back for a request: streaming events, the last of which is final. Part of the public API.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fovea/error_kind.h"

namespace fovea {

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;
};

// A streaming event: new text/tokens, then exactly one final event (finished == true). An event with `restart`
// (not final, nothing else set) voids everything delivered for the request so far: its engine failed and it
// starts over on another one (the data-parallel dispatcher's retry); what follows is the new attempt's.
struct RequestEvent {
  std::string text_delta;
  std::vector<int32_t> token_delta;
  std::vector<TokenLogprob> logprob_delta;
  bool finished = false;
  std::string finish_reason;                   // "stop", "length", "cancelled", "error"
  std::string error;                           // non-empty when the request failed (its own fault or ours)
  ErrorKind error_kind = ErrorKind::None;      // which, when error is set (fovea/error_kind.h)
  std::map<std::string, float> answer_logprobs;  // answer text -> log-prob, when params.answers was set
  std::vector<float> first_logits;             // [vocab] of the first generated token, when asked (final event)
  std::vector<float> choice_logprobs;          // per params.choices entry, same order (final event)
  std::vector<int32_t> prompt_token_ids;       // when params.return_prompt_token_ids (final event)
  int prompt_tokens = 0;
  int completion_tokens = 0;
  double ms = 0.0;                             // submit to finish
  bool restart = false;                        // see above
};

using RequestCallback = std::function<void(const RequestEvent&)>;

}  // namespace fovea
