// Deterministic random values made on the device (Backend::fill_random), for weights built from a config alone
// (--load-format dummy). Counter-based: element i of a tensor gets 64 bits that depend only on (seed, stream, i),
// splitmix64's finalizer over a Weyl sequence, integer arithmetic only; a float is made of the top 24 bits with one
// fused multiply-add, so the CPU reference and the CUDA kernel write the same bits (test_ops checks it). Header-only,
// compiled into the CUDA kernel too.
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define FOVEA_RANDOM_FN __host__ __device__ inline
#else
#define FOVEA_RANDOM_FN inline
#endif

namespace fovea {

// Element i of a float tensor (F32, BF16, F16, F8E4M3) is fma(u_i, scale, offset) with u_i uniform in [0, 1) on a
// 2^-24 grid, rounded to the dtype (nearest even; F8E4M3 saturates at +-448); scale 0 gives the constant offset.
// An integer tensor (I32, U8) gets the low bits of (bits_i & bits_and) | bits_or.
struct RandomFill {
  uint64_t seed = 0;
  uint64_t stream = 0;  // which tensor: tensors filled with one seed and different streams are independent
  float offset = 0.f, scale = 1.f;
  uint32_t bits_and = 0xFFFFFFFFu, bits_or = 0;
};

namespace random_fill {

FOVEA_RANDOM_FN uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
// One tensor's key: the seed and the stream mixed, so neighbouring streams do not share a Weyl sequence.
FOVEA_RANDOM_FN uint64_t key(uint64_t seed, uint64_t stream) {
  return mix(mix(seed) ^ (stream * 0xD1B54A32D192ED03ull));
}
FOVEA_RANDOM_FN uint64_t bits(uint64_t key, uint64_t index) { return mix(key + (index + 1) * 0x9E3779B97F4A7C15ull); }
// The top 24 bits as a float in [0, 1): exact (a 24-bit integer times a power of two).
FOVEA_RANDOM_FN float unit(uint64_t bits) { return float(uint32_t(bits >> 40)) * (1.0f / 16777216.0f); }
FOVEA_RANDOM_FN uint32_t integer(uint64_t bits, const RandomFill& r) {
  return (uint32_t(bits) & r.bits_and) | r.bits_or;
}

}  // namespace random_fill
}  // namespace fovea
