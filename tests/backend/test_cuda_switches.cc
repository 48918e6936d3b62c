// The CUDA backend's environment switches that need no GPU to check: FOVEA_CUDA_SKINNY_GEMM's shape list.
#include <gtest/gtest.h>

#include <cstdlib>

#include "backend/cuda/gemm_skinny.h"
#include "core/error.h"

namespace fovea::cuda {
namespace {

std::optional<std::vector<SkinnyWeightShape>> parse(const char* value) {
  if (value) setenv("FOVEA_CUDA_SKINNY_GEMM", value, 1);
  else unsetenv("FOVEA_CUDA_SKINNY_GEMM");
  auto shapes = skinny_shapes_from_env();
  unsetenv("FOVEA_CUDA_SKINNY_GEMM");
  return shapes;
}

TEST(SkinnyGemmSwitch, OffOnAndShapeLists) {
  EXPECT_FALSE(parse(nullptr).has_value());
  EXPECT_FALSE(parse("").has_value());
  EXPECT_FALSE(parse("0").has_value());
  const auto all = parse("1");
  ASSERT_TRUE(all.has_value());
  EXPECT_TRUE(all->empty());
  EXPECT_TRUE(skinny_shape_listed(*all, 28672, 4096));  // an empty list takes every shape

  const auto two = parse("6144x4096,4096x14336");
  ASSERT_TRUE(two.has_value());
  ASSERT_EQ(two->size(), 2u);
  EXPECT_TRUE(skinny_shape_listed(*two, 6144, 4096));
  EXPECT_TRUE(skinny_shape_listed(*two, 4096, 14336));
  EXPECT_FALSE(skinny_shape_listed(*two, 4096, 4096));
  EXPECT_FALSE(skinny_shape_listed(*two, 4096, 6144));  // N and K are not interchangeable
}

TEST(SkinnyGemmSwitch, RejectsMalformedLists) {
  for (const char* bad : {"yes", "6144", "6144x", "x4096", "6144x4096,", "6144*4096", "6144x4096x2", "0x4096", "-8x64"})
    EXPECT_THROW(parse(bad), Error) << bad;
}

}  // namespace
}  // namespace fovea::cuda
