#include <string>

#include "engine/service.h"

namespace fovea {

bool is_queue_full_error(const std::exception& e) {
  return std::string(e.what()).find("queue full") != std::string::npos;
}

bool is_engine_failure_error(const std::string& message) {
  return message.find(kEngineFailedPrefix) != std::string::npos;
}

}  // namespace fovea
