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
#include "quantize/row_sampler.h"

namespace fovea {

enum class LinearInput : int { Qkv = 0, O = 1, GateUp = 2, Down = 3 };
inline constexpr int kLinearInputs = 4;
const char* linear_input_name(LinearInput kind);  // "qkv", "o", "gate_up", "down"

struct CalibrationActivations {
  std::array<int64_t, kLinearInputs> width{};  // input size of each kind
  int tasks = 0;                                // calibration tasks run
  // [layer][kind]: a sample of at most CalibrationOptions::max_rows of the input rows, drawn from every task.
  std::vector<std::array<RowSampler, kLinearInputs>> samples;
  int64_t row_count(int layer, LinearInput kind) const { return sampler(layer, kind).kept(); }
  // Row-major [rows, width] f32, made when asked (the samples hold bf16).
  std::vector<float> rows(int layer, LinearInput kind) const { return sampler(layer, kind).rows_f32(); }
  const RowSampler& sampler(int layer, LinearInput kind) const { return samples[size_t(layer)][size_t(kind)]; }
  int64_t fewest_rows_kept() const;  // over every linear: the effective calibration size
  int64_t most_rows_seen() const;
  size_t bytes() const;
};

struct CalibrationOptions {
  std::string source;   // a tasks JSONL file or a folder of images
  std::string prompt = "Describe this image in detail.";  // for a folder of images (and tasks without one)
  int samples = 32;     // the first N tasks
  int max_tiles = 0;    // tiles per image (0: the model's maximum)
  // Input rows kept per linear (--calib-rows), sampled evenly from all the tasks' rows. 8192 bf16 rows take the
  // memory 4096 f32 rows did (InternVL2-8B: ~13 GiB over its 32 layers); a 13-tile image gives ~3,300 rows.
  int64_t max_rows = 8192;
};

// Runs the tasks on the CPU backend and returns every LLM layer's projection inputs. Throws when a task fails or
// nothing was recorded.
CalibrationActivations collect_calibration(const std::string& model_dir, const ModelDesc& desc,
                                           const CalibrationOptions& options);

}  // namespace fovea
