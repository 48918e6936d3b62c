// Decodes the golden input tiles (tests/data/golden/pixels.safetensors, 4-bit codes packed two per byte) into
// float32 pixel_values [T, 3, 448, 448] for the given tile indices. Header-only so the runtime's golden tests can
// include it ("../model/golden_pixels.h") while linking fovea_model. See tests/data/golden/README.md.
#pragma once
#include <string>
#include <vector>

#include "model/safetensors.h"

namespace fovea::test {

inline Tensor golden_pixel_values(const std::string& golden_dir, const std::vector<int>& tiles) {
  const SafetensorsFile file(golden_dir + "/pixels.safetensors");
  const Tensor codes = file.tensor("pixel_codes");  // U8 [tiles, 3, 448, 224]
  check_tensor(codes, DType::U8, {codes.dim(0), 3, 448, 224}, "pixel_codes");
  const int64_t per_tile = 3 * 448 * 224;
  Tensor out = Tensor::host(DType::F32, {int64_t(tiles.size()), 3, 448, 448});
  float* dst = out.ptr<float>();
  for (size_t t = 0; t < tiles.size(); ++t) {
    FOVEA_CHECK(tiles[t] >= 0 && tiles[t] < codes.dim(0), "no golden tile ", tiles[t]);
    const uint8_t* src = codes.ptr<const uint8_t>() + tiles[t] * per_tile;
    for (int64_t i = 0; i < per_tile; ++i) {  // even x in the low nibble, odd x in the high one
      *dst++ = (float(src[i] & 0x0F) - 8.0f) / 4.0f;
      *dst++ = (float(src[i] >> 4) - 8.0f) / 4.0f;
    }
  }
  return out;
}

}  // namespace fovea::test
