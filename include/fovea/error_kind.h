// Why a request failed: its own input (the caller should not retry it as it is) or the engine (it may succeed
// later or elsewhere). Set on the final RequestEvent of a failed request; the server maps it to an HTTP status
// and an OpenAI error code, the Python Result carries its name. Part of the public API.
#pragma once

namespace fovea {

enum class ErrorKind {
  None = 0,
  InvalidRequest,  // a bad parameter, prompt or answer list
  InvalidImage,    // an image that cannot be read, decoded or fetched, or has too many tiles
  ContextLength,   // prompt (+ max_tokens) beyond the model's context or the KV pool
  EngineFailed,    // the engine's device failed; another engine (or a restart) may serve it
  Internal,        // anything else on our side
};

// "invalid_request", "invalid_image", "context_length_exceeded", "engine_failed", "internal", "" for None.
inline const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidRequest: return "invalid_request";
    case ErrorKind::InvalidImage: return "invalid_image";
    case ErrorKind::ContextLength: return "context_length_exceeded";
    case ErrorKind::EngineFailed: return "engine_failed";
    case ErrorKind::Internal: return "internal";
    case ErrorKind::None: break;
  }
  return "";
}

// The request's own fault: retrying it unchanged fails the same way (HTTP 400).
inline bool is_client_error(ErrorKind kind) {
  return kind == ErrorKind::InvalidRequest || kind == ErrorKind::InvalidImage || kind == ErrorKind::ContextLength;
}

}  // namespace fovea
