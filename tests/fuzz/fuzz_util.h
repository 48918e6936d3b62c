// Shared by the fuzz targets: a private scratch directory for targets whose code under test reads files, and
// the rule that hostile input may only fail as fovea::Error (anything else escaping is a finding: abort).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/error.h"
#include "support/temp_dir.h"

namespace fovea::fuzz {

// One folder for the whole fuzzing process (inputs overwrite each other's files), removed when it exits.
inline const test::TempDir& scratch() {
  static const test::TempDir dir("fuzz");
  return dir;
}

inline const std::filesystem::path& scratch_dir() { return scratch().path(); }

inline std::string write_scratch(const std::string& name, const char* data, size_t size) {
  return scratch().write(name, std::string_view(data, size));
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
