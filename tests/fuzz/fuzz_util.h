// Shared by the fuzz targets: a private scratch directory for targets whose code under test reads files, and
// the rule that hostile input may only fail as fovea::Error (anything else escaping is a finding: abort).
#pragma once
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace fovea::fuzz {

inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("fovea-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] { std::filesystem::remove_all(scratch_dir()); });
    return d;
  }();
  return dir;
}

inline std::string write_scratch(const std::string& name, const char* data, size_t size) {
  const std::string path = (scratch_dir() / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(data, std::streamsize(size));
  return path;
}

// Runs body; fovea::Error is the expected way to refuse input. Any other exception is reported and aborts so
// libFuzzer records the input.
template <typename Body>
void expect_only_fovea_errors(Body&& body) {
  try {
    body();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unexpected exception (not fovea::Error): %s\n", e.what());
    std::abort();
  }
}

}  // namespace fovea::fuzz
