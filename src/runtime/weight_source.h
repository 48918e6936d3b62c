// Where the uploader (runtime/weights.h) takes the canonical weights (model/model_desc.h's names) from. The uploader
// knows what the forward needs (names, shapes, dtypes: dense, FP8 or 4-bit) and allocates every device tensor itself;
// a source says what exists and writes the bytes into those tensors, one at a time:
//  - a checkpoint (make_checkpoint_source): each tensor is read (a mapped view, or what the loader's layout change,
//    dequantization or repacking makes of it), checked for NaN, converted and uploaded, then dropped, so the host
//    holds one tensor's transient buffers at a time;
//  - random weights made on the device from the config alone (runtime/dummy_weights.h, --load-format dummy);
//  - nothing at all (make_shape_source, make_config_source): the memory planner (runtime/memory_plan.h) "uploads" a
//    model into a backend that only counts bytes, and needs what exists, never the values.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "model/model_desc.h"

namespace fovea {

struct Fp8Linear;

// How a 4-bit linear is stored: columns per scale group, and whether an act-order permutation comes with it.
struct W4Info {
  int64_t group = 0;
  bool permuted = false;
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;

  // Whether canonical tensor `name` exists ("llm.3.qkv.bias", or "llm.3.qkv.weight" of a linear held dense).
  virtual bool has(const std::string& name) const = 0;
  // Whether canonical linear `linear` ("llm.3.qkv") is held 4-bit ("<linear>.w4.*", model_desc.h).
  virtual bool has_w4(const std::string& linear) const = 0;
  // The layout of a 4-bit linear whose dense shape is [N, K]; throws naming the tensor when it does not fit.
  virtual W4Info w4_info(const std::string& linear, const Shape& dense_shape) const = 0;
  // Tensors stored once under two names (a tied lm_head and the embedding) give the same non-null key and are uploaded
  // once; nullptr: its own storage.
  virtual const void* storage_key(const std::string& name) const = 0;

  // Write the values of `name` into dst (allocated by the uploader: the forward's shape, the backend's weight dtype).
  // Throws naming the tensor when the source's shape does not match.
  virtual void write_dense(const std::string& name, Tensor& dst, Backend& backend) = 0;
  // The same as E4M3 codes and dequantisation scales under dst.scaling (backend/fp8_recipe.h).
  virtual void write_fp8(const std::string& name, Fp8Linear& dst, Backend& backend) = 0;
  // The same as linear_w4's packed layout (dst's codes, params and, when w4_info says so, perm / inverse_perm).
  virtual void write_w4(const std::string& linear, W4Weight& dst, Backend& backend) = 0;
};

// The canonical tensors of a loaded checkpoint; takes the model's weights over (dropped as the source dies).
std::unique_ptr<WeightSource> make_checkpoint_source(ModelWeights weights, const std::string& model_dir);

// What `source` says exists, with writes that do nothing: for planning memory without touching any weight.
std::unique_ptr<WeightSource> make_shape_source(const WeightSource& source);

}  // namespace fovea
