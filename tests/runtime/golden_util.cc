#include "golden_util.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "model/safetensors.h"

namespace fovea::golden {

std::string golden_dir() {
  // A binary carried to another machine (the GPU runs) no longer sits in the tree it was built from: there it
  // finds the goldens under the working directory, or where FOVEA_GOLDEN_DIR says.
  const auto holds = [](const std::string& dir) { return std::filesystem::exists(dir + "/pixels.safetensors"); };
  if (const char* env = std::getenv("FOVEA_GOLDEN_DIR"); env != nullptr && *env != '\0') return holds(env) ? env : "";
  const std::string in_source = std::string(FOVEA_SOURCE_DIR) + "/tests/data/golden";
  for (const std::string& dir : {in_source, std::string("tests/data/golden")})
    if (holds(dir)) return dir;
  return "";
}

bool available() { return !golden_dir().empty(); }

Tensor all_tiles() {
  SafetensorsFile file(golden_dir() + "/pixels.safetensors");
  const Tensor codes = file.tensor("pixel_codes");  // U8 [4, 3, 448, 224], two 4-bit codes per byte
  const int64_t tiles = codes.dim(0), rows = codes.dim(2), packed = codes.dim(3);
  Tensor out = Tensor::host(DType::F32, {tiles, 3, rows, 2 * packed});
  const uint8_t* in = codes.ptr<uint8_t>();
  float* px = out.ptr<float>();
  for (int64_t i = 0; i < codes.numel(); ++i) {
    px[2 * i] = float(int(in[i] & 0x0F) - 8) / 4.0f;
    px[2 * i + 1] = float(int(in[i] >> 4) - 8) / 4.0f;
  }
  return out;
}

Tensor select_tiles(const Tensor& tiles, const std::vector<int>& which) {
  const int64_t per_tile = tiles.numel() / tiles.dim(0);
  Tensor out = Tensor::host(DType::F32, {int64_t(which.size()), tiles.dim(1), tiles.dim(2), tiles.dim(3)});
  for (size_t i = 0; i < which.size(); ++i)
    std::memcpy(out.ptr<float>() + int64_t(i) * per_tile, tiles.ptr<float>() + which[i] * per_tile,
                size_t(per_tile) * sizeof(float));
  return out;
}

Tensor reference(const std::string& model, const std::string& name) {
  SafetensorsFile file(golden_dir() + "/" + model + "/reference.safetensors");
  const Tensor t = file.tensor(name);
  if (t.dtype == DType::I32) {
    Tensor copy = Tensor::host(DType::I32, t.shape);
    std::memcpy(copy.data, t.data, t.nbytes());
    return copy;
  }
  return t.to_f32();
}

std::vector<int32_t> reference_ids(const std::string& model, const std::string& name) {
  const Tensor t = reference(model, name);
  return std::vector<int32_t>(t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel());
}

double relative_error(const float* got, const float* want, int64_t n) {
  double diff = 0.0, norm = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

double relative_error(const Tensor& got, const Tensor& want) {
  if (got.numel() != want.numel()) return INFINITY;
  return relative_error(got.ptr<float>(), want.ptr<float>(), want.numel());
}

}  // namespace fovea::golden
