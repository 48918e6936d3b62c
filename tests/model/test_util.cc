#include "test_util.h"

#include <fstream>
#include <sstream>

#include "model/safetensors.h"

namespace fovea::test {

std::string golden_dir() { return std::string(FOVEA_SOURCE_DIR) + "/tests/data/golden"; }

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string safetensors_bytes(const std::string& header_json, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header_json.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return out + header_json + data;
}

void copy_checkpoint(const std::string& src, const std::string& dst,
                     const std::function<void(std::vector<NamedTensor>&)>& edit) {
  fs::create_directories(dst);
  for (const auto& entry : fs::directory_iterator(src))
    if (entry.path().extension() == ".json") fs::copy_file(entry.path(), fs::path(dst) / entry.path().filename());
  const SafetensorsFile file(src + "/model.safetensors");
  std::vector<NamedTensor> tensors;
  for (const auto& name : file.names()) tensors.push_back({name, file.tensor(name)});
  edit(tensors);
  write_safetensors(dst + "/model.safetensors", tensors);
}

void edit_config(const std::string& dir, const std::function<void(std::string&)>& edit) {
  std::string text = read_bytes(dir + "/config.json");
  edit(text);
  std::ofstream(dir + "/config.json", std::ios::binary | std::ios::trunc) << text;
}

Tensor f32_tensor(Shape shape, float start) {
  Tensor t = Tensor::host(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = start + float(i);
  return t;
}

}  // namespace fovea::test
