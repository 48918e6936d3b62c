// Errors inside the library are exceptions carrying file:line; they are caught
// at the request boundary (one bad request fails alone) or at the top of a
// command (one-line message, non-zero exit). fovea::Error and the typed submit
// refusals are public (include/fovea/error.h); the classes here are internal.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

#include "fovea/error.h"
#include "fovea/error_kind.h"

namespace fovea {

// The device itself failed (a CUDA error, device memory exhausted): the engine
// that owns it cannot go on. The scheduler lets it through instead of failing
// one step's requests; the engine then fails everything it holds and takes no
// more requests, and a data-parallel dispatcher routes around it.
class DeviceError : public Error {
public:
  using Error::Error;
};

// A request's input is at fault (a bad parameter, image or length): it fails
// that request alone, and its kind says how (a 400 and which OpenAI code, in
// the server). Other errors met while serving a request count as ours.
class RequestError : public Error {
public:
  RequestError(ErrorKind kind, const std::string &message)
      : Error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

private:
  ErrorKind kind_;
};

// Joins any streamable values into one string: str("tensor ", name, " has ", n,
// " dims").
template <typename... Args> std::string str(const Args &...args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

// What a client (an HTTP response, a results record, a Python Result) is told
// about a failure: the message without the file:line prefixes that FOVEA_CHECK
// adds for logs (wherever they appear in it), cut to about 1 KiB on a UTF-8
// character boundary with the full size named. Every door applies it where an
// error leaves Fovea.
std::string client_error_text(const std::string &message);

// `text` when it is at most max_bytes long, else its first max_bytes (never
// half a UTF-8 character) followed by "… (N bytes)": for echoing a client's
// value (a choice, a path, a role) in a message without echoing megabytes.
std::string excerpt(const std::string &text, size_t max_bytes = 64);

[[noreturn]] void throw_error(const char *file, int line,
                              const std::string &message);
[[noreturn]] void throw_request_error(ErrorKind kind, const char *file,
                                      int line, const std::string &message);

} // namespace fovea

// FOVEA_CHECK(cond, "what", value, ...) throws fovea::Error("file:line: what
// value...") when cond is false.
#define FOVEA_CHECK(cond, ...)                                                 \
  do {                                                                         \
    if (!(cond))                                                               \
      ::fovea::throw_error(__FILE__, __LINE__, ::fovea::str(__VA_ARGS__));     \
  } while (0)
#define FOVEA_FAIL(...)                                                        \
  ::fovea::throw_error(__FILE__, __LINE__, ::fovea::str(__VA_ARGS__))
// FOVEA_REQUEST_FAIL(ErrorKind::InvalidImage, "what", ...) throws a
// fovea::RequestError of that kind.
#define FOVEA_REQUEST_FAIL(kind, ...)                                          \
  ::fovea::throw_request_error(kind, __FILE__, __LINE__,                       \
                               ::fovea::str(__VA_ARGS__))
