// CpuBackend::fill_random: the reference of Backend::fill_random (backend/random_fill.h).
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_util.h"

namespace fovea {

void CpuBackend::fill_random(Tensor& t, const RandomFill& fill) {
  FOVEA_CHECK(t.device == Device::CPU, "fill_random: not a CPU tensor");
  FOVEA_CHECK(t.dtype != DType::I64, "fill_random: I64 is not supported");
  const uint64_t key = random_fill::key(fill.seed, fill.stream);
  const DType dtype = t.dtype;
  void* data = t.data;
  cpu::parallel_rows(t.numel(), 4.0, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const uint64_t bits = random_fill::bits(key, uint64_t(i));
      const float v = std::fma(random_fill::unit(bits), fill.scale, fill.offset);
      switch (dtype) {
        case DType::F32:
          static_cast<float*>(data)[i] = v;
          break;
        case DType::BF16:
          static_cast<uint16_t*>(data)[i] = f32_to_bf16(v);
          break;
        case DType::F16:
          static_cast<uint16_t*>(data)[i] = f32_to_f16(v);
          break;
        case DType::F8E4M3:
          static_cast<uint8_t*>(data)[i] = f32_to_e4m3(v);
          break;
        case DType::I32:
          static_cast<uint32_t*>(data)[i] = random_fill::integer(bits, fill);
          break;
        case DType::U8:
          static_cast<uint8_t*>(data)[i] = uint8_t(random_fill::integer(bits, fill));
          break;
        case DType::I64:
          break;
      }
    }
  });
}

}  // namespace fovea
