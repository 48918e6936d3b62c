#include "core/tensor.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/host_memory.h"

namespace fovea {
namespace {

std::atomic<size_t> g_host_bytes{0}, g_host_peak{0};

void count_host_alloc(size_t bytes) {
  const size_t now = g_host_bytes.fetch_add(bytes) + bytes;
  size_t peak = g_host_peak.load();
  while (now > peak && !g_host_peak.compare_exchange_weak(peak, now)) {
  }
}

}  // namespace

size_t host_tensor_bytes() { return g_host_bytes.load(); }
size_t host_tensor_peak_bytes() { return g_host_peak.load(); }
void reset_host_tensor_peak() { g_host_peak.store(g_host_bytes.load()); }

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Tensor::dim(int i) const {
  if (i < 0) i += rank();
  FOVEA_CHECK(i >= 0 && i < rank(), "dim ", i, " out of range for shape ", shape_str(shape));
  return shape[size_t(i)];
}

Tensor Tensor::view(Shape new_shape) const {
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < new_shape.size(); ++i) {
    if (new_shape[i] == -1) {
      FOVEA_CHECK(infer < 0, "view: more than one -1 in ", shape_str(new_shape));
      infer = int(i);
    } else {
      known *= new_shape[i];
    }
  }
  if (infer >= 0) {
    FOVEA_CHECK(known > 0 && numel() % known == 0, "view: cannot infer ", shape_str(new_shape), " from ",
                shape_str(shape));
    new_shape[size_t(infer)] = numel() / known;
  }
  Tensor t = *this;
  t.shape = std::move(new_shape);
  FOVEA_CHECK(t.numel() == numel(), "view: ", shape_str(shape), " -> ", shape_str(t.shape));
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  FOVEA_CHECK(rank() >= 1 && 0 <= begin && begin <= end && end <= shape[0], "rows [", begin, ", ", end,
              ") of ", shape_str(shape));
  const int64_t row = shape[0] ? numel() / shape[0] : 0;
  Tensor t = *this;
  t.data = static_cast<char*>(data) + size_t(begin * row) * dtype_size(dtype);
  t.shape[0] = end - begin;
  return t;
}

Tensor Tensor::host(DType dtype, Shape shape) {
  Tensor t;
  t.dtype = dtype;
  t.device = Device::CPU;
  t.shape = std::move(shape);
  for (int64_t d : t.shape) FOVEA_CHECK(d >= 0, "negative dimension in ", shape_str(t.shape));
  const size_t bytes = std::max<size_t>(t.nbytes(), 1);
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  FOVEA_CHECK(p, "out of host memory allocating ", bytes, " bytes");
  std::memset(p, 0, bytes);
  count_host_alloc(bytes);
  t.owner = std::shared_ptr<void>(p, [bytes](void* q) {
    std::free(q);
    g_host_bytes.fetch_sub(bytes);
  });
  t.data = p;
  return t;
}

Tensor Tensor::to_f32() const {
  FOVEA_CHECK(device == Device::CPU, "to_f32 needs a host tensor");
  Tensor out = host(DType::F32, shape);
  float* dst = out.ptr<float>();
  const int64_t n = numel();
  switch (dtype) {
    case DType::F32: std::memcpy(dst, data, size_t(n) * 4); break;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(ptr<uint16_t>()[i]);
      break;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(ptr<uint16_t>()[i]);
      break;
    case DType::F8E4M3:  // the codes' values, unscaled
      for (int64_t i = 0; i < n; ++i) dst[i] = e4m3_to_f32(ptr<uint8_t>()[i]);
      break;
    default: FOVEA_FAIL("to_f32: unsupported dtype ", dtype_name(dtype));
  }
  return out;
}

void check_tensor(const Tensor& t, DType dtype, const Shape& shape, const char* what) {
  FOVEA_CHECK(t.dtype == dtype, what, ": dtype ", dtype_name(t.dtype), ", expected ", dtype_name(dtype));
  FOVEA_CHECK(t.shape == shape, what, ": shape ", shape_str(t.shape), ", expected ", shape_str(shape));
}

}  // namespace fovea
