// Calibration activations for `fovea quantize`: the model runs the calibration tasks through the ordinary engine
// (CPU backend, dense weights) while an observer on the LLM projections (runtime/weights.h) copies each
// projection's input rows. Rows of fused linears serve every stored part: q/k/v share the attention input,
// gate/up the MLP input.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_desc.h"

namespace fovea {

enum class LinearInput : int { Qkv = 0, O = 1, GateUp = 2, Down = 3 };
inline constexpr int kLinearInputs = 4;
const char* linear_input_name(LinearInput kind);  // "qkv", "o", "gate_up", "down"

struct CalibrationActivations {
  std::array<int64_t, kLinearInputs> width{};  // input size of each kind
  // [layer][kind]: row-major [rows, width] float rows (at most CalibrationOptions::max_rows of them).
  std::vector<std::array<std::vector<float>, kLinearInputs>> rows;
  int64_t row_count(int layer, LinearInput kind) const {
    return int64_t(rows[size_t(layer)][size_t(kind)].size()) / width[size_t(kind)];
  }
};

struct CalibrationOptions {
  std::string source;   // a tasks JSONL file or a folder of images
  std::string prompt = "Describe this image in detail.";  // for a folder of images (and tasks without one)
  int samples = 32;     // the first N tasks
  int max_tiles = 0;    // tiles per image (0: the model's maximum)
  int64_t max_rows = 4096;  // rows kept per linear (the first ones)
};

// Runs the tasks on the CPU backend and returns every LLM layer's projection inputs. Throws when a task fails or
// nothing was recorded.
CalibrationActivations collect_calibration(const std::string& model_dir, const ModelDesc& desc,
                                           const CalibrationOptions& options);

}  // namespace fovea
