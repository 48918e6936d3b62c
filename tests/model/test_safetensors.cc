// safetensors reading: good files (single, sharded, zero-copy) and every kind of bad file, whose error must name
// the file and the tensor.
#include <gtest/gtest.h>

#include <cstring>

#include "model/safetensors.h"
#include "test_util.h"

namespace fovea {
namespace {

using test::expect_error;
using test::safetensors_bytes;
using test::TempDir;

TEST(Safetensors, ReadsWhatTheWriterWrote) {
  TempDir dir("roundtrip");
  Tensor a = test::f32_tensor({2, 3}, 1.0f);
  Tensor b = Tensor::host(DType::BF16, {4});
  for (int i = 0; i < 4; ++i) b.ptr<uint16_t>()[i] = f32_to_bf16(float(i) - 1.5f);
  Tensor c = Tensor::host(DType::I64, {1});
  c.ptr<int64_t>()[0] = -7;
  write_safetensors(dir.file("x.safetensors"), {{"a", a}, {"b", b}, {"c", c}}, {{"format", "pt"}});

  Tensor read_a;
  {
    const SafetensorsFile file(dir.file("x.safetensors"));
    EXPECT_EQ(file.metadata().at("format"), "pt");
    EXPECT_EQ(file.names(), (std::vector<std::string>{"a", "b", "c"}));
    read_a = file.tensor("a");
    const Tensor read_b = file.tensor("b"), read_c = file.tensor("c");
    EXPECT_EQ(read_b.dtype, DType::BF16);
    EXPECT_EQ(read_b.shape, Shape{4});
    EXPECT_EQ(std::memcmp(read_b.data, b.data, 8), 0);
    EXPECT_EQ(read_c.ptr<int64_t>()[0], -7);
  }
  // The file object is gone; the view keeps the mapping alive.
  EXPECT_EQ(read_a.shape, (Shape{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(read_a.ptr<float>()[i], 1.0f + float(i));
}

TEST(Safetensors, AllListedDtypesParse) {
  TempDir dir("dtypes");
  const std::string header =
      R"({"f8":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]},"u8":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},)"
      R"("i32":{"dtype":"I32","shape":[1],"data_offsets":[4,8]},"f16":{"dtype":"F16","shape":[2],"data_offsets":[8,12]},)"
      R"("empty":{"dtype":"F32","shape":[0,3],"data_offsets":[12,12]}})";
  dir.write("d.safetensors", safetensors_bytes(header, std::string(12, '\1')));
  const SafetensorsFile file(dir.file("d.safetensors"));
  EXPECT_EQ(file.tensor("f8").dtype, DType::F8E4M3);
  EXPECT_EQ(file.tensor("u8").dtype, DType::U8);
  EXPECT_EQ(file.tensor("i32").ptr<int32_t>()[0], 0x01010101);  // copied when misaligned, same value
  EXPECT_EQ(file.tensor("f16").dtype, DType::F16);
  EXPECT_EQ(file.tensor("empty").numel(), 0);
}

TEST(SafetensorsBad, TruncatedBeforeHeaderLength) {
  TempDir dir("trunc8");
  dir.write("t.safetensors", "abc");
  expect_error([&] { SafetensorsFile f(dir.file("t.safetensors")); }, {dir.file("t.safetensors"), "truncated"});
}

TEST(SafetensorsBad, HeaderLengthPastTheEnd) {
  TempDir dir("hdrlen");
  std::string bytes = safetensors_bytes("{}", "");
  bytes[0] = char(200);  // claims 200 header bytes, has 2
  dir.write("h.safetensors", bytes);
  expect_error([&] { SafetensorsFile f(dir.file("h.safetensors")); }, {dir.file("h.safetensors"), "header length"});
}

TEST(SafetensorsBad, BadJson) {
  TempDir dir("json");
  dir.write("j.safetensors", safetensors_bytes(R"({"a": {"dtype": "F32", )", ""));
  expect_error([&] { SafetensorsFile f(dir.file("j.safetensors")); }, {dir.file("j.safetensors"), "bad JSON"});
}

TEST(SafetensorsBad, UnknownDtype) {
  TempDir dir("dtype");
  dir.write("u.safetensors",
            safetensors_bytes(R"({"w.weight":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", std::string(8, 0)));
  expect_error([&] { SafetensorsFile f(dir.file("u.safetensors")); },
               {dir.file("u.safetensors"), "w.weight", "unknown dtype", "F64"});
}

TEST(SafetensorsBad, OffsetsPastTheEnd) {
  TempDir dir("past");
  dir.write("p.safetensors",
            safetensors_bytes(R"({"big":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", std::string(8, 0)));
  expect_error([&] { SafetensorsFile f(dir.file("p.safetensors")); },
               {dir.file("p.safetensors"), "big", "past the end"});
}

TEST(SafetensorsBad, TruncatedDataSection) {
  TempDir dir("cut");
  write_safetensors(dir.file("full.safetensors"), {{"x", test::f32_tensor({64}, 0.0f)}});
  std::string bytes = test::read_bytes(dir.file("full.safetensors"));
  dir.write("cut.safetensors", bytes.substr(0, bytes.size() - 10));
  expect_error([&] { SafetensorsFile f(dir.file("cut.safetensors")); },
               {dir.file("cut.safetensors"), "x", "truncated"});
}

TEST(SafetensorsBad, OffsetsDisagreeWithShape) {
  TempDir dir("size");
  dir.write("s.safetensors",
            safetensors_bytes(R"({"m":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,8]}})", std::string(8, 0)));
  expect_error([&] { SafetensorsFile f(dir.file("s.safetensors")); }, {dir.file("s.safetensors"), "m", "needs 12"});
}

TEST(SafetensorsBad, OverlappingTensors) {
  TempDir dir("overlap");
  const std::string header = R"({"first":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("second":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  dir.write("o.safetensors", safetensors_bytes(header, std::string(12, 0)));
  expect_error([&] { SafetensorsFile f(dir.file("o.safetensors")); },
               {dir.file("o.safetensors"), "first", "second", "overlaps"});
}

TEST(SafetensorsBad, NegativeDimensionAndBadOffsets) {
  TempDir dir("neg");
  dir.write("n.safetensors", safetensors_bytes(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", ""));
  expect_error([&] { SafetensorsFile f(dir.file("n.safetensors")); }, {dir.file("n.safetensors"), "t", "dimension"});
  dir.write("r.safetensors",
            safetensors_bytes(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", std::string(8, 0)));
  expect_error([&] { SafetensorsFile f(dir.file("r.safetensors")); }, {dir.file("r.safetensors"), "t"});
}

TEST(SafetensorsSet, MissingTensorAndWrongShapeNameFileAndTensor) {
  TempDir dir("set");
  write_safetensors(dir.file("model.safetensors"), {{"a.weight", test::f32_tensor({2, 2}, 0.0f)}});
  const SafetensorsSet set(dir.path().string());
  expect_error([&] { set.get("b.weight"); }, {dir.file("model.safetensors"), "b.weight", "missing"});
  expect_error([&] { set.get("a.weight", {4}); }, {dir.file("model.safetensors"), "a.weight", "[2, 2]", "[4]"});
  EXPECT_EQ(set.get("a.weight", {2, 2}).ptr<float>()[3], 3.0f);
}

TEST(SafetensorsSet, ShardedThroughIndex) {
  TempDir dir("sharded");
  write_safetensors(dir.file("model-00001-of-00002.safetensors"), {{"a", test::f32_tensor({3}, 10.0f)}});
  write_safetensors(dir.file("model-00002-of-00002.safetensors"), {{"b", test::f32_tensor({2}, 20.0f)}});
  dir.write(
      "model.safetensors.index.json",
      R"({"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})");
  const SafetensorsSet set(dir.path().string());
  EXPECT_EQ(set.get("a").ptr<float>()[2], 12.0f);
  EXPECT_EQ(set.get("b").ptr<float>()[1], 21.0f);
  EXPECT_NE(set.file_of("b").find("00002"), std::string::npos);

  // The index names a tensor its shard does not hold.
  dir.write("model.safetensors.index.json",
            R"({"weight_map":{"a":"model-00001-of-00002.safetensors","c":"model-00002-of-00002.safetensors"}})");
  expect_error([&] { SafetensorsSet s(dir.path().string()); }, {"model.safetensors.index.json", "c", "00002"});
}

TEST(SafetensorsSet, TensorInTwoShardsIsAnError) {
  TempDir dir("dup");
  write_safetensors(dir.file("one.safetensors"), {{"a", test::f32_tensor({1}, 0.0f)}});
  write_safetensors(dir.file("two.safetensors"), {{"a", test::f32_tensor({1}, 0.0f)}});
  expect_error([&] { SafetensorsSet s(dir.path().string()); }, {"a", "one.safetensors", "two.safetensors"});
}

TEST(SafetensorsSet, EmptyDirectory) {
  TempDir dir("empty");
  expect_error([&] { SafetensorsSet s(dir.path().string()); }, {dir.path().string(), "safetensors"});
}

}  // namespace
}  // namespace fovea
