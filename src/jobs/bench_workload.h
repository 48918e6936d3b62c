// Workloads for `fovea bench`: the images of a directory as they are, or the listing-photo mix of
// docs (PERF.md): real photos cropped to the aspect of, then resized to, a classifieds resolution mix, saved as
// JPEG quality 88. Generated in C++ (image module decoder and Pillow-exact resampler, libjpeg encoder) so the
// product needs no Python.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "image/preprocess.h"

namespace fovea {

struct WorkloadImage {
  std::string label;  // file name, or "photo.jpg@640x480"
  std::string bytes;  // encoded image
  int width = 0;      // 0 when not known (directory images are not decoded here)
  int height = 0;
};

struct Resolution {
  int width;
  int height;
  double share;  // fraction of the mix
};

// The mix of PERF.md: 480×360 25%, 640×480 15%, 800×600 20%, 1024×768 10%, 750×1000 10%, 1080×1440 10%,
// 1920×1080 5%, 612×464 5%.
const std::vector<Resolution>& listing_resolution_mix();

// Request i gets the resolution whose cumulative share first exceeds (i + 0.5) / count after a seeded shuffle,
// so any count follows the mix as closely as integers allow and the order is mixed.
std::vector<Resolution> resolutions_for(int count, uint64_t seed);

// Center crop of `in` to the aspect ratio width:height.
RgbImage crop_to_aspect(const RgbImage& in, int width, int height);

// Baseline JPEG, 4:2:0 chroma subsampling (as Pillow saves by default), the given quality.
std::string encode_jpeg(const RgbImage& image, int quality);

// Photos (any decodable files of `photo_dir`, sorted) cycled over `count` requests at the resolution mix.
std::vector<WorkloadImage> listing_photo_workload(const std::string& photo_dir, int count, uint64_t seed,
                                                  int jpeg_quality = 88);

// Regular, non-hidden files of `dir`, sorted by name, cycled up to `count` (count 0: each once).
std::vector<WorkloadImage> directory_workload(const std::string& dir, int count);

}  // namespace fovea
