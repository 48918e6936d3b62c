// A .safetensors file: header JSON, dtypes, shapes and offsets against the file size; every tensor read back.
#include <cstdint>

#include "fuzz_util.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fovea::fuzz::write_scratch("model.safetensors", reinterpret_cast<const char*>(data), size);
  fovea::fuzz::expect_only_fovea_errors([&] {
    const fovea::SafetensorsFile file(path);
    for (const std::string& name : file.names()) {
      const fovea::Tensor t = file.tensor(name);
      volatile uint8_t sink = 0;  // touch the first and last byte: the mapping must hold them
      if (t.nbytes()) sink = static_cast<const uint8_t*>(t.data)[0] ^ static_cast<const uint8_t*>(t.data)[t.nbytes() - 1];
      (void)sink;
    }
  });
  return 0;
}
