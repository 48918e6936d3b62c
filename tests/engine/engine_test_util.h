// Helpers for engine tests: a temporary demo model directory, BMP files made in memory, and a collector that
// records every request's events and waits for the final ones.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "support/temp_dir.h"

namespace fovea::test {

// A temporary folder holding the demo model (config, weights, tokenizer), removed on destruction.
class DemoModelDir {
 public:
  DemoModelDir();
  const std::string& path() const { return path_; }

 private:
  TempDir dir_{"engine_test"};
  std::string path_ = dir_.string();
};

// A 24-bit BMP of width x height whose pixels are a pattern chosen by `seed` (different seeds: different images).
std::string make_bmp(int width, int height, uint32_t seed);

struct Collected {
  std::vector<int32_t> tokens;
  std::string text;
  int events = 0;
  int finals = 0;
  RequestEvent last;
};

class Collector {
 public:
  RequestCallback callback_for(const std::string& name);
  // Waits (up to 60 s) until `count` requests have had their final event.
  bool wait_finals(int count);
  Collected get(const std::string& name);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, Collected> by_name_;
  int finals_ = 0;
};

}  // namespace fovea::test
