// Damages a checkpoint in place for tests: two 0xff bytes (a BF16 NaN) in the middle of one tensor of one
// safetensors file, found by its bytes in the file.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "model/safetensors.h"

namespace fovea::test {

inline void poison_weight(const std::string& file, const std::string& tensor) {
  std::string needle;
  size_t middle = 0;
  {
    const SafetensorsFile probe(file);
    const Tensor t = probe.tensor(tensor);
    ASSERT_GE(t.nbytes(), 128u);
    needle.assign(static_cast<const char*>(t.data), 64);
    middle = t.nbytes() / 2;
  }
  std::string data;
  {
    std::ifstream in(file, std::ios::binary);
    data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t at = data.find(needle);
  ASSERT_NE(at, std::string::npos);
  std::memset(&data[at + middle], 0xff, 2);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << data;
}

}  // namespace fovea::test
