// Synthetic "photos" for the quick start and tests: smooth sky/ground gradients, a sun, hills, a house and
// some boxes, with a little grain, so the pictures look like scenes (not noise) and compress like photos.
#pragma once
#include <string>
#include <vector>

#include "image/preprocess.h"

namespace fovea {

struct DemoImageSpec {
  std::string name;  // file name, its extension picks the encoder (.jpg or .png)
  int width;
  int height;
};

// The quick start's set: 8 images over the listing-photo sizes (480×360 … 1920×1080), JPEG and PNG.
const std::vector<DemoImageSpec>& demo_image_specs();

// A deterministic scene of the given size; `variant` changes colours and layout.
RgbImage make_demo_photo(int width, int height, int variant);

}  // namespace fovea
