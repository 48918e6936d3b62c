// A 128-bit non-cryptographic content hash: MurmurHash3 x64_128 (Austin Appleby's public-domain design),
// implemented here from its specification. Used for prefix-cache block keys and image keys, where a collision
// would let one request read another's KV; 128 bits make that negligible without a cryptographic hash's cost.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fovea {

struct Hash128 {
  uint64_t lo = 0;  // h1 of MurmurHash3: the first 8 bytes of the digest, little-endian
  uint64_t hi = 0;  // h2: the last 8 bytes

  bool operator==(const Hash128& other) const = default;
  bool operator<(const Hash128& other) const { return lo != other.lo ? lo < other.lo : hi < other.hi; }
  std::string hex() const;  // 32 hex digits of the digest bytes in order (as reference tools print it)
};

// MurmurHash3_x64_128 of `len` bytes at `data` with a 32-bit seed. The seed has no default on purpose: with
// one, murmur3_128("text", 0) would silently pick this overload with len 0.
Hash128 murmur3_128(const void* data, size_t len, uint32_t seed);
inline Hash128 murmur3_128(std::string_view bytes, uint32_t seed = 0) {
  return murmur3_128(bytes.data(), bytes.size(), seed);
}

// For unordered containers keyed by Hash128 (the bits are already uniformly mixed).
struct Hash128Hasher {
  size_t operator()(const Hash128& h) const { return size_t(h.lo ^ (h.hi * 0x9e3779b97f4a7c15ull)); }
};

// Appends values to a byte buffer and hashes it once: for keys built from several fields.
class HashBuilder {
 public:
  HashBuilder& add_bytes(const void* data, size_t len);
  HashBuilder& add(uint64_t v) { return add_bytes(&v, sizeof v); }
  HashBuilder& add(const Hash128& h) { return add(h.lo).add(h.hi); }
  HashBuilder& add_i32(int32_t v) { return add_bytes(&v, sizeof v); }
  Hash128 finish(uint32_t seed = 0) const { return murmur3_128(buffer_.data(), buffer_.size(), seed); }

 private:
  std::string buffer_;
};

}  // namespace fovea
