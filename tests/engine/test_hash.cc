// MurmurHash3 x64_128 against the reference's own self-check (SMHasher's verification value) and known digests.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/hash.h"

using namespace fovea;

namespace {
void digest_bytes(const Hash128& h, uint8_t* out) {
  for (int i = 0; i < 8; ++i) out[i] = uint8_t(h.lo >> (8 * i));
  for (int i = 0; i < 8; ++i) out[8 + i] = uint8_t(h.hi >> (8 * i));
}
}  // namespace

// SMHasher's VerificationTest: hash keys {0}, {0,1}, ... of lengths 0..255 with seed 256 - len, hash the
// concatenated digests with seed 0; the first 4 bytes read little-endian must be 0x6384BA69 for x64_128.
// It exercises every tail length and the block loop, so any slip in the mixing changes it.
TEST(Hash, SmhasherVerificationValue) {
  std::vector<uint8_t> key(256);
  std::vector<uint8_t> digests(16 * 256);
  for (int i = 0; i < 256; ++i) {
    key[size_t(i)] = uint8_t(i);
    digest_bytes(murmur3_128(key.data(), size_t(i), uint32_t(256 - i)), &digests[size_t(i) * 16]);
  }
  uint8_t final_digest[16];
  digest_bytes(murmur3_128(digests.data(), digests.size(), 0), final_digest);
  const uint32_t verification = uint32_t(final_digest[0]) | uint32_t(final_digest[1]) << 8 |
                                uint32_t(final_digest[2]) << 16 | uint32_t(final_digest[3]) << 24;
  EXPECT_EQ(verification, 0x6384BA69u);
}

TEST(Hash, KnownDigests) {
  EXPECT_EQ(murmur3_128("", 0).hex(), "00000000000000000000000000000000");
  EXPECT_EQ(murmur3_128("The quick brown fox jumps over the lazy dog", 0).hex(), "6c1b07bc7bbc4be347939ac4a93c437a");
}

TEST(Hash, SeedAndEveryByteMatter) {
  const std::string base(100, 'x');
  std::set<std::string> seen{murmur3_128(base).hex(), murmur3_128(base, 1).hex()};
  for (size_t i = 0; i < base.size(); ++i) {
    std::string flipped = base;
    flipped[i] ^= 1;
    seen.insert(murmur3_128(flipped).hex());
  }
  EXPECT_EQ(seen.size(), base.size() + 2);
}

TEST(Hash, BuilderEqualsHashOfConcatenation) {
  HashBuilder b;
  b.add_bytes("ab", 2).add_bytes("cd", 2);
  EXPECT_EQ(b.finish(), murmur3_128("abcd"));
  EXPECT_FALSE(b.finish() == murmur3_128("abce"));
}
