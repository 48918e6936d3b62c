// OpenAI chat-completions JSON <-> Fovea requests: parsing and validating a request body, building the
// response, the stream chunks and the error objects. Pure functions, unit-tested without a server.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fovea/engine.h"

namespace fovea::openai {

using Json = nlohmann::json;

// An error answered to the client: HTTP status plus OpenAI's {"error": {...}} fields.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};
Json error_json(const ApiError& error);

// What the server needs to know besides the engine Request.
struct ChatRequest {
  Request request;
  std::string model;  // as the client named it ("" when absent)
  bool stream = false;
  bool include_usage = false;   // stream_options.include_usage
  bool logprobs = false;
  int top_logprobs = 0;
};

struct ParseOptions {
  int default_max_tokens = 256;
  int max_tokens_limit = 32768;
  int max_images = 16;
  int max_json_depth = 32;           // nesting of arrays/objects in the body (400 beyond)
  int64_t max_json_elements = 100000;  // values, arrays and objects in the body (400 beyond)
  TilingPolicy tiling = TilingPolicy::Official;
  int max_tiles = 0;
};

// Turns one image_url string into bytes; throws (MediaError -> 400) when the source is refused or unreadable.
using MediaLoader = std::function<std::string(const std::string& url)>;

// Parses and validates a /v1/chat/completions body. Returns false and fills `error` on a bad request.
bool parse_chat_request(const std::string& body, const ParseOptions& options, const MediaLoader& load_media,
                        ChatRequest* out, ApiError* error);

// One token's logprob entry in OpenAI's shape; token_text maps ids to their text.
using TokenText = std::function<std::string(int32_t)>;
Json logprob_content(const std::vector<TokenLogprob>& logprobs, int top_logprobs, const TokenText& token_text);

struct Completion {
  std::string id;       // "chatcmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
};

// The non-streamed response for a finished request.
Json completion_json(const Completion& c, const std::string& text, const std::string& finish_reason,
                     const Json& logprobs, int prompt_tokens, int completion_tokens);
// A stream chunk: the delta (may hold "role" and/or "content"), finish_reason "" -> null, logprobs null when
// empty.
Json chunk_json(const Completion& c, const Json& delta, const std::string& finish_reason, const Json& logprobs);
// The final usage chunk (choices empty) sent when stream_options.include_usage is set.
Json usage_chunk_json(const Completion& c, int prompt_tokens, int completion_tokens);

Json models_json(const std::string& model_name, int64_t created);

// Fovea's scores on a finished choice (a response's choices[0], a stream's finish chunk's): "choice_logprobs"
// (per requested choice, in order) when the request listed choices, "answer_logprobs" ({answer: log-prob}, null
// where an answer is not one known token) when it listed answers.
void add_scores(Json* choice, const std::vector<std::string>& answers, const RequestEvent& final_event);

// Serialises for the wire. Token texts and error messages may hold invalid UTF-8 (a byte-fallback token alone,
// a client's file name): it becomes U+FFFD instead of making the response throw.
std::string dump(const Json& j);

// The error answered for a request the engine failed, from its ErrorKind: the request's own fault is 400, ours
// 500, shutdown 503. Used by the server and by `fovea run`'s OpenAI batch output.
ApiError engine_error(const RequestEvent& event);

// "stop" / "length" for OpenAI; anything else from the engine maps to "stop".
std::string finish_reason_for(const std::string& engine_reason);

}  // namespace fovea::openai
