#include "image/demo_images.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace fovea {
namespace {

struct Color {
  float r, g, b;
};

Color mix(Color a, Color b, float t) { return {a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t}; }

// Cheap deterministic hash noise in [-1, 1] (film grain).
float grain(uint32_t x, uint32_t y, uint32_t seed) {
  uint32_t h = x * 374761393u + y * 668265263u + seed * 2246822519u;
  h = (h ^ (h >> 13)) * 1274126177u;
  return float(h & 0xffff) / 32767.5f - 1.0f;
}

struct Scene {
  Color sky_top, sky_bottom, ground_near, ground_far, sun, wall, roof;
  float horizon, sun_x, sun_y, sun_r, house_x, house_w, hill_phase;
};

Scene scene_for(int variant) {
  const float v = float(variant);
  Scene s;
  s.sky_top = {0.20f + 0.05f * std::sin(v), 0.35f, 0.75f - 0.05f * (variant % 3)};
  s.sky_bottom = {0.85f, 0.80f - 0.04f * (variant % 4), 0.70f};
  s.ground_far = {0.30f, 0.55f - 0.05f * (variant % 2), 0.25f};
  s.ground_near = {0.18f + 0.06f * (variant % 3), 0.32f, 0.12f};
  s.sun = {1.0f, 0.85f, 0.45f};
  s.wall = {0.80f - 0.1f * (variant % 2), 0.72f, 0.60f + 0.05f * (variant % 3)};
  s.roof = {0.55f, 0.18f + 0.05f * (variant % 2), 0.15f};
  s.horizon = 0.55f + 0.05f * std::sin(v * 1.7f);
  s.sun_x = 0.2f + 0.6f * std::fmod(v * 0.37f, 1.0f);
  s.sun_y = 0.18f + 0.05f * (variant % 3);
  s.sun_r = 0.06f;
  s.house_x = 0.15f + 0.5f * std::fmod(v * 0.61f, 1.0f);
  s.house_w = 0.22f;
  s.hill_phase = v;
  return s;
}

// Colour of the scene at normalised (u, v) ∈ [0,1]², aspect = width / height keeps circles round.
Color shade(const Scene& s, float u, float v, float aspect) {
  const float hill = s.horizon - 0.04f * std::sin(u * 6.0f + s.hill_phase) - 0.03f * std::sin(u * 13.0f);
  Color c;
  if (v < hill) {
    c = mix(s.sky_top, s.sky_bottom, v / hill);
    const float dx = (u - s.sun_x) * aspect, dy = v - s.sun_y;
    const float d = std::sqrt(dx * dx + dy * dy);
    if (d < s.sun_r) c = s.sun;
    else if (d < 2.5f * s.sun_r) c = mix(c, s.sun, 0.35f * (1.0f - (d - s.sun_r) / (1.5f * s.sun_r)));
  } else {
    c = mix(s.ground_far, s.ground_near, (v - hill) / std::max(1e-3f, 1.0f - hill));
    const float stripes = 0.04f * std::sin(u * 80.0f + v * 30.0f);  // field rows
    c = {c.r + stripes, c.g + stripes, c.b + stripes};
  }
  // A house standing on the horizon: wall rectangle, triangular roof, dark window.
  const float base = s.horizon + 0.12f, wall_top = s.horizon - 0.10f, roof_top = wall_top - 0.12f;
  const float left = s.house_x, right = s.house_x + s.house_w, mid = (left + right) / 2;
  if (u > left && u < right && v > wall_top && v < base) {
    c = s.wall;
    if (u > left + 0.04f && u < left + 0.09f && v > wall_top + 0.04f && v < wall_top + 0.10f) c = {0.15f, 0.2f, 0.3f};
  }
  const float roof_half = (s.house_w / 2 + 0.02f) * (v - roof_top) / (wall_top - roof_top);
  if (v > roof_top && v <= wall_top && std::abs(u - mid) < roof_half) c = s.roof;
  return c;
}

uint8_t to_byte(float x) { return uint8_t(std::clamp(x * 255.0f + 0.5f, 0.0f, 255.0f)); }

}  // namespace

const std::vector<DemoImageSpec>& demo_image_specs() {
  static const std::vector<DemoImageSpec> specs = {
      {"demo_01_480x360.jpg", 480, 360},   {"demo_02_800x600.jpg", 800, 600},
      {"demo_03_750x1000.jpg", 750, 1000}, {"demo_04_1920x1080.jpg", 1920, 1080},
      {"demo_05_612x464.png", 612, 464},   {"demo_06_640x480.jpg", 640, 480},
      {"demo_07_1024x768.jpg", 1024, 768}, {"demo_08_480x320.png", 480, 320},
  };
  return specs;
}

RgbImage make_demo_photo(int width, int height, int variant) {
  FOVEA_CHECK(width > 0 && height > 0 && int64_t(width) * height <= (int64_t(1) << 26), "demo photo: bad size ",
              width, "x", height);
  const Scene scene = scene_for(variant);
  RgbImage image{width, height, std::vector<uint8_t>(size_t(width) * height * 3)};
  const float aspect = float(width) / float(height);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const Color c = shade(scene, (x + 0.5f) / width, (y + 0.5f) / height, aspect);
      const float n = 0.02f * grain(uint32_t(x), uint32_t(y), uint32_t(variant));
      uint8_t* px = &image.pixels[(size_t(y) * width + x) * 3];
      px[0] = to_byte(c.r + n);
      px[1] = to_byte(c.g + n);
      px[2] = to_byte(c.b + n);
    }
  }
  return image;
}

}  // namespace fovea
