#include "quantize/calibration.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
#include <mutex>

#include "core/error.h"
#include "engine/service.h"
#include "jobs/batch_job.h"
#include "jobs/batch_tasks.h"
#include "runtime/weights.h"

namespace fovea {
namespace fs = std::filesystem;
namespace {

// The LLM forward calls its projections in the order qkv, o, gate_up, down per layer (the MLP may repeat
// gate_up/down over row slices with the same weights), so the n-th new weight seen is layer n / 4's kind n % 4.
struct Recorder {
  const LlmConfig& llm;
  CalibrationActivations acts;
  std::map<const void*, std::pair<int, int>> linear_of;  // weight data -> (layer, kind)
  std::mutex mutex;
  std::string error;

  void record(const Tensor& weight, const Tensor& input) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!error.empty()) return;
    if (weight.empty() || input.device != Device::CPU) {
      error = "calibration needs dense weights on the CPU backend";
      return;
    }
    auto it = linear_of.find(weight.data);
    if (it == linear_of.end()) {
      const int n = int(linear_of.size());
      it = linear_of.emplace(weight.data, std::make_pair(n / kLinearInputs, n % kLinearInputs)).first;
    }
    const auto [layer, kind] = it->second;
    if (layer >= llm.layers || weight.dim(1) != acts.width[size_t(kind)] || input.dim(-1) != weight.dim(1)) {
      error = str("calibration: projection call ", linear_of.size(), " (weight ", shape_str(weight.shape),
                  ") does not fit layer ", layer, "'s ", linear_input_name(LinearInput(kind)));
      return;
    }
    const Tensor f32 = input.to_f32();
    acts.samples[size_t(layer)][size_t(kind)].add(f32.ptr<float>(), f32.numel() / weight.dim(1));
  }
};

void observe(void* context, const Tensor& weight, const Tensor& input) {
  static_cast<Recorder*>(context)->record(weight, input);
}

struct ObserverScope {
  explicit ObserverScope(Recorder* r) { set_linear_input_observer(&observe, r); }
  ~ObserverScope() { set_linear_input_observer(nullptr, nullptr); }
};

// The first error record of a results file ("" when none), for the message that stops the calibration.
std::string first_failure(const fs::path& results) {
  std::ifstream in(results);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
    if (record.is_object() && record.contains("error"))
      return str(record.value("id", nlohmann::json()).dump(), ": ", record["error"].dump());
  }
  return "";
}

}  // namespace

int64_t CalibrationActivations::fewest_rows_kept() const {
  int64_t fewest = -1;
  for (const auto& layer : samples)
    for (const RowSampler& s : layer) fewest = fewest < 0 ? s.kept() : std::min(fewest, s.kept());
  return std::max<int64_t>(fewest, 0);
}

int64_t CalibrationActivations::most_rows_seen() const {
  int64_t most = 0;
  for (const auto& layer : samples)
    for (const RowSampler& s : layer) most = std::max(most, s.seen());
  return most;
}

size_t CalibrationActivations::bytes() const {
  size_t total = 0;
  for (const auto& layer : samples)
    for (const RowSampler& s : layer) total += s.bytes();
  return total;
}

const char* linear_input_name(LinearInput kind) {
  static const char* const names[kLinearInputs] = {"qkv", "o", "gate_up", "down"};
  return names[int(kind)];
}

CalibrationActivations collect_calibration(const std::string& model_dir, const ModelDesc& desc,
                                           const CalibrationOptions& options) {
  FOVEA_CHECK(!options.source.empty(), "calibration data is required (--calib TASKS.jsonl or an image folder)");
  FOVEA_CHECK(fs::exists(options.source), "calibration data ", options.source, " does not exist");
  TaskDefaults defaults;
  defaults.prompt = options.prompt;
  TaskList tasks = fs::is_directory(options.source) ? tasks_from_image_dir(options.source, defaults)
                                                    : read_tasks_jsonl(options.source, defaults);
  FOVEA_CHECK(!tasks.tasks.empty(), "calibration data ", options.source, " holds no tasks");
  if (int64_t(tasks.tasks.size()) > options.samples) tasks.tasks.resize(size_t(std::max(options.samples, 1)));

  const LlmConfig& l = desc.llm;
  FOVEA_CHECK(options.max_rows >= 1, "--calib-rows must be at least 1");
  Recorder recorder{l, {}, {}, {}, {}};
  recorder.acts.width = {l.hidden, int64_t(l.heads) * l.head_dim, l.hidden, l.ffn};
  recorder.acts.tasks = int(tasks.tasks.size());
  recorder.acts.samples.resize(size_t(l.layers));
  for (auto& layer : recorder.acts.samples)
    for (int kind = 0; kind < kLinearInputs; ++kind)
      layer[size_t(kind)] = RowSampler(options.max_rows, recorder.acts.width[size_t(kind)]);

  EngineConfig config;
  config.model_dir = model_dir;
  config.backend = "cpu";
  config.prefix_cache = false;  // every prompt row goes through every layer
  config.w4 = "dequantize";
  const fs::path results = fs::temp_directory_path() / str("fovea_calibration_", ::getpid(), ".jsonl");
  fs::remove(results);
  BatchJobSummary summary;
  {
    ObserverScope scope(&recorder);
    auto service = make_engine_service(config);
    BatchJobOptions job;
    job.progress = false;
    job.max_tiles = options.max_tiles;
    summary = run_batch_job(*service, tasks, results.string(), job);
    service->drain();
  }
  const std::string first_error = first_failure(results);
  fs::remove(results);
  FOVEA_CHECK(recorder.error.empty(), recorder.error);
  FOVEA_CHECK(!summary.any_failed(), summary.failed, " of ", tasks.tasks.size(), " calibration tasks failed; first: ",
              first_error);
  for (int layer = 0; layer < l.layers; ++layer)
    for (int kind = 0; kind < kLinearInputs; ++kind)
      FOVEA_CHECK(recorder.acts.row_count(layer, LinearInput(kind)) > 0, "calibration recorded no input for layer ",
                  layer, "'s ", linear_input_name(LinearInput(kind)));
  return std::move(recorder.acts);
}

}  // namespace fovea
