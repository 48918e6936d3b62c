// Why o_proj gets no AWQ scales: its input is attention's weighted sum of V, so a scale could only be folded into
// v_proj's rows when every query head has its own KV head (and InternLM2's fused wqkv interleaves them); AutoAWQ
// itself scales o_proj only when the shapes match. Here it is quantized round-to-nearest in every model.
// GPTQ and AWQ both see the dense model's activations (not those of already-quantized earlier layers).
#include "quantize/quantize_checkpoint.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"
#include "core/safetensors_writer.h"
#include "model/config_json.h"
#include "model/safetensors.h"
#include "quantize/llm_linears.h"
#include "quantize/quantized_config.h"
#include "quantize/w4_quantize.h"

namespace fovea {
namespace fs = std::filesystem;
namespace {

using Floats = std::vector<float>;
constexpr int64_t kAwqSearchRows = 512;  // rows the AWQ scale search scores each candidate on

class Quantizer {
 public:
  Quantizer(const QuantizeOptions& options, const SafetensorsSet& set) : opt_(options), set_(set) {}

  int linears() const { return linears_; }

  // The (possibly AWQ-folded) float values of a tensor.
  Floats values(const std::string& name) {
    const auto it = edited_.find(name);
    if (it != edited_.end()) return it->second;
    const Tensor t = set_.get(name).to_f32();
    return Floats(t.ptr<float>(), t.ptr<float>() + t.numel());
  }
  Shape shape(const std::string& name) const { return set_.get(name).shape; }

  void round_to_nearest(const std::string& prefix, bool sym) {
    const Shape s = shape(prefix + ".weight");
    const Floats w = values(prefix + ".weight");
    emit_w4(prefix, rtn_w4(w.data(), s[0], s[1], group(s[1], prefix), sym));
  }

  void gptq(const std::string& prefix, const std::vector<double>& xtx) {
    const Shape s = shape(prefix + ".weight");
    const Floats w = values(prefix + ".weight");
    emit_w4(prefix, gptq_w4(w.data(), s[0], s[1], xtx, group(s[1], prefix), opt_.act_order, true));
  }

  // AWQ over the linears sharing one input: search the scales, divide them out of the op in front (`fold`), and
  // quantize W diag(s).
  void awq(const std::vector<std::string>& prefixes, const Floats& x, int64_t width,
           const std::function<void(const Floats& s)>& fold) {
    Floats stacked;
    for (const std::string& p : prefixes) {
      const Floats w = values(p + ".weight");
      stacked.insert(stacked.end(), w.begin(), w.end());
    }
    const int64_t out = int64_t(stacked.size()) / width, rows = int64_t(x.size()) / width;
    const Floats sample = spread_rows(x, rows, width, kAwqSearchRows);
    const Floats s = awq_search_scales(stacked.data(), out, width, sample.data(), int64_t(sample.size()) / width,
                                       group(width, prefixes[0]));
    fold(s);
    for (const std::string& p : prefixes) {
      Floats w = values(p + ".weight");
      for (size_t i = 0; i < w.size(); ++i) w[i] *= s[i % size_t(width)];
      const int64_t rows_out = int64_t(w.size()) / width;
      emit_w4(p, rtn_w4(w.data(), rows_out, width, group(width, p), false));
    }
  }

  // Divides the elements of a norm weight, or the rows of a linear weight, by s.
  void divide(const std::string& name, const Floats& s) {
    Floats v = values(name);
    const size_t row = v.size() / s.size();
    FOVEA_CHECK(v.size() == row * s.size(), "AWQ: cannot fold ", s.size(), " scales into ", name);
    for (size_t i = 0; i < v.size(); ++i) v[i] /= s[i / row];
    edited_[name] = std::move(v);
  }

  void fp8(const std::string& prefix) {
    const Shape s = shape(prefix + ".weight");
    const Floats w = values(prefix + ".weight");
    Tensor codes = Tensor::host(DType::F8E4M3, s), scales = Tensor::host(DType::F32, {s[0], 1});
    for (int64_t n = 0; n < s[0]; ++n)
      scales.ptr<float>()[n] = quantize_e4m3(&w[size_t(n * s[1])], s[1], codes.ptr<uint8_t>() + n * s[1]);
    replaced_[prefix + ".weight"] = {{prefix + ".weight", codes}, {prefix + ".weight_scale", scales}};
    ++linears_;
  }

  // Every tensor of the input in its order, with quantized linears and folded ops replaced.
  std::vector<NamedTensor> output() const {
    std::vector<NamedTensor> out;
    for (const std::string& name : set_.names()) {
      const auto r = replaced_.find(name);
      if (r != replaced_.end()) {
        out.insert(out.end(), r->second.begin(), r->second.end());
        continue;
      }
      Tensor t = set_.get(name);
      const auto e = edited_.find(name);
      if (e != edited_.end()) t = from_floats(e->second, t.dtype, t.shape);
      out.push_back({name, t});
    }
    return out;
  }

 private:
  int64_t group(int64_t in, const std::string& prefix) const {
    const int64_t g = opt_.group < 0 ? in : opt_.group;
    FOVEA_CHECK(in % g == 0, prefix, ".weight: its input size ", in, " is not a multiple of --group ", g);
    return g;
  }

  void emit_w4(const std::string& prefix, const W4Codes& codes) {
    FOVEA_CHECK(codes.out % 8 == 0, prefix, ".weight: ", codes.out, " outputs, 4-bit packing needs a multiple of 8");
    const bool awq = opt_.method == QuantizeMethod::Awq;
    const PackedW4Linear p = awq ? pack_awq_codes(codes) : pack_gptq_codes(codes, true);
    std::vector<NamedTensor> tensors = {
        {prefix + ".qweight", p.qweight}, {prefix + ".qzeros", p.qzeros}, {prefix + ".scales", p.scales}};
    if (!awq) tensors.push_back({prefix + ".g_idx", p.g_idx});
    replaced_[prefix + ".weight"] = std::move(tensors);
    ++linears_;
  }

  static Floats spread_rows(const Floats& x, int64_t rows, int64_t width, int64_t keep) {
    if (rows <= keep) return x;
    Floats out;
    for (int64_t i = 0; i < keep; ++i) {
      const int64_t r = i * rows / keep;
      out.insert(out.end(), x.begin() + r * width, x.begin() + (r + 1) * width);
    }
    return out;
  }

  static Tensor from_floats(const Floats& v, DType dtype, const Shape& shape) {
    Tensor t = Tensor::host(dtype, shape);
    for (size_t i = 0; i < v.size(); ++i) {
      if (dtype == DType::BF16) t.ptr<uint16_t>()[i] = f32_to_bf16(v[i]);
      else if (dtype == DType::F16) t.ptr<uint16_t>()[i] = f32_to_f16(v[i]);
      else if (dtype == DType::F32) t.ptr<float>()[i] = v[i];
      else FOVEA_FAIL("AWQ: cannot write a folded ", dtype_name(dtype), " tensor");
    }
    return t;
  }

  const QuantizeOptions& opt_;
  const SafetensorsSet& set_;
  std::map<std::string, Floats> edited_;
  std::map<std::string, std::vector<NamedTensor>> replaced_;
  int linears_ = 0;
};

// The ViT's and the projector's linears, in the original layout (vision_model., mlp1.) and in transformers'
// -hf one ([model.]vision_tower., [model.]multi_modal_projector.).
bool is_vision_linear(const SafetensorsSet& set, const std::string& name) {
  bool vision = false;
  for (const char* prefix : {"vision_model.", "mlp1.", "vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                             "model.multi_modal_projector."})
    vision = vision || name.rfind(prefix, 0) == 0;
  const std::string suffix = ".weight";
  return vision && name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
         set.get(name).rank() == 2;
}

void quantize_layer(Quantizer& q, const QuantizeOptions& opt, const LayerLinears& L,
                    const CalibrationActivations* acts, int layer, int* done, int total,
                    const QuantizeProgress& progress) {
  // AWQ goes down first: its scales change up's rows, which gate/up's search must then see.
  static constexpr LinearInput kOrder[] = {LinearInput::Down, LinearInput::O, LinearInput::GateUp, LinearInput::Qkv};
  for (LinearInput kind : kOrder) {
    progress(*done, total, str("layer ", layer, " ", linear_input_name(kind)));
    const std::vector<std::string>& prefixes = L.by_input[size_t(kind)];
    switch (opt.method) {
      case QuantizeMethod::Rtn:
        for (const std::string& p : prefixes) q.round_to_nearest(p, true);
        break;
      case QuantizeMethod::Fp8:
        for (const std::string& p : prefixes) q.fp8(p);
        break;
      case QuantizeMethod::Gptq: {
        const int64_t width = acts->width[size_t(kind)];
        std::vector<double> xtx(static_cast<size_t>(width * width), 0.0);
        const Floats x = acts->rows(layer, kind);
        accumulate_xtx(x.data(), int64_t(x.size()) / width, width, &xtx);
        for (const std::string& p : prefixes) q.gptq(p, xtx);
        break;
      }
      case QuantizeMethod::Awq: {
        if (kind == LinearInput::O) {
          for (const std::string& p : prefixes) q.round_to_nearest(p, false);
          break;
        }
        const std::string target = kind == LinearInput::Down     ? L.up + ".weight"
                                   : kind == LinearInput::GateUp ? L.ffn_norm
                                                                 : L.attn_norm;
        q.awq(prefixes, acts->rows(layer, kind), acts->width[size_t(kind)],
              [&](const Floats& s) { q.divide(target, s); });
        break;
      }
    }
    ++*done;
  }
}

void copy_side_files(const fs::path& in, const fs::path& out) {
  for (const auto& entry : fs::directory_iterator(in)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = entry.path().filename().string();
    if (name == "config.json" || entry.path().extension() == ".safetensors" ||
        name == "model.safetensors.index.json")
      continue;
    fs::copy_file(entry.path(), out / name, fs::copy_options::overwrite_existing);
  }
}

}  // namespace

QuantizeMethod parse_quantize_method(const std::string& name) {
  if (name == "awq") return QuantizeMethod::Awq;
  if (name == "gptq") return QuantizeMethod::Gptq;
  if (name == "rtn") return QuantizeMethod::Rtn;
  if (name == "fp8") return QuantizeMethod::Fp8;
  FOVEA_FAIL("--method '", name, "' is not one of awq, gptq, rtn, fp8");
}

QuantizeSummary quantize_checkpoint(const QuantizeOptions& opt, const QuantizeProgress& progress) {
  FOVEA_CHECK(!opt.model_dir.empty() && !opt.out_dir.empty(), "quantize needs --model DIR and --out DIR");
  FOVEA_CHECK(opt.group == -1 || opt.group >= 8, "--group ", opt.group, " must be -1 or at least 8");
  const ModelDesc desc = load_model_desc(opt.model_dir);
  FOVEA_CHECK(!desc.quantization.packed() && !desc.quantization.fp8_weights, opt.model_dir,
              " is already quantized (", desc.quantization.describe(), "); quantize a bf16 / f32 checkpoint");
  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  FOVEA_CHECK(fs::is_directory(opt.out_dir), "cannot create ", opt.out_dir, ec ? ": " + ec.message() : "");
  FOVEA_CHECK(!fs::equivalent(opt.model_dir, opt.out_dir), "--out must differ from --model");

  const SafetensorsSet set(opt.model_dir);
  const std::vector<LayerLinears> layers = find_llm_linears(set, desc.llm.layers);
  QuantizeSummary summary;
  const bool calibrated = opt.method == QuantizeMethod::Awq || opt.method == QuantizeMethod::Gptq;
  CalibrationActivations acts;
  if (calibrated) {
    progress(0, 1, "calibration");
    const auto start = std::chrono::steady_clock::now();
    acts = collect_calibration(opt.model_dir, desc, opt.calibration);
    summary.seconds_calibration = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    summary.calibration_tasks = acts.tasks;
    summary.calibration_rows_kept = acts.fewest_rows_kept();
    summary.calibration_rows_seen = acts.most_rows_seen();
    summary.calibration_bytes = acts.bytes();
  }

  Quantizer q(opt, set);
  std::vector<std::string> vision;
  if (opt.include_vision)
    for (const std::string& name : set.names())
      if (is_vision_linear(set, name)) vision.push_back(name.substr(0, name.size() - 7));
  const int total = int(layers.size()) * kLinearInputs + int(vision.size());
  int done = 0;
  for (int l = 0; l < int(layers.size()); ++l)
    quantize_layer(q, opt, layers[size_t(l)], calibrated ? &acts : nullptr, l, &done, total, progress);
  for (const std::string& p : vision) {  // no calibration rows for these: round-to-nearest / FP8
    progress(done, total, p);
    if (opt.method == QuantizeMethod::Fp8) q.fp8(p);
    else q.round_to_nearest(p, opt.method != QuantizeMethod::Awq);
    ++done;
  }
  progress(done, total, "writing");
  const fs::path out(opt.out_dir);
  copy_side_files(opt.model_dir, out);
  write_safetensors((out / "model.safetensors").string(), q.output(), {{"format", "pt"}});
  // The LLM's decoder layers: GPTQ loaders quantize the linears of these blocks only, and they compare the name
  // with module paths, not tensor names. An -hf checkpoint with the legacy tensor names
  // ("language_model.model.layers.*") is renamed on load by transformers >= 4.52 to its module path
  // "model.language_model.layers.*"; given the tensor prefix, transformers converted nothing and reported every
  // packed tensor missing. The original layout's module path is its tensor prefix.
  const std::string& first = layers.at(0).by_input[0].at(0);
  const size_t at = first.find(".layers.");
  std::string blocks = at == std::string::npos ? std::string() : first.substr(0, at + 7);
  const std::vector<std::string> names = set.names();
  const bool hf_layout = std::any_of(names.begin(), names.end(), [](const std::string& n) {
    return n.find("vision_tower.") != std::string::npos || n.find("multi_modal_projector.") != std::string::npos;
  });
  if (hf_layout && blocks == "language_model.model.layers") blocks = "model.language_model.layers";
  summary.config_source =
      write_quantized_config(opt, fs::path(opt.model_dir) / "config.json", out / "config.json", blocks);
  summary.linears = q.linears();
  progress(total, total, "done");
  return summary;
}

}  // namespace fovea
