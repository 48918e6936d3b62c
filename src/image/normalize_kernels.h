// ImageNet normalisation of interleaved RGB bytes into three float planes, with torchvision's float32
// operations in its order: (v / 255 - mean) / std. The same source is compiled twice (plain and -mavx2, see
// normalize_avx2.cc); IEEE division and subtraction are exact-rounded in both, so the outputs are identical.
#pragma once
#include <cstddef>
#include <cstdint>

namespace fovea::normalize_kernels {

struct ChannelConstants {
  float mean[3];
  float std_dev[3];
};

// ImageNet's mean and std, as InternVL's reference normalises with them. The one source for the host pipeline
// (normalize_tiles) and the device path (Backend::normalize_pixels, called by the vision encoder).
inline constexpr ChannelConstants kImageNet{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};

inline void normalize_pixels_generic(const uint8_t* rgb, size_t pixels, const ChannelConstants& k, float* r,
                                     float* g, float* b) {
  const float m0 = k.mean[0], m1 = k.mean[1], m2 = k.mean[2];
  const float s0 = k.std_dev[0], s1 = k.std_dev[1], s2 = k.std_dev[2];
  for (size_t i = 0; i < pixels; ++i) {
    r[i] = (float(rgb[3 * i]) / 255.0f - m0) / s0;
    g[i] = (float(rgb[3 * i + 1]) / 255.0f - m1) / s1;
    b[i] = (float(rgb[3 * i + 2]) / 255.0f - m2) / s2;
  }
}

void normalize_pixels_avx2(const uint8_t* rgb, size_t pixels, const ChannelConstants& k, float* r, float* g,
                           float* b);

}  // namespace fovea::normalize_kernels
