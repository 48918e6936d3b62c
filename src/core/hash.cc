#include "core/hash.h"

#include <cstring>

namespace fovea {
namespace {

constexpr uint64_t kC1 = 0x87c37b91114253d5ull;
constexpr uint64_t kC2 = 0x4cf5ad432745937full;

inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Final avalanche of each 64-bit half.
inline uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

// Reads 8 bytes as little-endian regardless of the host's byte order, so digests match the reference everywhere.
inline uint64_t load_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

inline uint64_t mix_k1(uint64_t k1) { return rotl64(k1 * kC1, 31) * kC2; }
inline uint64_t mix_k2(uint64_t k2) { return rotl64(k2 * kC2, 33) * kC1; }

}  // namespace

Hash128 murmur3_128(const void* data, size_t len, uint32_t seed) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  const size_t blocks = len / 16;
  uint64_t h1 = seed;
  uint64_t h2 = seed;

  for (size_t i = 0; i < blocks; ++i) {
    const uint64_t k1 = load_le64(bytes + i * 16);
    const uint64_t k2 = load_le64(bytes + i * 16 + 8);
    h1 ^= mix_k1(k1);
    h1 = rotl64(h1, 27) + h2;
    h1 = h1 * 5 + 0x52dce729;
    h2 ^= mix_k2(k2);
    h2 = rotl64(h2, 31) + h1;
    h2 = h2 * 5 + 0x38495ab5;
  }

  // Tail: the last len % 16 bytes, the first 8 of them into k1 and the rest into k2.
  const uint8_t* tail = bytes + blocks * 16;
  const size_t rest = len & 15;
  uint64_t k1 = 0;
  uint64_t k2 = 0;
  for (size_t i = rest; i > 8; --i) k2 = (k2 << 8) | tail[i - 1];
  for (size_t i = rest < 8 ? rest : 8; i > 0; --i) k1 = (k1 << 8) | tail[i - 1];
  if (rest > 8) h2 ^= mix_k2(k2);
  if (rest > 0) h1 ^= mix_k1(k1);

  h1 ^= uint64_t(len);
  h2 ^= uint64_t(len);
  h1 += h2;
  h2 += h1;
  h1 = fmix64(h1);
  h2 = fmix64(h2);
  h1 += h2;
  h2 += h1;
  return Hash128{h1, h2};
}

std::string Hash128::hex() const {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(32);
  for (uint64_t half : {lo, hi})
    for (int byte = 0; byte < 8; ++byte) {
      const unsigned b = unsigned(half >> (8 * byte)) & 0xffu;
      out += kDigits[b >> 4];
      out += kDigits[b & 15];
    }
  return out;
}

HashBuilder& HashBuilder::add_bytes(const void* data, size_t len) {
  buffer_.append(static_cast<const char*>(data), len);
  return *this;
}

}  // namespace fovea
