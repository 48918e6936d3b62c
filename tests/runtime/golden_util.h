// Shared by the runtime's golden tests: locating tests/data/golden, decoding its packed pixels, reading the
// reference tensors, and the relative-error metric ||a - b|| / ||b||.
#pragma once
#include <string>
#include <vector>

#include "core/tensor.h"

namespace fovea::golden {

// $FOVEA_GOLDEN_DIR when set, else the source tree's tests/data/golden, else ./tests/data/golden; "" when none
// holds the goldens.
std::string golden_dir();
bool available();

// The four reference tiles [4, 3, 448, 448] F32, decoded from pixels.safetensors.
Tensor all_tiles();
// Tiles `which` of all_tiles(), stacked into one host tensor [which.size(), 3, 448, 448].
Tensor select_tiles(const Tensor& tiles, const std::vector<int>& which);

// A float32 or int32 host copy of `<case>.<what>` in `<model>/reference.safetensors`.
Tensor reference(const std::string& model, const std::string& name);
std::vector<int32_t> reference_ids(const std::string& model, const std::string& name);

double relative_error(const float* got, const float* want, int64_t n);
double relative_error(const Tensor& got, const Tensor& want);

}  // namespace fovea::golden
