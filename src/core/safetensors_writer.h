// Writes a safetensors file: 8-byte little-endian header length, JSON header, then the tensor bytes.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace fovea {

struct NamedTensor {
  std::string name;
  Tensor tensor;  // host tensor
};

// Tensors are written in the given order; metadata goes under "__metadata__" (string values only).
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace fovea
