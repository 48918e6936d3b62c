#include "runtime/sizing_backend.h"

namespace fovea {

Tensor SizingBackend::alloc(DType dtype, const Shape& shape) {
  Tensor t;
  t.dtype = dtype;
  t.device = target_.device;
  t.shape = shape;
  for (int64_t d : shape) FOVEA_CHECK(d >= 0, "alloc: negative dimension in ", shape_str(shape));
  const size_t bytes = t.nbytes();
  bytes_ += bytes;
  if (target_.allocation_bytes) rounding_ += target_.allocation_bytes(bytes) - bytes;
  t.data = reinterpret_cast<void*>(next_address_);
  next_address_ += (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  return t;
}

void SizingBackend::upload(Tensor& dst, const Tensor& host_src) {
  FOVEA_CHECK(dst.numel() == host_src.numel(), "upload: ", shape_str(host_src.shape), " into ", shape_str(dst.shape));
}

Tensor SizingBackend::download(const Tensor&) { FOVEA_FAIL("the sizing backend holds no values to download"); }

}  // namespace fovea
