// CpuBackend memory management and the factory. The ops live in cpu_*_ops.cc.
#include "backend/cpu/cpu_backend.h"

#include <cstdlib>
#include <cstring>

#include "backend/cpu/cpu_util.h"

namespace fovea {

CpuBackend::CpuBackend() : bytes_in_use_(std::make_shared<std::atomic<size_t>>(0)) {}

Tensor CpuBackend::alloc(DType dtype, const Shape& shape) {
  Tensor t;
  t.dtype = dtype;
  t.device = Device::CPU;
  t.shape = shape;
  for (int64_t d : shape) FOVEA_CHECK(d >= 0, "alloc: negative dimension in ", shape_str(shape));
  const size_t bytes = t.nbytes();
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  FOVEA_CHECK(p, "alloc: out of host memory for ", bytes, " bytes");
  bytes_in_use_->fetch_add(bytes);
  auto counter = bytes_in_use_;
  t.owner = std::shared_ptr<void>(p, [counter, bytes](void* q) {
    std::free(q);
    counter->fetch_sub(bytes);
  });
  t.data = p;
  return t;
}

namespace {

// Reads element i of a host tensor of a float-like dtype as float32.
float load_as_f32(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::F32:
      return t.ptr<float>()[i];
    case DType::BF16:
      return bf16_to_f32(t.ptr<uint16_t>()[i]);
    case DType::F16:
      return f16_to_f32(t.ptr<uint16_t>()[i]);
    default:
      FOVEA_FAIL("unsupported dtype ", dtype_name(t.dtype));
  }
}

void store_from_f32(Tensor& t, int64_t i, float v) {
  switch (t.dtype) {
    case DType::F32:
      t.ptr<float>()[i] = v;
      break;
    case DType::BF16:
      t.ptr<uint16_t>()[i] = f32_to_bf16(v);
      break;
    case DType::F16:
      t.ptr<uint16_t>()[i] = f32_to_f16(v);
      break;
    default:
      FOVEA_FAIL("unsupported dtype ", dtype_name(t.dtype));
  }
}

bool is_float_dtype(DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; }

}  // namespace

void CpuBackend::upload(Tensor& dst, const Tensor& host_src) {
  FOVEA_CHECK(dst.device == Device::CPU && host_src.device == Device::CPU, "upload: tensors must be on the host");
  FOVEA_CHECK(dst.numel() == host_src.numel(), "upload: ", shape_str(host_src.shape), " into ", shape_str(dst.shape));
  if (dst.dtype == host_src.dtype) {
    if (dst.nbytes()) std::memmove(dst.data, host_src.data, dst.nbytes());
    return;
  }
  FOVEA_CHECK(is_float_dtype(dst.dtype) && is_float_dtype(host_src.dtype), "upload: cannot convert ",
              dtype_name(host_src.dtype), " to ", dtype_name(dst.dtype));
  const int64_t n = dst.numel();
  cpu::parallel_rows(n, 1.0, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) store_from_f32(dst, i, load_as_f32(host_src, i));
  });
}

Tensor CpuBackend::download(const Tensor& src) {
  FOVEA_CHECK(src.device == Device::CPU, "download: not a CPU tensor");
  if (src.dtype == DType::I32 || src.dtype == DType::F32) {
    Tensor out = Tensor::host(src.dtype, src.shape);
    if (src.nbytes()) std::memcpy(out.data, src.data, src.nbytes());
    return out;
  }
  FOVEA_CHECK(is_float_dtype(src.dtype), "download: unsupported dtype ", dtype_name(src.dtype));
  return src.to_f32();
}

void CpuBackend::copy(Tensor& dst, const Tensor& src) {
  FOVEA_CHECK(dst.device == Device::CPU && src.device == Device::CPU, "copy: tensors must be CPU tensors");
  FOVEA_CHECK(dst.dtype == src.dtype && dst.numel() == src.numel(), "copy: ", dtype_name(src.dtype),
              shape_str(src.shape), " into ", dtype_name(dst.dtype), shape_str(dst.shape));
  if (dst.nbytes()) std::memmove(dst.data, src.data, dst.nbytes());
}

void CpuBackend::fill_zero(Tensor& t) {
  FOVEA_CHECK(t.device == Device::CPU, "fill_zero: not a CPU tensor");
  if (t.nbytes()) std::memset(t.data, 0, t.nbytes());
}

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace fovea
