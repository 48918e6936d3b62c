// Encoders for what Fovea writes itself: the demo photos (JPEG/PNG) and `fovea inspect`'s grid overlay (PNG).
#pragma once
#include <string>

#include "image/preprocess.h"

namespace fovea {

void write_jpeg(const std::string& path, const RgbImage& image, int quality = 88);
void write_png(const std::string& path, const RgbImage& image);

}  // namespace fovea
