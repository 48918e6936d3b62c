// Host->device uploads through the CUDA backend's pinned staging: sizes larger than the whole staging memory
// (so both halves are reused while earlier copies may still be queued), odd element counts (chunks and regions
// that end mid-way), and every conversion upload() offers, compared bit for bit with the host conversion after
// download(). The source is overwritten right after each upload(): upload() promises it may be reused.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ops_harness.h"

namespace fovea::test {
namespace {

// Bigger than the 2 x 64 MiB of staging in F32, and not a multiple of any chunk.
constexpr int64_t kLarge = (int64_t(50) << 20) + 3;

uint64_t mix(uint64_t x) {  // splitmix64: cheap, deterministic bits for every element
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Arbitrary bit patterns (NaN, Inf and subnormals included): conversions must round them as the host does.
Tensor random_bits(DType dtype, int64_t n, uint64_t seed) {
  Tensor t = Tensor::host(dtype, {n});
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = mix(seed * 0x100000001b3ull + uint64_t(i));
    if (dtype_size(dtype) == 4) {
      const uint32_t word = uint32_t(bits);
      std::memcpy(static_cast<uint8_t*>(t.data) + i * 4, &word, 4);
    } else {
      const uint16_t half = uint16_t(bits);
      std::memcpy(static_cast<uint8_t*>(t.data) + i * 2, &half, 2);
    }
  }
  return t;
}

// What download() must return for `src` uploaded into `dst_dtype`, as F32 (I32 stays I32) bit patterns.
std::vector<uint32_t> expected_bits(const Tensor& src, DType dst_dtype) {
  std::vector<uint32_t> out(size_t(src.numel()));
  for (int64_t i = 0; i < src.numel(); ++i) {
    uint32_t word = 0;
    if (src.dtype == DType::I32 || (src.dtype == DType::F32 && dst_dtype == DType::F32)) {
      std::memcpy(&word, static_cast<const uint8_t*>(src.data) + i * 4, 4);
    } else {
      const float value = src.dtype == DType::F32   ? src.ptr<float>()[i]
                          : src.dtype == DType::F16 ? f16_to_f32(src.ptr<uint16_t>()[i])
                                                    : bf16_to_f32(src.ptr<uint16_t>()[i]);
      const float stored = dst_dtype == DType::BF16  ? bf16_to_f32(f32_to_bf16(value))
                           : dst_dtype == DType::F16 ? f16_to_f32(f32_to_f16(value))
                                                     : value;
      std::memcpy(&word, &stored, 4);
    }
    out[size_t(i)] = word;
  }
  return out;
}

int64_t count_mismatches(const Tensor& back, const std::vector<uint32_t>& expected) {
  EXPECT_EQ(back.numel(), int64_t(expected.size()));
  int64_t bad = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    uint32_t word = 0;
    std::memcpy(&word, static_cast<const uint8_t*>(back.data) + i * 4, 4);
    if (word != expected[i] && bad++ < 5)
      ADD_FAILURE() << "element " << i << ": got 0x" << std::hex << word << ", expected 0x" << expected[i];
  }
  return bad;
}

struct Upload {
  DType src_dtype;
  DType dst_dtype;
  int64_t n;
};

// Uploads every case back to back without synchronising (so staging halves are reused while earlier copies are
// queued), scribbles over each source as soon as upload() returns, then downloads and compares all of them.
void check_uploads(Backend& gpu, const std::vector<Upload>& uploads) {
  std::vector<Tensor> devices;
  std::vector<std::vector<uint32_t>> expected;
  uint64_t seed = 1;
  for (const Upload& u : uploads) {
    Tensor src = random_bits(u.src_dtype, u.n, seed++);
    expected.push_back(expected_bits(src, u.dst_dtype));
    devices.push_back(gpu.alloc(u.dst_dtype, {u.n}));
    gpu.upload(devices.back(), src);
    std::memset(src.data, 0x5a, src.nbytes());
  }
  for (size_t i = 0; i < uploads.size(); ++i) {
    SCOPED_TRACE(testing::Message() << dtype_name(uploads[i].src_dtype) << " -> " << dtype_name(uploads[i].dst_dtype)
                                    << ", " << uploads[i].n << " elements");
    EXPECT_EQ(count_mismatches(gpu.download(devices[i]), expected[i]), 0);
  }
}

TEST_F(OpsTest, UploadLargeF32AcrossBothStagingHalves) {
  check_uploads(*gpu_,
                {{DType::F32, DType::F32, kLarge}, {DType::F32, DType::F32, 7}, {DType::F32, DType::F32, kLarge / 3}});
}

TEST_F(OpsTest, UploadConvertingLargeAndOdd) {
  check_uploads(*gpu_, {{DType::F32, DType::BF16, kLarge},
                        {DType::F16, DType::BF16, kLarge / 2 + 1},
                        {DType::F32, DType::BF16, 1},
                        {DType::F16, DType::BF16, 12345},
                        {DType::BF16, DType::F32, 4099},
                        {DType::F32, DType::F16, 1001}});
}

TEST_F(OpsTest, UploadI32AndManySmallUploads) {
  std::vector<Upload> uploads = {{DType::I32, DType::I32, (int64_t(9) << 20) + 5}};
  // Many tiny uploads fill a staging half region by region before it wraps.
  for (int i = 0; i < 300; ++i) uploads.push_back({DType::I32, DType::I32, 1 + (i * 7919) % 70000});
  uploads.push_back({DType::F32, DType::F32, kLarge / 2});
  check_uploads(*gpu_, uploads);
}

TEST_F(OpsTest, UploadRejectsNonFloatConversionAndViewsReachTheirRows) {
  Tensor ints = Tensor::host(DType::I32, {4});
  Tensor floats = gpu_->alloc(DType::F32, {4});
  EXPECT_THROW(gpu_->upload(floats, ints), Error);
  // Uploading into a row view must land in those rows only.
  Tensor whole = gpu_->alloc(DType::F32, {3, 5});
  gpu_->fill_zero(whole);
  Tensor row = Tensor::host(DType::F32, {1, 5});
  for (int i = 0; i < 5; ++i) row.ptr<float>()[i] = float(i + 1);
  Tensor middle = whole.rows(1, 2);
  gpu_->upload(middle, row);
  const Tensor back = gpu_->download(whole);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(back.ptr<float>()[i], (i >= 5 && i < 10) ? float(i - 4) : 0.f) << i;
}

// FOVEA_UPLOAD_PERF=1: prints the wall time of one 48-tile pixel upload (F32 [48,3,448,448], 116 MB) until
// upload() returns and until the copies are done. Measurement only, no assertion; skipped otherwise.
TEST_F(OpsTest, UploadPerfPixelsOfOneStep) {
  if (!std::getenv("FOVEA_UPLOAD_PERF")) GTEST_SKIP() << "set FOVEA_UPLOAD_PERF=1 to time uploads";
  using Clock = std::chrono::steady_clock;
  const Shape shape = {48, 3, 448, 448};
  Tensor host = random_bits(DType::F32, 48 * 3 * 448 * 448, 7).view(shape);
  for (DType dst_dtype : {DType::F32, DType::BF16}) {
    Tensor dev = gpu_->alloc(dst_dtype, shape);
    double returned_ms = 0, done_ms = 0;
    const int iters = 10;
    for (int i = -2; i < iters; ++i) {  // two warm-ups
      gpu_->synchronize();
      const auto start = Clock::now();
      gpu_->upload(dev, host);
      const auto returned = Clock::now();
      gpu_->synchronize();
      const auto done = Clock::now();
      if (i < 0) continue;
      returned_ms += std::chrono::duration<double, std::milli>(returned - start).count() / iters;
      done_ms += std::chrono::duration<double, std::milli>(done - start).count() / iters;
    }
    std::printf("upload F32 -> %-4s %6.1f MB: %7.3f ms to return, %7.3f ms to complete (%6.1f GB/s of source)\n",
                dtype_name(dst_dtype), host.nbytes() / 1e6, returned_ms, done_ms, host.nbytes() / done_ms / 1e6);
  }
}

}  // namespace
}  // namespace fovea::test
