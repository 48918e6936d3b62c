// Element types and the scalar conversions every module shares (bf16/f16 <-> f32, round to nearest even).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace fovea {

enum class DType : uint8_t { F32, F16, BF16, F8E4M3, U8, I32, I64 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);          // "F32", "BF16", ... as safetensors spells them
bool dtype_from_name(const std::string& name, DType* out);

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

inline float round_to_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// FP8 E4M3 (the "fn" variant of FP8 quantization: bias 7, no infinities, S.1111.111 is NaN, largest finite 448).
// f32_to_e4m3 rounds to nearest even and saturates finite values beyond +-448 to +-448 (what FP8 quantization
// does after scaling); NaN gives the NaN code. Checked against torch's float8_e4m3fn (tests/data/fp8).
inline constexpr float kE4M3Max = 448.0f;
uint8_t f32_to_e4m3(float f);
float e4m3_to_f32(uint8_t code);
// Per-tensor FP8 quantization, the one rule of the weight loader, the CPU reference of linear_fp8 and the CUDA
// kernels: scale = max|v| / 448 (1 when every value is zero), codes[i] = f32_to_e4m3(v[i] / scale). Returns the
// scale. Large arrays are split over ThreadPool::global().
float quantize_e4m3(const float* v, int64_t n, uint8_t* codes);

}  // namespace fovea
