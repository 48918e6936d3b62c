// The normalisation loop compiled with -mavx2 (auto-vectorised; called after a runtime CPU check).
#include "image/normalize_kernels.h"

namespace fovea::normalize_kernels {

void normalize_pixels_avx2(const uint8_t* rgb, size_t pixels, const ChannelConstants& k, float* r, float* g,
                           float* b) {
  normalize_pixels_generic(rgb, pixels, k, r, g, b);
}

}  // namespace fovea::normalize_kernels
