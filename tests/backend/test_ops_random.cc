// fill_random (backend/random_fill.h): the CUDA kernel writes the CPU reference's bits exactly, for every dtype, odd
// sizes and a grid-stride size; the CPU reference has the distribution it promises. The CUDA case skips without a
// GPU.
#include <cmath>
#include <cstring>

#include "ops_harness.h"

namespace fovea::test {
namespace {

// The bytes of a tensor on `backend`, as 32-bit words (download() converts floats; these views do not).
std::vector<uint32_t> raw_words(Backend& backend, const Tensor& t) {
  Tensor words = t;
  words.dtype = DType::I32;
  words.shape = {int64_t(t.nbytes() / 4)};
  const Tensor host = backend.download(words);
  return std::vector<uint32_t>(host.ptr<uint32_t>(), host.ptr<uint32_t>() + host.numel());
}

struct FillCase {
  DType dtype;
  int64_t n;  // a multiple of 4 bytes
  RandomFill fill;
};

std::vector<FillCase> fill_cases() {
  auto fill = [](uint64_t stream, float offset, float scale, uint32_t bits_and = ~0u, uint32_t bits_or = 0) {
    RandomFill f;
    f.seed = 1234;
    f.stream = stream;
    f.offset = offset;
    f.scale = scale;
    f.bits_and = bits_and;
    f.bits_or = bits_or;
    return f;
  };
  return {
      {DType::F32, 1001, fill(1, -1.f, 2.f)},
      {DType::F32, 20'000'003, fill(2, -0.0173f, 0.0346f)},    // more than 65,536 blocks of 256: the grid-stride loop
      {DType::BF16, 4098, fill(3, -0.0541f, 0.1082f)},         // a weight of std 1/sqrt(1024)
      {DType::BF16, 1002, fill(4, 0.9f, 0.2f)},                // norm gains
      {DType::F16, 3006, fill(5, -3e-5f, 6e-5f)},              // F16 subnormals
      {DType::F16, 2, fill(6, 60000.f, 10000.f)},              // F16 overflow to infinity
      {DType::F8E4M3, 4004, fill(7, -448.f, 896.f)},           // FP8 codes
      {DType::F8E4M3, 1000, fill(8, -700.f, 1400.f)},          // saturation at +-448
      {DType::F32, 333, fill(9, 0.00123f, 0.f)},               // a constant (FP8 scales)
      {DType::I32, 777, fill(10, 0.f, 0.f)},                   // all bits (4-bit codes)
      {DType::I32, 555, fill(11, 0.f, 0.f, 0u, 0x00081234u)},  // a constant (4-bit params)
      {DType::U8, 4096, fill(12, 0.f, 0.f, 0x0Fu, 0x30u)},
  };
}

TEST_F(OpsTest, FillRandomIsBitIdentical) {
  for (const FillCase& c : fill_cases()) {
    SCOPED_TRACE(str(dtype_name(c.dtype), " x ", c.n, " stream ", c.fill.stream));
    Tensor on_cpu = cpu_->alloc(c.dtype, {c.n});
    Tensor on_gpu = gpu_->alloc(c.dtype, {c.n});
    cpu_->fill_random(on_cpu, c.fill);
    gpu_->fill_random(on_gpu, c.fill);
    const std::vector<uint32_t> a = raw_words(*cpu_, on_cpu), b = raw_words(*gpu_, on_gpu);
    ASSERT_EQ(a.size(), b.size());
    size_t differ = 0, first = a.size();
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i]) {
        differ += 1;
        first = std::min(first, i);
      }
    EXPECT_EQ(differ, 0u) << "first differing word " << first << ": cpu " << std::hex << a[first] << " gpu "
                          << b[first];
  }
}

TEST(CpuFillRandom, UniformWithTheAskedRange) {
  auto cpu = make_cpu_backend();
  Tensor t = cpu->alloc(DType::F32, {100000});
  RandomFill fill;
  fill.seed = 7;
  fill.offset = -0.5f;
  fill.scale = 1.f;
  cpu->fill_random(t, fill);
  double sum = 0, sum_sq = 0;
  float lo = 1, hi = -1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = t.ptr<float>()[i];
    sum += v, sum_sq += double(v) * v;
    lo = std::min(lo, v), hi = std::max(hi, v);
  }
  const double mean = sum / double(t.numel()), var = sum_sq / double(t.numel()) - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var, 1.0 / 12, 0.002);  // uniform over a unit interval
  EXPECT_GE(lo, -0.5f);
  EXPECT_LT(hi, 0.5f);
  // Deterministic per (seed, stream), different across streams and seeds.
  Tensor again = cpu->alloc(DType::F32, {100000}), other = cpu->alloc(DType::F32, {100000});
  cpu->fill_random(again, fill);
  EXPECT_EQ(std::memcmp(again.data, t.data, t.nbytes()), 0);
  fill.stream = 1;
  cpu->fill_random(other, fill);
  int same = 0;
  for (int64_t i = 0; i < t.numel(); ++i) same += other.ptr<float>()[i] == t.ptr<float>()[i];
  EXPECT_LT(same, 100);
}

TEST(CpuFillRandom, IntegersAndCodes) {
  auto cpu = make_cpu_backend();
  Tensor words = cpu->alloc(DType::I32, {4096});
  RandomFill fill;
  fill.bits_and = 0;
  fill.bits_or = 0x00081234u;
  cpu->fill_random(words, fill);
  for (int64_t i = 0; i < words.numel(); ++i) ASSERT_EQ(words.ptr<uint32_t>()[i], 0x00081234u);
  // All bits: every nibble value appears about as often as the others.
  fill.bits_and = ~0u;
  fill.bits_or = 0;
  cpu->fill_random(words, fill);
  int counts[16] = {};
  for (int64_t i = 0; i < words.numel(); ++i)
    for (int k = 0; k < 8; ++k) counts[(words.ptr<uint32_t>()[i] >> (4 * k)) & 0xF] += 1;
  for (int c : counts) EXPECT_NEAR(c, 4096 * 8 / 16, 200);
  // FP8: uniform over +-700 saturates to +-448 and never writes the NaN codes.
  Tensor codes = cpu->alloc(DType::F8E4M3, {4096});
  fill.offset = -700.f;
  fill.scale = 1400.f;
  cpu->fill_random(codes, fill);
  int saturated = 0;
  for (int64_t i = 0; i < codes.numel(); ++i) {
    const uint8_t code = codes.ptr<uint8_t>()[i];
    ASSERT_NE(code & 0x7f, 0x7f);
    saturated += std::fabs(e4m3_to_f32(code)) == kE4M3Max;
  }
  EXPECT_GT(saturated, 4096 / 4);
}

}  // namespace
}  // namespace fovea::test
