// Reading safetensors checkpoints: one file (mmapped, tensors are zero-copy views that keep the mapping alive)
// or a sharded checkpoint through model.safetensors.index.json. The whole header is validated when a file is
// opened (dtype, shape, offsets inside the data section, size = shape x dtype, no overlap), so a bad file fails
// at load time with the file and tensor named, never later inside a kernel.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/quantization.h"
#include "model/w4_dequant.h"
#include "model/weight_ref.h"

namespace fovea {

class SafetensorsFile {
 public:
  // Maps `path` and validates its header; throws fovea::Error naming the file (and the tensor) on bad input.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return path_; }
  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  std::vector<std::string> names() const;
  // A host tensor pointing into the mapping (copied only if the data is misaligned for its dtype).
  Tensor tensor(const std::string& name) const;
  // Its dtype and shape, from the header (nothing read).
  std::pair<DType, Shape> info(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  struct Entry {
    DType dtype;
    Shape shape;
    size_t begin, end;  // offsets within the data section
  };
  void parse_header(const char* text, size_t size, size_t data_size);
  std::string path_;
  std::shared_ptr<void> mapping_;  // munmaps when the last tensor view goes
  const char* data_ = nullptr;     // start of the data section
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint directory: model.safetensors.index.json (sharded) if present, else
// model.safetensors, else every *.safetensors in the directory. A tensor named twice is an error.
//
// 4-bit checkpoints (AWQ, GPTQ) store a linear "X.weight" as X.qweight, X.qzeros, X.scales (GPTQ: X.g_idx). With
// set_quantization(the config's), such an X.weight exists for has() and get() returns it dequantized to a bf16
// [out, in] tensor (model/w4_dequant.h), so the weight maps read packed and plain checkpoints alike; packed()
// hands the packed tensors through instead (the W4A16 path, model/w4_repack.h). With an FP8 compressed-tensors
// config, an E4M3 X.weight that has X.weight_scale reads as its bf16 dequantization.
class SafetensorsSet : public std::enable_shared_from_this<SafetensorsSet> {
 public:
  explicit SafetensorsSet(const std::string& dir);

  void set_quantization(const CheckpointQuantization& q) { quantization_ = q; }
  bool has(const std::string& name) const { return owner_.count(name) != 0 || is_packed_weight(name); }
  // Throws naming the tensor and the file(s) it should have been in.
  Tensor get(const std::string& name) const;
  // get() plus a shape check whose error names the file and the tensor.
  Tensor get(const std::string& name, const Shape& expected) const;
  // What get() returns, described from the headers now (dtype, shape, and for a packed 4-bit or FP8 weight its
  // packing checked) and read only when the ref is loaded. The set must be owned by a std::shared_ptr: the refs
  // keep it, and its mappings, alive.
  WeightRef ref(const std::string& name) const;
  WeightRef ref(const std::string& name, const Shape& expected) const;
  // The file holding the tensor, for a packed X.weight the one holding X.qweight ("" when absent).
  std::string file_of(const std::string& name) const;
  std::vector<std::string> names() const;
  std::string describe() const;  // the file(s), for error messages
  std::vector<std::shared_ptr<void>> keep_alive() const;

  // Whether `weight_name` ("X.weight") is stored packed as X.qweight / X.qzeros / X.scales (/ X.g_idx).
  bool is_packed(const std::string& weight_name) const { return is_packed_weight(weight_name); }
  // Those tensors of a packed X.weight, as they are in the file(s).
  PackedW4Linear packed(const std::string& weight_name) const;
  const CheckpointQuantization& quantization() const { return quantization_; }

 private:
  void add_file(const std::string& path);
  // "X" when `name` is "X.weight", absent, and X.qweight present; else "".
  std::string packed_prefix(const std::string& name) const;
  bool is_packed_weight(const std::string& name) const { return !packed_prefix(name).empty(); }
  Tensor dequantized(const std::string& prefix) const;
  // A compressed-tensors FP8 weight (E4M3 codes times name_scale per row or tensor) as bf16.
  Tensor dequantized_fp8(const std::string& name, const Tensor& codes) const;
  std::string dir_;
  CheckpointQuantization quantization_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> owner_;  // tensor name -> index in files_
};

}  // namespace fovea
