// A canonical weight whose bytes are made when asked (load()): a view of a mapped checkpoint file, or what the
// loader makes of such views (rows stacked, InternLM2's qkv regrouped, 4-bit or FP8 dequantized, 4-bit repacked).
// Its dtype and shape are known from the files' headers without reading any data, so a whole model is described
// (and checked against its config) before anything is read, and the uploader reads one tensor at a time, dropping
// each before the next (docs/components/model-loading.md).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace fovea {

class WeightRef {
 public:
  WeightRef() = default;
  // An existing host tensor (held, not copied).
  WeightRef(Tensor tensor);  // NOLINT: implicit, so code that has a tensor can put it where a ref goes
  // A tensor `make` produces on demand; it must return a host tensor of this dtype and element count.
  WeightRef(DType dtype, Shape shape, std::function<Tensor()> make);

  DType dtype = DType::F32;
  Shape shape;

  bool empty() const { return source_ == nullptr; }
  int64_t numel() const;
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype); }
  // The host tensor, in this ref's shape: a view into the mapping, or a new tensor made now (each call makes it
  // again: whoever keeps the result holds its memory).
  Tensor load() const;
  // The same bytes under another shape with the same element count.
  WeightRef view(Shape new_shape) const;
  // The same for every copy and view of one ref (a tied LM head and the embedding share it).
  const void* key() const { return source_.get(); }

 private:
  struct Source {
    std::function<Tensor()> make;
  };
  std::shared_ptr<const Source> source_;
};

// Rows of `parts` stacked (same dtype and trailing dims, checked now); loaded one part at a time into the result.
WeightRef stack_rows(const std::vector<WeightRef>& parts, const std::string& what);
// `f` applied to the loaded tensor (same dtype and shape), e.g. a row regrouping.
WeightRef transform(const WeightRef& in, std::function<Tensor(const Tensor&)> f);

}  // namespace fovea
