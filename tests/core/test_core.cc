#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "core/dtype.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

using namespace fovea;

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(3.140625f)), 3.140625f);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties go to even (1.0).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.00390625f)), 1.0f);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

// The encoder against torch's float8_e4m3fn on 2,122 values (ties of every binade, their neighbours, random
// values over eight scales, saturation, subnormals): tests/data/fp8/make_e4m3_golden.py.
TEST(DType, E4M3MatchesTorch) {
  std::ifstream in(std::string(FOVEA_SOURCE_DIR) + "/tests/data/fp8/e4m3_golden.txt");
  ASSERT_TRUE(in) << "tests/data/fp8/e4m3_golden.txt is missing";
  uint32_t bits = 0;
  unsigned code = 0;
  int lines = 0, wrong = 0;
  while (in >> std::hex >> bits >> code) {
    float f;
    std::memcpy(&f, &bits, 4);
    ++lines;
    if (f32_to_e4m3(f) != code && ++wrong <= 5)
      ADD_FAILURE() << "e4m3(" << f << ") = " << int(f32_to_e4m3(f)) << ", torch " << code;
  }
  EXPECT_EQ(lines, 2122);
  EXPECT_EQ(wrong, 0);
}

TEST(DType, E4M3DecodesEveryCode) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = uint8_t(c);
    const float v = e4m3_to_f32(code);
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(v)) << c;
      continue;
    }
    EXPECT_EQ(f32_to_e4m3(v), code) << "code " << c << " decodes to " << v;  // every finite code round-trips
  }
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), 0x1p-9f);
  Tensor codes = Tensor::host(DType::F8E4M3, {3});
  codes.ptr<uint8_t>()[0] = 0x38;  // 1.0
  codes.ptr<uint8_t>()[1] = 0xc5;  // -3.25
  codes.ptr<uint8_t>()[2] = 0x08;  // 2^-6
  const Tensor f = codes.to_f32();
  EXPECT_EQ(f.ptr<float>()[0], 1.0f);
  EXPECT_EQ(f.ptr<float>()[1], -3.25f);
  EXPECT_EQ(f.ptr<float>()[2], 0x1p-6f);
}

// One scale per array: its largest magnitude lands on the largest code, an all-zero array gets scale 1.
TEST(DType, QuantizeE4M3PerTensor) {
  const float v[4] = {0.5f, -2.0f, 0.25f, 1.0f};
  uint8_t codes[4];
  EXPECT_EQ(quantize_e4m3(v, 4, codes), 2.0f / 448.0f);
  EXPECT_EQ(codes[1], 0xfe);  // -448
  for (int i = 0; i < 4; ++i) EXPECT_EQ(codes[i], f32_to_e4m3(v[i] / (2.0f / 448.0f)));
  const float zeros[3] = {0.f, -0.f, 0.f};
  EXPECT_EQ(quantize_e4m3(zeros, 3, codes), 1.0f);
  EXPECT_EQ(codes[0], 0x00);
  EXPECT_EQ(codes[1], 0x80);
}

TEST(DType, F16RoundTrip) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f}) EXPECT_EQ(f16_to_f32(f32_to_f16(v)), v);
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(1e6f))));
}

TEST(Tensor, ViewAndRows) {
  Tensor t = Tensor::host(DType::F32, {4, 6});
  for (int i = 0; i < 24; ++i) t.ptr<float>()[i] = float(i);
  Tensor v = t.view({2, -1});
  EXPECT_EQ(v.shape, (Shape{2, 12}));
  Tensor r = t.rows(1, 3);
  EXPECT_EQ(r.shape, (Shape{2, 6}));
  EXPECT_EQ(r.ptr<float>()[0], 6.0f);
  EXPECT_THROW(t.view({5, -1}), Error);
  EXPECT_THROW(t.rows(3, 5), Error);
}

TEST(ThreadPool, ParallelForCoversRangeAndRethrows) {
  ThreadPool pool(3);
  std::vector<int> hits(1000, 0);
  pool.parallel_for(1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
  });
  for (int h : hits) EXPECT_EQ(h, 1);
  EXPECT_THROW(pool.parallel_for(10, [](int64_t b, int64_t) {
                 if (b > 0) FOVEA_FAIL("boom");
               }),
               Error);
}
