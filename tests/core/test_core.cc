#include <gtest/gtest.h>

#include <cmath>

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
