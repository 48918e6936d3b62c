#include "engine_test_util.h"

#include <chrono>

#include "model/demo_model.h"

namespace fovea::test {

DemoModelDir::DemoModelDir() { write_demo_model(path_); }

std::string make_bmp(int width, int height, uint32_t seed) {
  const int row_bytes = (width * 3 + 3) / 4 * 4;
  const uint32_t pixel_bytes = uint32_t(row_bytes * height);
  std::string out;
  auto put16 = [&](uint32_t v) { out += char(v & 0xff), out += char((v >> 8) & 0xff); };
  auto put32 = [&](uint32_t v) { put16(v & 0xffff), put16(v >> 16); };
  out += "BM";
  put32(54 + pixel_bytes);
  put32(0);
  put32(54);
  put32(40);  // BITMAPINFOHEADER
  put32(uint32_t(width));
  put32(uint32_t(height));
  put16(1);
  put16(24);
  put32(0);  // BI_RGB
  put32(pixel_bytes);
  put32(2835);
  put32(2835);
  put32(0);
  put32(0);
  uint32_t state = seed * 2654435761u + 12345u;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width * 3; ++x) {
      state = state * 1664525u + 1013904223u;
      out += char((state >> 24) & 0xff);
    }
    out.append(size_t(row_bytes - width * 3), '\0');
  }
  return out;
}

RequestCallback Collector::callback_for(const std::string& name) {
  return [this, name](const RequestEvent& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    Collected& c = by_name_[name];
    c.tokens.insert(c.tokens.end(), e.token_delta.begin(), e.token_delta.end());
    c.text += e.text_delta;
    ++c.events;
    if (e.finished) {
      ++c.finals;
      c.last = e;
      ++finals_;
      cv_.notify_all();
    }
  };
}

bool Collector::wait_finals(int count) {
  std::unique_lock<std::mutex> lock(mutex_);
  return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return finals_ >= count; });
}

Collected Collector::get(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  return by_name_[name];
}

}  // namespace fovea::test
