// The exceptions Fovea throws, part of the public API. Every one is a fovea::Error (a std::runtime_error); the
// three submit refusals below have their own type so that a caller tests the type, never the wording:
//   QueueFullError    the engine's queue is at max_queue: wait for a request to finish and retry (HTTP 429)
//   NotAcceptingError the service is draining or stopped: it will take no more requests (HTTP 503)
//   EngineFailedError the engine's device failed (or no working engine is left): another engine or a restart
//                     may serve the request, which itself was fine
// Anything else submit() throws is about the request itself. Requests that fail after submit() report it on
// their final RequestEvent (error text + ErrorKind), not by exception.
#pragma once
#include <stdexcept>
#include <string>

namespace fovea {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class QueueFullError : public Error {
 public:
  using Error::Error;
};

class NotAcceptingError : public Error {
 public:
  using Error::Error;
};

class EngineFailedError : public Error {
 public:
  using Error::Error;
};

}  // namespace fovea
