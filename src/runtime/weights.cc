#include "runtime/weights.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "backend/w4_layout.h"

namespace fovea {
namespace {

// Allocates canonical weights on the backend and has the source fill them, each once: tensors stored once under
// two names (a tied lm_head) share the device copy.
class WeightUploader {
 public:
  WeightUploader(WeightSource& source, Backend& backend, Fp8Scaling fp8_scaling)
      : source_(source), backend_(backend), fp8_scaling_(fp8_scaling) {}

  // `shape` is what the forward expects (the source may store extra leading 1-dims; numel must match).
  Tensor get(const std::string& name, const Shape& shape) {
    FOVEA_CHECK(source_.has(name), "model has no weight ", name);
    const void* key = source_.storage_key(name);
    if (key != nullptr) {
      auto found = uploaded_.find(key);
      if (found != uploaded_.end() && found->second.numel() == shape_numel(shape)) {
        shared_.insert(found->second.data);
        return found->second.view(shape);
      }
    }
    Tensor device = backend_.alloc(backend_.weight_dtype(), shape);
    source_.write_dense(name, device, backend_);
    bytes_ += device.nbytes();
    if (key != nullptr) uploaded_[key] = device;
    return device;
  }

  // The weight as E4M3 codes with the recipe's scales (backend/fp8_recipe.h).
  Fp8Linear get_fp8(const std::string& name, const Shape& shape) {
    FOVEA_CHECK(shape.size() == 2 && shape[1] % 16 == 0 && shape[0] % 8 == 0, "fp8 quantization of ", name, " ",
                shape_str(shape), ": needs K (input width) a multiple of 16 and N a multiple of 8");
    FOVEA_CHECK(source_.has(name), "model has no weight ", name);
    Fp8Linear q{backend_.alloc(DType::F8E4M3, shape),
                backend_.alloc(DType::F32, fp8_weight_scale_shape(fp8_scaling_, shape[0], shape[1])), fp8_scaling_};
    source_.write_fp8(name, q, backend_);
    bytes_ += q.codes.nbytes() + q.scale.nbytes();
    return q;
  }

  bool has_w4(const std::string& linear) const { return source_.has_w4(linear); }

  // The 4-bit weight "<linear>.w4.*" of a linear whose dense shape is `shape` [N, K], uploaded packed.
  W4Linear get_w4(const std::string& linear, const Shape& shape) {
    const int64_t n = shape[0], k = shape[1];
    const W4Info info = source_.w4_info(linear, shape);
    FOVEA_CHECK(info.group > 0 && k % info.group == 0, "weight ", linear, ": 4-bit group ", info.group,
                " does not divide the input width ", k);
    W4Linear w;
    w.weight.k = k;
    w.weight.group = info.group;
    w.weight.codes = alloc_w4({n, w4::code_words(k)});
    w.weight.params = alloc_w4({n, k / info.group});
    if (info.permuted) {
      w.weight.perm = alloc_w4({k});
      w.weight.inverse_perm = alloc_w4({k});
    }
    source_.write_w4(linear, w.weight, backend_);
    w4::check_weight(w.weight, backend_.device(), linear.c_str());
    w4_.linears += 1;
    w4_.bf16_bytes += size_t(n * k) * 2;
    w4_workspace_ = std::max(w4_workspace_, backend_.linear_w4_workspace_bytes(n, k, w.weight.group,
                                                                               !w.weight.perm.empty()));
    return w;
  }

  // One workspace for every W4 linear handed out so far (none when the backend needs none).
  Tensor w4_workspace() {
    if (w4_workspace_ == 0) return {};
    w4_.workspace = w4_workspace_;
    return backend_.alloc(DType::U8, {int64_t(w4_workspace_)});
  }
  const W4Summary& w4() const { return w4_; }

  // weight's rows *= scale (Backend::scale_rows), `name` its canonical name. A folded tensor is never handed out
  // again: a later name stored with it (another layer's, say) gets an upload of its own. Folding right after its
  // layer's gets, nothing else can have been handed it: a name that was is refused rather than scaled with it.
  void fold_scale(const std::string& name, Tensor& weight, const Tensor& scale) {
    FOVEA_CHECK(!shared_.count(weight.data), "weight ", name,
                " is stored with a tensor loaded before it; a layer scale cannot be folded into it");
    for (auto it = uploaded_.begin(); it != uploaded_.end();)
      it = it->second.data == weight.data ? uploaded_.erase(it) : std::next(it);
    backend_.scale_rows(weight, scale);
  }

  Tensor get_optional(const std::string& name, const Shape& shape) {
    return source_.has(name) ? get(name, shape) : Tensor{};
  }

  size_t bytes() const { return bytes_; }

 private:
  static int64_t shape_numel(const Shape& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }

  // An integer tensor of a 4-bit linear (codes, params, perms).
  Tensor alloc_w4(const Shape& shape) {
    Tensor device = backend_.alloc(DType::I32, shape);
    bytes_ += device.nbytes();
    w4_.bytes += device.nbytes();
    return device;
  }

  WeightSource& source_;
  Backend& backend_;
  Fp8Scaling fp8_scaling_;
  std::map<const void*, Tensor> uploaded_;
  std::set<const void*> shared_;  // device data handed out under more than one name
  size_t bytes_ = 0;
  W4Summary w4_;
  size_t w4_workspace_ = 0;
};

VisionWeights upload_vision(const ModelDesc& desc, WeightUploader& up, bool fp8) {
  const VisionConfig& v = desc.vision;
  const int64_t C = v.hidden, M = v.mlp, G = v.grid(), P = v.patch_size;
  const int64_t shuffled = 4 * C, H = desc.llm.hidden;
  VisionWeights w;
  w.patch_w = up.get("vit.patch.weight", {C, 3 * P * P});
  w.patch_b = up.get("vit.patch.bias", {C});
  w.cls = up.get("vit.cls", {C});
  w.pos = up.get("vit.pos", {1 + G * G, C});
  for (int l = 0; l < v.layers; ++l) {
    const std::string p = "vit." + std::to_string(l) + ".";
    VitLayerWeights L;
    const bool layer_norm = v.norm == VitNorm::LayerNorm;
    L.norm1_w = up.get(p + "norm1.weight", {C});
    if (layer_norm) L.norm1_b = up.get(p + "norm1.bias", {C});
    if (v.qk_norm) {
      L.q_norm = up.get(p + "q_norm", {C});
      L.k_norm = up.get(p + "k_norm", {C});
    }
    // FP8 only where the norm before the linear writes its input already quantized (qkv, fc1): proj and fc2
    // would each need a quantization pass of their own, which cost more than their FP8 GEMMs saved (session 8:
    // 1.41 ms per tile with all four in FP8, 1.35 with these two, 1.43 in bf16, on an H100).
    if (fp8) {
      L.qkv8 = up.get_fp8(p + "qkv.weight", {3 * C, C});
      L.fc1_8 = up.get_fp8(p + "fc1.weight", {M, C});
    } else {
      L.qkv_w = up.get(p + "qkv.weight", {3 * C, C});
      L.fc1_w = up.get(p + "fc1.weight", {M, C});
    }
    L.proj_w = up.get(p + "proj.weight", {C, C});
    L.fc2_w = up.get(p + "fc2.weight", {C, M});
    L.qkv_b = v.qkv_bias ? up.get(p + "qkv.bias", {3 * C}) : up.get_optional(p + "qkv.bias", {3 * C});
    L.proj_b = up.get(p + "proj.bias", {C});
    L.norm2_w = up.get(p + "norm2.weight", {C});
    if (layer_norm) L.norm2_b = up.get(p + "norm2.bias", {C});
    L.fc1_b = up.get(p + "fc1.bias", {M});
    L.fc2_b = up.get(p + "fc2.bias", {C});
    // x += ls ⊙ (W a + b) = W' a + b' with W' = diag(ls) W, b' = ls ⊙ b: the linears that feed the residual
    // stream take their layer scales, and add into x themselves (Backend::linear_residual).
    L.ls1 = up.get(p + "ls1", {C});
    L.ls2 = up.get(p + "ls2", {C});
    up.fold_scale(p + "proj.weight", L.proj_w, L.ls1);
    up.fold_scale(p + "proj.bias", L.proj_b, L.ls1);
    up.fold_scale(p + "fc2.weight", L.fc2_w, L.ls2);
    up.fold_scale(p + "fc2.bias", L.fc2_b, L.ls2);
    w.layers.push_back(std::move(L));
  }
  w.proj_norm_w = up.get("proj.norm.weight", {shuffled});
  w.proj_norm_b = up.get("proj.norm.bias", {shuffled});
  w.proj_fc1_w = up.get("proj.fc1.weight", {H, shuffled});
  w.proj_fc1_b = up.get("proj.fc1.bias", {H});
  w.proj_fc2_w = up.get("proj.fc2.weight", {H, H});
  w.proj_fc2_b = up.get("proj.fc2.bias", {H});
  return w;
}

// A layer of a 4-bit checkpoint: each projection packed where the loader kept it so, else dense.
void upload_llm_w4_layer(WeightUploader& up, const std::string& p, const Shape& qkv, const Shape& o,
                         const Shape& gate_up, const Shape& down, LlmLayerWeights* L) {
  auto one = [&](const char* name, const Shape& shape, Tensor* dense, W4Linear* packed) {
    if (up.has_w4(p + name)) *packed = up.get_w4(p + name, shape);
    else *dense = up.get(p + name + ".weight", shape);
  };
  one("qkv", qkv, &L->qkv_w, &L->qkv4);
  one("o", o, &L->o_w, &L->o4);
  one("gate_up", gate_up, &L->gate_up_w, &L->gate_up4);
  one("down", down, &L->down_w, &L->down4);
}

LlmWeights upload_llm(const ModelDesc& desc, WeightUploader& up, bool fp8) {
  const LlmConfig& c = desc.llm;
  const int64_t H = c.hidden, V = c.vocab, D = c.head_dim, F = c.ffn;
  const int64_t qkv_rows = int64_t(c.heads + 2 * c.kv_heads) * D;
  LlmWeights w;
  w.embed = up.get("llm.embed", {V, H});
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = "llm." + std::to_string(l) + ".";
    LlmLayerWeights L;
    L.attn_norm = up.get(p + "attn_norm", {H});
    const Shape qkv{qkv_rows, H}, o{H, int64_t(c.heads) * D}, gate_up{2 * F, H}, down{H, F};
    if (up.has_w4(p + "qkv") || up.has_w4(p + "o") || up.has_w4(p + "gate_up") || up.has_w4(p + "down")) {
      FOVEA_CHECK(!fp8, "FP8 of a 4-bit checkpoint needs its linears dense: load it with W4 dequantized");
      upload_llm_w4_layer(up, p, qkv, o, gate_up, down, &L);
    } else if (fp8) {
      L.qkv8 = up.get_fp8(p + "qkv.weight", qkv);
      L.o8 = up.get_fp8(p + "o.weight", o);
      L.gate_up8 = up.get_fp8(p + "gate_up.weight", gate_up);
      L.down8 = up.get_fp8(p + "down.weight", down);
    } else {
      L.qkv_w = up.get(p + "qkv.weight", qkv);
      L.o_w = up.get(p + "o.weight", o);
      L.gate_up_w = up.get(p + "gate_up.weight", gate_up);
      L.down_w = up.get(p + "down.weight", down);
    }
    L.qkv_b = c.qkv_bias ? up.get(p + "qkv.bias", {qkv_rows}) : up.get_optional(p + "qkv.bias", {qkv_rows});
    if (c.qk_norm) {
      L.q_norm = up.get(p + "q_norm", {D});
      L.k_norm = up.get(p + "k_norm", {D});
    }
    L.ffn_norm = up.get(p + "ffn_norm", {H});
    w.layers.push_back(std::move(L));
  }
  w.norm = up.get("llm.norm", {H});
  w.lm_head = up.get("llm.lm_head", {V, H});
  const Tensor workspace = up.w4_workspace();
  for (LlmLayerWeights& L : w.layers)
    for (W4Linear* linear : {&L.qkv4, &L.o4, &L.gate_up4, &L.down4})
      if (!linear->empty()) linear->workspace = workspace;
  return w;
}

}  // namespace

void apply_linear(Backend& be, const Tensor& x, const Tensor& w, const Fp8Linear& w8, const Tensor& bias, Tensor& y,
                  Activation act) {
  if (w8.empty()) be.linear(x, w, bias, y, act);
  else be.linear_fp8_scaled(x, w8.codes, w8.scale, w8.scaling, bias, y, act);
}

namespace {
LinearInputObserver g_observer = nullptr;
void* g_observer_context = nullptr;
}  // namespace

void set_linear_input_observer(LinearInputObserver observer, void* context) {
  g_observer = observer;
  g_observer_context = context;
}

bool linear_inputs_observed() { return g_observer != nullptr; }

void apply_linear(Backend& be, const Tensor& x, const Tensor& w, const Fp8Linear& w8, const W4Linear& w4,
                  const Tensor& bias, Tensor& y) {
  if (g_observer) g_observer(g_observer_context, w, x);
  if (w4.empty()) return apply_linear(be, x, w, w8, bias, y);
  Tensor workspace = w4.workspace;
  be.linear_w4(x, w4.weight, bias, y, workspace);
}

DeviceWeights upload_weights(const ModelDesc& desc, WeightSource& source, Backend& backend, bool fp8_llm,
                             bool fp8_vit, Fp8Scaling fp8_scaling) {
  WeightUploader up(source, backend, fp8_scaling);
  DeviceWeights w;
  w.vision = upload_vision(desc, up, fp8_vit);
  w.llm = upload_llm(desc, up, fp8_llm);
  backend.synchronize();
  w.bytes = up.bytes();
  w.w4 = up.w4();
  return w;
}

}  // namespace fovea
