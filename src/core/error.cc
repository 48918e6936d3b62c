#include "core/error.h"

#include <cstring>

namespace fovea {

void throw_error(const char* file, int line, const std::string& message) {
  const char* base = std::strrchr(file, '/');
  throw Error(str(base ? base + 1 : file, ":", line, ": ", message));
}

}  // namespace fovea
