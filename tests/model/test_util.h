// Helpers for the model tests: raw safetensors bytes, copies of the golden checkpoints (their scratch folders are
// support/temp_dir.h's TempDir).
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/safetensors_writer.h"
#include "support/temp_dir.h"

namespace fovea::test {

namespace fs = std::filesystem;

std::string golden_dir();  // tests/data/golden in the source tree
std::string read_bytes(const std::string& path);
// 8-byte little-endian length + header + data, exactly as given (for building bad files).
std::string safetensors_bytes(const std::string& header_json, const std::string& data);

// Copies `src` checkpoint dir's json files into `dst` and rewrites its tensors through `edit` (which may drop,
// reshape or add tensors) into dst/model.safetensors.
void copy_checkpoint(const std::string& src, const std::string& dst,
                     const std::function<void(std::vector<NamedTensor>&)>& edit);

// Rewrites dst/config.json through `edit` on its text.
void edit_config(const std::string& dir, const std::function<void(std::string&)>& edit);

Tensor f32_tensor(Shape shape, float start);  // start, start+1, ... (distinct values)

// Runs `body`, expects a fovea::Error whose message contains every one of `parts`.
template <typename Body>
void expect_error(Body body, const std::vector<std::string>& parts) {
  try {
    body();
    FAIL() << "no error; expected one mentioning " << parts[0];
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const auto& p : parts) EXPECT_NE(message.find(p), std::string::npos) << "'" << p << "' not in: " << message;
  }
}

}  // namespace fovea::test
