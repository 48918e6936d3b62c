#include "backend/backend.h"

namespace fovea {

std::unique_ptr<Backend> make_backend(const std::string& name, int device_index) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "cuda") return make_cuda_backend(device_index);
  if (name == "auto" || name.empty()) return cuda_backend_available() ? make_cuda_backend(device_index) : make_cpu_backend();
  FOVEA_FAIL("unknown backend '", name, "' (cpu, cuda or auto)");
}

}  // namespace fovea
