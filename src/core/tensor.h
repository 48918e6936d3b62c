// A tensor is a typed, shaped view of memory on one device. Kernels take raw pointers; this struct only carries
// them around with their shape and keeps the allocation alive through `owner` (null for views).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace fovea {

enum class Device : uint8_t { CPU, CUDA };

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& shape);  // "[2, 3, 4]"

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::F32;
  Device device = Device::CPU;
  Shape shape;
  std::shared_ptr<void> owner;

  bool empty() const { return data == nullptr; }
  int rank() const { return int(shape.size()); }
  int64_t numel() const;
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype); }
  // dim(-1) is the last dimension.
  int64_t dim(int i) const;
  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data);
  }

  // Same memory, another shape with the same number of elements (-1 once: inferred).
  Tensor view(Shape new_shape) const;
  // Rows [begin, end) along dimension 0, sharing memory.
  Tensor rows(int64_t begin, int64_t end) const;

  // Zero-filled host memory.
  static Tensor host(DType dtype, Shape shape);
  // Host tensor converted to float32 (from F32/F16/BF16 host tensors).
  Tensor to_f32() const;
};

// Throws a clear error when t does not have the dtype/shape an op expects.
void check_tensor(const Tensor& t, DType dtype, const Shape& shape, const char* what);

}  // namespace fovea
