#include "core/dtype.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "core/thread_pool.h"

namespace fovea {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::F8E4M3: return 1;
    case DType::U8: return 1;
    case DType::I32: return 4;
    case DType::I64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::F8E4M3: return "F8_E4M3";
    case DType::U8: return "U8";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
  }
  return "?";
}

bool dtype_from_name(const std::string& name, DType* out) {
  static const std::pair<const char*, DType> table[] = {
      {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16}, {"F8_E4M3", DType::F8E4M3},
      {"U8", DType::U8},   {"I32", DType::I32}, {"I64", DType::I64}};
  for (const auto& [n, t] : table) {
    if (name == n) {
      *out = t;
      return true;
    }
  }
  return false;
}

uint8_t f32_to_e4m3(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  if (std::isnan(f)) return uint8_t(sign | 0x7f);
  const float a = std::fabs(f);
  if (a >= kE4M3Max) return uint8_t(sign | 0x7e);
  // Below 2^-6 the codes are subnormal, multiples of 2^-9; 8 * 2^-9 is the first normal code, so rounding up
  // into it lands on the right encoding by itself.
  if (a < 0x1p-6f) return uint8_t(sign | uint8_t(std::nearbyint(a * 512.0f)));
  int exponent = 0;
  const float fraction = std::frexp(a, &exponent);  // a = fraction * 2^exponent, fraction in [0.5, 1)
  int biased = exponent - 1 + 7;
  int mantissa = int(std::nearbyint((fraction * 2.0f - 1.0f) * 8.0f));  // round half to even (default mode)
  if (mantissa == 8) {
    mantissa = 0;
    ++biased;
  }
  if (biased > 15 || (biased == 15 && mantissa == 7)) return uint8_t(sign | 0x7e);
  return uint8_t(sign | (biased << 3) | mantissa);
}

float e4m3_to_f32(uint8_t code) {
  const int exponent = (code >> 3) & 0xf, mantissa = code & 0x7;
  if (exponent == 15 && mantissa == 7) return NAN;
  const float value = exponent == 0 ? std::ldexp(float(mantissa), -9) : std::ldexp(float(8 + mantissa), exponent - 10);
  return (code & 0x80) ? -value : value;
}

float quantize_e4m3(const float* v, int64_t n, uint8_t* codes) {
  constexpr int64_t kChunk = int64_t(1) << 20;
  std::mutex merge;
  float absmax = 0.f;
  ThreadPool::global().parallel_for(n, [&](int64_t begin, int64_t end) {
    float m = 0.f;
    for (int64_t i = begin; i < end; ++i) m = std::max(m, std::fabs(v[i]));
    std::lock_guard<std::mutex> lock(merge);
    absmax = std::max(absmax, m);
  }, kChunk);
  const float scale = absmax > 0.f ? absmax / kE4M3Max : 1.f;
  ThreadPool::global().parallel_for(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) codes[i] = f32_to_e4m3(v[i] / scale);
  }, kChunk);
  return scale;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float value;
  if (exp == 0) {
    value = std::ldexp(float(mant), -24);
  } else if (exp == 31) {
    value = mant ? NAN : INFINITY;
  } else {
    value = std::ldexp(float(mant | 0x400), int(exp) - 25);
  }
  return sign ? -value : value;
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7fffffff;
  if (abs > 0x7f800000) return uint16_t(sign | 0x7e00);
  if (abs >= 0x477ff000) return uint16_t(sign | 0x7c00);  // overflow to inf (after rounding)
  if (abs < 0x38800000) {                                 // subnormal or zero in f16
    float a;
    std::memcpy(&a, &abs, 4);
    return uint16_t(sign | uint32_t(std::nearbyint(a * 16777216.0f)));
  }
  uint32_t rounded = abs + 0xfff + ((abs >> 13) & 1);
  return uint16_t(sign | ((rounded - 0x38000000) >> 13));
}

}  // namespace fovea
