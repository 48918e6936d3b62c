#include "core/safetensors_writer.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

namespace fovea {

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    FOVEA_CHECK(t.device == Device::CPU, "write_safetensors: ", name, " is not a host tensor");
    header[name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8) text += ' ';  // align the data section to 8 bytes, as the reference writer does
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), std::fclose);
  FOVEA_CHECK(f, "cannot write ", path);
  uint64_t n = text.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = (n >> (8 * i)) & 0xff;
  bool ok = std::fwrite(len, 1, 8, f.get()) == 8 && std::fwrite(text.data(), 1, n, f.get()) == n;
  for (const auto& nt : tensors) ok = ok && std::fwrite(nt.tensor.data, 1, nt.tensor.nbytes(), f.get()) == nt.tensor.nbytes();
  FOVEA_CHECK(ok, "short write to ", path);
}

}  // namespace fovea
