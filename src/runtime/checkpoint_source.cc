// The WeightSource of a loaded checkpoint: each canonical tensor is made when the uploader asks for it (a view of the
// mapped file, or the loader's layout change / dequantization / repacking of it), checked for NaN, converted (FP8
// quantization on the host) and uploaded, then dropped. So the host holds the transient buffers of one tensor at a time
// on top of the mapped files (docs/components/model-loading.md).
#include "backend/fp8_recipe.h"
#include "model/w4_repack.h"
#include "model/weight_check.h"
#include "runtime/weight_source.h"
#include "runtime/weights.h"

namespace fovea {
namespace {

class CheckpointSource final : public WeightSource {
 public:
  CheckpointSource(ModelWeights weights, std::string model_dir)
      : weights_(std::move(weights)), dir_(std::move(model_dir)) {}

  bool has(const std::string& name) const override { return weights_.has(name); }
  bool has_w4(const std::string& linear) const override { return weights_.has(linear + ".w4.codes"); }

  W4Info w4_info(const std::string& linear, const Shape& dense_shape) const override {
    const Shape params = weights_.shape_of(linear + ".w4.params");
    const int64_t n = dense_shape[0], k = dense_shape[1];
    FOVEA_CHECK(params.size() == 2 && params[0] == n && params[1] > 0 && k % params[1] == 0, "weight ", linear,
                ".w4.params has shape ", shape_str(params), " for a ", shape_str(dense_shape), " linear");
    return {k / params[1], weights_.has(linear + ".w4.perm")};
  }

  const void* storage_key(const std::string& name) const override { return weights_.storage_key(name); }

  void write_dense(const std::string& name, Tensor& dst, Backend& backend) override {
    const Tensor host = load(name, dst.shape);
    backend.upload(dst, host.view(dst.shape));
  }

  void write_fp8(const std::string& name, Fp8Linear& dst, Backend& backend) override {
    const Tensor host = load(name, dst.codes.shape).to_f32();
    const Fp8HostWeight quantized = quantize_fp8_weight(host.view(dst.codes.shape), dst.scaling);
    backend.upload(dst.codes, quantized.codes);
    backend.upload(dst.scale, quantized.scale);
  }

  void write_w4(const std::string& linear, W4Weight& dst, Backend& backend) override {
    upload_exact(linear + ".w4.codes", dst.codes, backend);
    upload_exact(linear + ".w4.params", dst.params, backend);
    if (dst.perm.empty()) return;
    const Tensor perm = weights_.get(linear + ".w4.perm");
    FOVEA_CHECK(perm.shape == dst.perm.shape, "weight ", linear, ".w4.perm has shape ", shape_str(perm.shape),
                ", expected ", shape_str(dst.perm.shape));
    backend.upload(dst.perm, perm);
    backend.upload(dst.inverse_perm, inverse_permutation(perm));
  }

 private:
  // The host tensor, its element count checked against the forward's shape and its values checked finite.
  Tensor load(const std::string& name, const Shape& shape) const {
    Tensor host = weights_.get(name);
    Tensor expected;
    expected.shape = shape;
    FOVEA_CHECK(host.numel() == expected.numel(), "weight ", name, " has shape ", shape_str(host.shape), ", expected ",
                shape_str(shape));
    check_tensor_finite(name, host, dir_);
    return host;
  }

  void upload_exact(const std::string& name, Tensor& dst, Backend& backend) const {
    const Tensor host = weights_.get(name);
    FOVEA_CHECK(host.dtype == dst.dtype && host.shape == dst.shape, "weight ", name, " is ", dtype_name(host.dtype),
                " ", shape_str(host.shape), ", expected ", dtype_name(dst.dtype), " ", shape_str(dst.shape));
    backend.upload(dst, host);
  }

  ModelWeights weights_;
  std::string dir_;
};

// What a source says exists; writes nothing (the memory planner's backend has no memory to write to).
class ShapeSource final : public WeightSource {
 public:
  explicit ShapeSource(const WeightSource& inner) : inner_(inner) {}
  bool has(const std::string& name) const override { return inner_.has(name); }
  bool has_w4(const std::string& linear) const override { return inner_.has_w4(linear); }
  W4Info w4_info(const std::string& linear, const Shape& dense_shape) const override {
    return inner_.w4_info(linear, dense_shape);
  }
  const void* storage_key(const std::string& name) const override { return inner_.storage_key(name); }
  void write_dense(const std::string&, Tensor&, Backend&) override {}
  void write_fp8(const std::string&, Fp8Linear&, Backend&) override {}
  void write_w4(const std::string&, W4Weight&, Backend&) override {}

 private:
  const WeightSource& inner_;
};

}  // namespace

std::unique_ptr<WeightSource> make_checkpoint_source(ModelWeights weights, const std::string& model_dir) {
  return std::make_unique<CheckpointSource>(std::move(weights), model_dir);
}

std::unique_ptr<WeightSource> make_shape_source(const WeightSource& source) {
  return std::make_unique<ShapeSource>(source);
}

}  // namespace fovea
