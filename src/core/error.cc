#include "core/error.h"

#include <cstring>

namespace fovea {

namespace {
std::string located(const char* file, int line, const std::string& message) {
  const char* base = std::strrchr(file, '/');
  return str(base ? base + 1 : file, ":", line, ": ", message);
}
}  // namespace

void throw_error(const char* file, int line, const std::string& message) { throw Error(located(file, line, message)); }

void throw_request_error(ErrorKind kind, const char* file, int line, const std::string& message) {
  throw RequestError(kind, located(file, line, message));
}

}  // namespace fovea
