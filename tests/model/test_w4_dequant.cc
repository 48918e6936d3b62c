// 4-bit AWQ / GPTQ checkpoints: unpacking of hand-packed tiny tensors (packed here the way the writers pack them:
// AutoAWQ's order_map loop, AutoGPTQ's row packing, GPTQModel's v1 word offset), the config parsing, the
// SafetensorsSet view of X.qweight as X.weight, and the demo model written with --quantize loading back close to
// the dense demo. Every error names the tensor or key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "model/config_json.h"
#include "model/demo_model.h"
#include "model/model_desc.h"
#include "model/safetensors.h"
#include "model/w4_dequant.h"
#include "model/w4_pack.h"
#include "test_util.h"

namespace fovea {
namespace {

using test::expect_error;
using test::TempDir;

Tensor words(Shape shape, const std::vector<uint32_t>& values) {
  Tensor t = Tensor::host(DType::I32, std::move(shape));
  EXPECT_EQ(size_t(t.numel()), values.size());
  std::copy(values.begin(), values.end(), t.ptr<uint32_t>());
  return t;
}

Tensor f16(Shape shape, const std::vector<float>& values) {
  Tensor t = Tensor::host(DType::F16, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.ptr<uint16_t>()[i] = f32_to_f16(values[i]);
  return t;
}

CheckpointQuantization awq(int group) {
  CheckpointQuantization q;
  q.method = WeightQuantMethod::Awq;
  q.bits = 4;
  q.group_size = group;
  return q;
}

CheckpointQuantization gptq(int group, bool v1, bool desc_act) {
  CheckpointQuantization q;
  q.method = WeightQuantMethod::Gptq;
  q.bits = 4;
  q.group_size = group;
  q.zeros_minus_one = v1;
  q.desc_act = desc_act;
  return q;
}

float at(const Tensor& t, int64_t row, int64_t col) { return t.ptr<float>()[row * t.dim(1) + col]; }

// The literal layouts: one word 0x76543210 (nibble i holds i), zero 0, scale 1.
TEST(W4Unpack, AwqNibbleOrderIsInterleaved) {
  // AutoAWQ packs column AWQ_ORDER[i] = [0, 2, 4, 6, 1, 3, 5, 7][i] into nibble i: column 1 is nibble 4, etc.
  const PackedW4Linear p{words({1, 1}, {0x76543210u}), words({1, 1}, {0u}), f16({1, 8}, std::vector<float>(8, 1)), {}};
  const Tensor w = dequantize_w4(p, awq(1), DType::F32, "t");
  ASSERT_EQ(w.shape, (Shape{8, 1}));
  const float expected[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int n = 0; n < 8; ++n) EXPECT_EQ(at(w, n, 0), expected[n]) << "output column " << n;
}

TEST(W4Unpack, GptqPacksInputRowsInPlainOrderAndV1ZerosAreMinusOne) {
  // qweight [1, 8]: word n holds rows 0..7 of column n; column 0's word is 0x76543210 (row k = k).
  std::vector<uint32_t> qw(8, 0u);
  qw[0] = 0x76543210u;
  // v1 zeros word 0x77777777: every zero is 7 + 1 = 8 (the symmetric zero of 4-bit GPTQ).
  const PackedW4Linear p{words({1, 8}, qw), words({1, 1}, {0x77777777u}), f16({1, 8}, std::vector<float>(8, 0.5f)), {}};
  const Tensor w = dequantize_w4(p, gptq(-1, true, false), DType::F32, "t");
  ASSERT_EQ(w.shape, (Shape{8, 8}));
  for (int k = 0; k < 8; ++k) EXPECT_EQ(at(w, 0, k), (float(k) - 8) * 0.5f) << "row " << k;
  for (int k = 0; k < 8; ++k) EXPECT_EQ(at(w, 3, k), -4.0f);  // q 0, z 8, s 0.5
  // The same word as a v2 checkpoint: the zero is 7.
  const Tensor v2 = dequantize_w4(p, gptq(-1, false, false), DType::F32, "t");
  EXPECT_EQ(at(v2, 0, 0), -3.5f);
}

// Values chosen per position, then packed as the writers do; the expected weight is the documented formula.
int q_value(int64_t k, int64_t n) { return int((3 * k + 5 * n + 1) % 16); }
int z_value(int64_t g, int64_t n) { return int((4 * g + 7 * n) % 16); }  // z[0][0] = 0: the v1 borrow case
float s_value(int64_t g, int64_t n) { return 0.25f * float(1 + g) + 0.125f * float(n); }

TEST(W4Unpack, AwqTwoGroupsTwoWords) {
  const int64_t in = 6, out = 16, group = 3, groups = 2, cols = out / 8;
  const int order_map[8] = {0, 2, 4, 6, 1, 3, 5, 7};  // AutoAWQ WQLinear_GEMM.from_linear
  std::vector<uint32_t> qw(size_t(in * cols), 0u), qz(size_t(groups * cols), 0u);
  std::vector<float> scales(size_t(groups * out));
  for (int64_t k = 0; k < in; ++k)
    for (int64_t c = 0; c < cols; ++c)
      for (int i = 0; i < 8; ++i) qw[size_t(k * cols + c)] |= uint32_t(q_value(k, c * 8 + order_map[i])) << (4 * i);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < cols; ++c)
      for (int i = 0; i < 8; ++i) qz[size_t(g * cols + c)] |= uint32_t(z_value(g, c * 8 + order_map[i])) << (4 * i);
    for (int64_t n = 0; n < out; ++n) scales[size_t(g * out + n)] = s_value(g, n);
  }
  const PackedW4Linear p{words({in, cols}, qw), words({groups, cols}, qz), f16({groups, out}, scales), {}};
  const Tensor w = dequantize_w4(p, awq(int(group)), DType::F32, "t");
  const Tensor b = dequantize_w4(p, awq(int(group)), DType::BF16, "t");
  ASSERT_EQ(w.shape, (Shape{out, in}));
  for (int64_t n = 0; n < out; ++n) {
    for (int64_t k = 0; k < in; ++k) {
      const float expected = float(q_value(k, n) - z_value(k / group, n)) * s_value(k / group, n);
      EXPECT_EQ(at(w, n, k), expected) << "n " << n << " k " << k;
      EXPECT_EQ(b.ptr<uint16_t>()[n * in + k], f32_to_bf16(expected));
    }
  }
}

TEST(W4Unpack, GptqActOrderGroupsAndV1Borrow) {
  const int64_t in = 16, out = 8, group = 4, groups = 4;
  // A permutation of the groups: each used 4 times, never in row order.
  const std::vector<int32_t> g_idx = {3, 0, 2, 1, 1, 3, 0, 2, 2, 1, 3, 0, 0, 2, 1, 3};
  std::vector<uint32_t> qw(size_t(in / 8 * out), 0u), qz_v2(size_t(groups), 0u);
  std::vector<float> scales(size_t(groups * out));
  for (int64_t k = 0; k < in; ++k)  // AutoGPTQ pack: qweight[row] |= intweight[j] << (4 * (j - i))
    for (int64_t n = 0; n < out; ++n) qw[size_t(k / 8 * out + n)] |= uint32_t(q_value(k, n)) << (4 * (k % 8));
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t n = 0; n < out; ++n) {
      qz_v2[size_t(g)] |= uint32_t(z_value(g, n)) << (4 * n);
      scales[size_t(g * out + n)] = s_value(g, n);
    }
  }
  std::vector<uint32_t> qz_v1 = qz_v2;  // GPTQModel's v2 -> v1: the word minus 0x11111111 (borrows included)
  for (auto& word : qz_v1) word -= 0x11111111u;
  ASSERT_EQ(z_value(0, 0), 0);  // so group 0's word borrows from its second nibble
  Tensor g_idx_tensor = Tensor::host(DType::I32, {in});
  std::copy(g_idx.begin(), g_idx.end(), g_idx_tensor.ptr<int32_t>());

  for (const bool v1 : {true, false}) {
    const PackedW4Linear p{words({in / 8, out}, qw), words({groups, 1}, v1 ? qz_v1 : qz_v2), f16({groups, out}, scales),
                           g_idx_tensor};
    const Tensor w = dequantize_w4(p, gptq(int(group), v1, true), DType::F32, "t");
    ASSERT_EQ(w.shape, (Shape{out, in}));
    for (int64_t n = 0; n < out; ++n) {
      for (int64_t k = 0; k < in; ++k) {
        const int64_t g = g_idx[size_t(k)];
        EXPECT_EQ(at(w, n, k), float(q_value(k, n) - z_value(g, n)) * s_value(g, n))
            << (v1 ? "v1" : "v2") << " n " << n << " k " << k;
      }
    }
  }
  // Without g_idx (desc_act false) row k is in group k / group.
  const PackedW4Linear plain{words({in / 8, out}, qw), words({groups, 1}, qz_v2), f16({groups, out}, scales), {}};
  const Tensor w = dequantize_w4(plain, gptq(int(group), false, false), DType::F32, "t");
  EXPECT_EQ(at(w, 5, 9), float(q_value(9, 5) - z_value(2, 5)) * s_value(2, 5));
}

TEST(W4Unpack, ShapeAndDtypeErrorsNameTheTensor) {
  const auto scales = f16({1, 8}, std::vector<float>(8, 1));
  expect_error(
      [&] {
        dequantize_w4({words({2, 1}, {0, 0}), words({2, 1}, {0, 0}), scales, {}}, awq(2), DType::F32, "f: x");
      },
      {"f: x.qzeros", "[2, 1]", "[1, 1]"});
  expect_error(
      [&] {
        dequantize_w4({words({3, 1}, {0, 0, 0}), words({1, 1}, {0}), scales, {}}, awq(2), DType::F32, "f: x");
      },
      {"f: x.qweight", "not a multiple of the group size 2"});
  Tensor f32_qweight = Tensor::host(DType::F32, {1, 1});
  expect_error(
      [&] {
        dequantize_w4({f32_qweight, words({1, 1}, {0}), scales, {}}, awq(1), DType::F32, "f: x");
      },
      {"f: x.qweight", "F32", "I32"});
  expect_error(
      [&] {
        dequantize_w4({words({1, 1}, {0}), words({1, 1}, {0}), f16({1, 4}, {1, 1, 1, 1}), {}}, awq(1), DType::F32,
                      "f: x");
      },
      {"f: x.scales", "[1, 4]", "[1, 8]"});
  // GPTQ: g_idx out of range, wrong length, act-order without g_idx.
  Tensor g_idx = Tensor::host(DType::I32, {8});
  g_idx.ptr<int32_t>()[3] = 1;
  const PackedW4Linear p{words({1, 8}, std::vector<uint32_t>(8, 0u)), words({1, 1}, {0}), scales, g_idx};
  expect_error([&] { dequantize_w4(p, gptq(8, true, true), DType::F32, "f: y"); }, {"f: y.g_idx[3] = 1", "1 groups"});
  const PackedW4Linear short_idx{p.qweight, p.qzeros, scales, Tensor::host(DType::I32, {4})};
  expect_error([&] { dequantize_w4(short_idx, gptq(8, true, true), DType::F32, "f: y"); }, {"f: y.g_idx", "[8]"});
  const PackedW4Linear no_idx{p.qweight, p.qzeros, scales, {}};
  expect_error([&] { dequantize_w4(no_idx, gptq(8, true, true), DType::F32, "f: y"); }, {"f: y.g_idx is missing"});
  CheckpointQuantization eight = gptq(8, true, false);
  eight.bits = 8;
  expect_error([&] { dequantize_w4(no_idx, eight, DType::F32, "f: y"); }, {"8-bit"});
}

CheckpointQuantization parse(const std::string& text) {
  const nlohmann::json json = nlohmann::json::parse(text);
  return read_checkpoint_quantization(JsonSection{json, "c.json"});
}

TEST(W4Config, ReadsTopLevelLlmConfigAndTextConfig) {
  EXPECT_FALSE(parse(R"({"llm_config": {}})").packed());
  const auto a = parse(R"({"llm_config": {"quantization_config": {"quant_method": "awq", "bits": 4,
                         "group_size": 128, "version": "GEMM", "zero_point": true}}})");
  EXPECT_EQ(a.method, WeightQuantMethod::Awq);
  EXPECT_EQ(a.group_size, 128);
  EXPECT_EQ(a.source, "c.json.llm_config.quantization_config");
  EXPECT_EQ(a.describe(), "awq 4-bit, group 128");
  const auto g = parse(R"({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": -1,
                         "desc_act": true, "sym": false}})");
  EXPECT_EQ(g.method, WeightQuantMethod::Gptq);
  EXPECT_TRUE(g.zeros_minus_one);  // checkpoint_format defaults to "gptq" (v1)
  EXPECT_EQ(g.describe(), "gptq 4-bit, one group over K, act-order, asym, v1 zeros");
  const auto v2 = parse(R"({"text_config": {"quantization_config": {"quant_method": "gptq", "bits": 4,
                          "checkpoint_format": "gptq_v2"}}})");
  EXPECT_FALSE(v2.zeros_minus_one);
  EXPECT_EQ(v2.group_size, 128);
  EXPECT_TRUE(v2.sym);
}

TEST(W4Config, RefusesWhatItCannotLoad) {
  expect_error([] { parse(R"({"quantization_config": {"quant_method": "awq", "bits": 8}})"); },
               {"c.json.quantization_config.bits 8 is not supported", "4-bit awq"});
  expect_error([] { parse(R"({"quantization_config": {"quant_method": "gptq", "bits": 3}})"); }, {"bits 3"});
  expect_error([] { parse(R"({"quantization_config": {"quant_method": "fp8"}})"); }, {"quant_method 'fp8'"});
  expect_error([] { parse(R"({"quantization_config": {"quant_method": "awq", "bits": 4, "version": "gemv"}})"); },
               {"version 'gemv'"});
  expect_error([] { parse(R"({"quantization_config": {"quant_method": "awq", "bits": 4, "zero_point": false}})"); },
               {"zero_point false"});
  expect_error(
      [] { parse(R"({"quantization_config": {"quant_method": "gptq", "bits": 4, "checkpoint_format": "marlin"}})"); },
      {"checkpoint_format 'marlin'"});
  expect_error([] { parse(R"({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 0}})"); },
               {"group_size 0"});
}

TEST(W4Safetensors, PackedLinearReadsAsItsWeight) {
  TempDir dir("w4set");
  const PackedW4Linear p{words({1, 1}, {0x76543210u}), words({1, 1}, {0u}), f16({1, 8}, std::vector<float>(8, 2)), {}};
  write_safetensors(dir.file("model.safetensors"), {{"lin.qweight", p.qweight},
                                                    {"lin.qzeros", p.qzeros},
                                                    {"lin.scales", p.scales},
                                                    {"odd.qweight", p.qweight},
                                                    {"plain.weight", test::f32_tensor({2, 2}, 1.0f)}});
  SafetensorsSet set(dir.path().string());
  EXPECT_TRUE(set.has("lin.weight"));  // reported even before the config is known
  expect_error([&] { set.get("lin.weight"); }, {"model.safetensors: lin.qweight", "no quantization_config"});
  set.set_quantization(awq(1));
  const Tensor w = set.get("lin.weight", {8, 1});
  EXPECT_EQ(w.dtype, DType::BF16);
  EXPECT_EQ(bf16_to_f32(w.ptr<uint16_t>()[1]), 8.0f);  // column 1 is nibble 4 (value 4) times scale 2
  EXPECT_EQ(set.file_of("lin.weight"), dir.file("model.safetensors"));
  EXPECT_EQ(set.get("plain.weight").dtype, DType::F32);
  EXPECT_FALSE(set.has("lin.bias"));
  expect_error([&] { set.get("odd.weight"); }, {"odd.qzeros is missing", "awq 4-bit"});
}

// compressed-tensors FP8 (what `fovea quantize --method fp8` and llm-compressor write): 8-bit float weights with
// channel or tensor scales load; anything else names the key.
TEST(Fp8Config, CompressedTensorsFloatWeights) {
  const std::string head = R"({"quantization_config": {"quant_method": "compressed-tensors", )";
  const auto q = parse(head + R"("format": "float-quantized", "config_groups": {"group_0": {"targets": ["Linear"],
      "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}}})");
  EXPECT_TRUE(q.fp8_weights);
  EXPECT_FALSE(q.packed());
  expect_error([&] { parse(head + R"("format": "pack-quantized", "config_groups": {}}})"); }, {"'pack-quantized'"});
  expect_error([&] { parse(head + R"("format": "float-quantized", "config_groups": {"g": {"weights": {"num_bits": 8,
      "type": "int", "strategy": "channel"}}}}})"); }, {"c.json.quantization_config.config_groups.g.weights"});
  expect_error([&] { parse(head + R"("format": "float-quantized", "config_groups": {"g": {"weights": {"num_bits": 8,
      "type": "float", "strategy": "block"}}}}})"); }, {"strategy 'block'"});
}

TEST(Fp8Safetensors, E4M3WeightReadsTimesItsRowScale) {
  TempDir dir("fp8set");
  Tensor codes = Tensor::host(DType::F8E4M3, {2, 2});
  for (int i = 0; i < 4; ++i) codes.ptr<uint8_t>()[i] = f32_to_e4m3(i + 1.0f);
  Tensor scale = Tensor::host(DType::F32, {2, 1});
  scale.ptr<float>()[0] = 2.0f, scale.ptr<float>()[1] = 0.5f;
  write_safetensors(dir.file("model.safetensors"), {{"lin.weight", codes}, {"lin.weight_scale", scale}});
  SafetensorsSet set(dir.path().string());
  EXPECT_EQ(set.get("lin.weight").dtype, DType::F8E4M3);  // without the config: as stored
  CheckpointQuantization q;
  q.fp8_weights = true;
  set.set_quantization(q);
  const Tensor w = set.get("lin.weight", {2, 2});
  ASSERT_EQ(w.dtype, DType::BF16);
  const float expected[4] = {2, 4, 1.5f, 2};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(bf16_to_f32(w.ptr<uint16_t>()[i]), expected[i]) << i;
}

// The quantized demo holds the dense demo's random weights, packed: each dequantized LLM weight is close to the
// dense one (4-bit round-to-nearest error), and the vision tower is untouched.
TEST(W4Demo, QuantizedDemoLoadsCloseToTheDenseDemo) {
  TempDir dir("w4demo");
  write_demo_model(dir.file("dense"), 3);
  const LoadedModel dense = load_model(dir.file("dense"));
  for (const auto method : {WeightQuantMethod::Awq, WeightQuantMethod::Gptq}) {
    const std::string name = method == WeightQuantMethod::Awq ? "awq" : "gptq";
    write_demo_model(dir.file(name), 3, method);
    const LoadedModel quant = load_model(dir.file(name));
    EXPECT_EQ(quant.desc.quantization.method, method);
    EXPECT_EQ(quant.desc.quantization.group_size, DemoModelShape::kQuantGroup);
    for (const char* weight : {"llm.0.qkv.weight", "llm.1.o.weight", "llm.0.gate_up.weight", "llm.1.down.weight"}) {
      const Tensor a = dense.weights.get(weight).to_f32(), b = quant.weights.get(weight).to_f32();
      ASSERT_EQ(a.shape, b.shape) << name << " " << weight;
      double err2 = 0, norm2 = 0;
      for (int64_t i = 0; i < a.numel(); ++i) {
        const double d = double(a.ptr<float>()[i]) - double(b.ptr<float>()[i]);
        err2 += d * d;
        norm2 += double(a.ptr<float>()[i]) * a.ptr<float>()[i];
      }
      // Round-to-nearest over 16 normal samples: a step of about range / 15 ~ 0.25 sigma, an error ~ step / sqrt(12).
      const double rel = std::sqrt(err2 / norm2);
      EXPECT_LT(rel, 0.12) << name << " " << weight;
      EXPECT_GT(rel, 0.0) << name << " " << weight << " was not quantized";
    }
    const Tensor& vit_dense = dense.weights.get("vit.0.qkv.weight");
    const Tensor& vit_quant = quant.weights.get("vit.0.qkv.weight");
    EXPECT_EQ(std::memcmp(vit_dense.data, vit_quant.data, vit_dense.nbytes()), 0);
  }
}

TEST(W4Pack, PackersRoundTripThroughTheUnpacker) {
  const int64_t out = 16, in = 32, group = 8;
  std::vector<float> w(size_t(out * in));
  // Fast oscillation: every group holds both signs, so AWQ's zero (clamped to [0, 15]) never cuts its range.
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(float(i) * 2.1f) * 0.1f;
  const Tensor a = dequantize_w4(pack_awq(w.data(), out, in, group), awq(int(group)), DType::F32, "awq");
  std::vector<int32_t> g_idx(static_cast<size_t>(in));
  for (int64_t k = 0; k < in; ++k) g_idx[size_t(k)] = int32_t((k * 3) % (in / group));  // 8 rows per group
  const Tensor g = dequantize_w4(pack_gptq(w.data(), out, in, g_idx, in / group, true), gptq(int(group), true, true),
                                 DType::F32, "g");
  for (int64_t i = 0; i < out * in; ++i) {
    EXPECT_NEAR(a.ptr<float>()[i], w[size_t(i)], 0.2 / 15 / 2 * 1.01) << i;  // asymmetric step <= range / 15
    EXPECT_NEAR(g.ptr<float>()[i], w[size_t(i)], 0.2 / 15 / 2 * 1.01) << i;  // symmetric step = 2 absmax / 15
  }
}

}  // namespace
}  // namespace fovea
