#include "model/weight_ref.h"

#include <algorithm>
#include <cstring>

namespace fovea {

WeightRef::WeightRef(Tensor tensor) : dtype(tensor.dtype), shape(tensor.shape) {
  if (tensor.empty() && tensor.numel() != 0) return;  // an empty Tensor{}: an empty ref
  source_ = std::make_shared<Source>(Source{[tensor] { return tensor; }});
}

WeightRef::WeightRef(DType dtype_in, Shape shape_in, std::function<Tensor()> make)
    : dtype(dtype_in), shape(std::move(shape_in)), source_(std::make_shared<Source>(Source{std::move(make)})) {}

int64_t WeightRef::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Tensor WeightRef::load() const {
  FOVEA_CHECK(source_ != nullptr, "load of an empty weight");
  Tensor t = source_->make();
  FOVEA_CHECK(t.dtype == dtype && t.numel() == numel() && t.device == Device::CPU, "weight loader made a ",
              dtype_name(t.dtype), " ", shape_str(t.shape), " tensor for a ", dtype_name(dtype), " ", shape_str(shape),
              " weight");
  return t.shape == shape ? t : t.view(shape);
}

WeightRef WeightRef::view(Shape new_shape) const {
  WeightRef v = *this;
  v.shape = std::move(new_shape);
  FOVEA_CHECK(v.numel() == numel(), "view: ", shape_str(shape), " -> ", shape_str(v.shape));
  return v;
}

WeightRef stack_rows(const std::vector<WeightRef>& parts, const std::string& what) {
  FOVEA_CHECK(!parts.empty(), what, ": nothing to concatenate");
  if (parts.size() == 1) return parts[0];
  const WeightRef& first = parts[0];
  Shape shape = first.shape;
  int64_t rows = 0;
  for (const WeightRef& p : parts) {
    FOVEA_CHECK(p.dtype == first.dtype, what, ": parts have dtypes ", dtype_name(first.dtype), " and ",
                dtype_name(p.dtype));
    FOVEA_CHECK(p.shape.size() == first.shape.size() && !p.shape.empty() &&
                    std::equal(p.shape.begin() + 1, p.shape.end(), first.shape.begin() + 1),
                what, ": parts have shapes ", shape_str(first.shape), " and ", shape_str(p.shape));
    rows += p.shape[0];
  }
  shape[0] = rows;
  return WeightRef(first.dtype, shape, [parts, shape, dtype = first.dtype] {
    Tensor out = Tensor::host(dtype, shape);
    char* dst = out.ptr<char>();
    for (const WeightRef& p : parts) {  // one part in memory at a time beside the result
      const Tensor part = p.load();
      std::memcpy(dst, part.data, part.nbytes());
      dst += part.nbytes();
    }
    return out;
  });
}

WeightRef transform(const WeightRef& in, std::function<Tensor(const Tensor&)> f) {
  return WeightRef(in.dtype, in.shape, [in, f = std::move(f)] { return f(in.load()); });
}

}  // namespace fovea
