// Perf mode of test_ops (FOVEA_OPS_PERF=1; =family the InternViT-6B layer and Qwen3's q/k norm step, =attention
// only the attention ops, =w4 only the W4A16 GEMMs of w4_gemms, =prefill only the LLM's prefill GEMMs): times the key
// ops of the CUDA backend at the real shapes with CUDA
// events on the backend's stream and prints TFLOP/s or GB/s against the H200 ceilings measured on the device
// machine (bf16 GEMM ~790 TFLOP/s, device copy ~4.3 TB/s counting reads and writes). No assertions on speed.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_info.h"
#include "backend/cuda/gemm_w4.h"
#include "backend/w4_layout.h"
#include "ops_harness.h"
#include "ops_perf.h"

namespace fovea::test {
namespace {

void vit_layer(Perf& p) {
  const int batch = 32, tokens = 1025, hidden = 1024, heads = 16, head_dim = 64, mlp = 4096;
  const int64_t m = int64_t(batch) * tokens;
  Backend& b = p.b();
  Tensor x = p.random(DType::BF16, {m, hidden}), normed = p.random(DType::BF16, {m, hidden});
  Tensor qkv = p.random(DType::BF16, {m, 3 * hidden}), attn = p.random(DType::BF16, {m, hidden});
  Tensor proj = p.random(DType::BF16, {m, hidden}), act = p.random(DType::BF16, {m, mlp});
  Tensor w_qkv = p.random(DType::BF16, {3 * hidden, hidden}, 0.03f), b_qkv = p.random(DType::BF16, {3 * hidden});
  Tensor w_proj = p.random(DType::BF16, {hidden, hidden}, 0.03f), b_hidden = p.random(DType::BF16, {hidden});
  Tensor w_fc1 = p.random(DType::BF16, {mlp, hidden}, 0.03f), b_fc1 = p.random(DType::BF16, {mlp});
  Tensor w_fc2 = p.random(DType::BF16, {hidden, mlp}, 0.015f);
  Tensor gamma = p.random(DType::BF16, {hidden}), beta = p.random(DType::BF16, {hidden});
  Tensor ls = p.random(DType::BF16, {hidden}, 0.1f);

  const double act_bytes = double(m) * hidden * 2;
  auto norm = [&] { b.layer_norm(x, gamma, beta, 1e-6f, normed); };
  auto lin_qkv = [&] { b.linear(normed, w_qkv, b_qkv, qkv); };
  auto attention = [&] { b.attention_dense(qkv, batch, tokens, heads, head_dim, attn); };
  auto lin_proj = [&] { b.linear(attn, w_proj, b_hidden, proj); };
  auto residual = [&] { b.scale_add(x, proj, ls); };
  auto residual_norm = [&] { b.scale_add_norm(x, proj, ls, NormKind::Layer, gamma, beta, 1e-6f, normed); };
  auto fc1 = [&] { b.linear(normed, w_fc1, b_fc1, act, Activation::Gelu); };
  auto fc2 = [&] { b.linear(act, w_fc2, b_hidden, proj); };
  p.report_bytes("vit layer_norm [32800,1024]", p.time_ms(norm), 2 * act_bytes);
  p.report_flops("vit linear qkv 1024->3072 +bias", p.time_ms(lin_qkv), 2.0 * m * hidden * 3 * hidden);
  p.report_flops("vit attention_dense B=32 T=1025 H=16 D=64", p.time_ms(attention),
                 4.0 * batch * heads * double(tokens) * tokens * head_dim);
  p.report_flops("vit linear proj 1024->1024 +bias", p.time_ms(lin_proj), 2.0 * m * hidden * hidden);
  p.report_bytes("vit scale_add [32800,1024]", p.time_ms(residual), 3 * act_bytes);
  p.report_bytes("vit scale_add_layer_norm [32800,1024]", p.time_ms(residual_norm), 4 * act_bytes);
  p.report_flops("vit linear fc1 1024->4096 +bias+gelu", p.time_ms(fc1), 2.0 * m * hidden * mlp);
  p.report_flops("vit linear fc2 4096->1024 +bias", p.time_ms(fc2), 2.0 * m * hidden * mlp);
  // The encoder's sequence: the previous layer's MLP branch is folded in while norm1 is computed.
  const double layer_ms = p.time_ms([&] {
    residual_norm();
    lin_qkv();
    attention();
    lin_proj();
    residual_norm();
    fc1();
    fc2();
  }, 10);
  const double layer_flop = 2.0 * m * (4.0 * hidden * hidden + 2.0 * hidden * mlp) +
                            4.0 * batch * heads * double(tokens) * tokens * head_dim;
  p.report_flops("vit full layer (32 tiles)", layer_ms, layer_flop);
  std::printf("%-44s %9.3f ms per tile (24 layers; transformers: 1.79 incl. projector)\n", "vit encoder estimate",
              layer_ms * 24 / batch);
}

// The ViT attention alone (what FOVEA_OPS_PERF=attention times, with the paged cases).
void vit_attention(Perf& p) {
  const int batch = 32, tokens = 1025, heads = 16, head_dim = 64;
  const int64_t m = int64_t(batch) * tokens;
  Tensor qkv = p.random(DType::BF16, {m, 3 * heads * head_dim}), out = p.b().alloc(DType::BF16, {m, heads * head_dim});
  p.report_flops("vit attention_dense B=32 T=1025 H=16 D=64",
                 p.time_ms([&] { p.b().attention_dense(qkv, batch, tokens, heads, head_dim, out); }),
                 4.0 * batch * heads * double(tokens) * tokens * head_dim);
}

void llm_prefill(Perf& p) {
  const int64_t m = 8192;
  struct Gemm {
    const char* what;
    int64_t k, n;
  };
  for (Gemm g : {Gemm{"llm wqkv 4096->6144 M=8192", 4096, 6144}, Gemm{"llm wo 4096->4096 M=8192", 4096, 4096},
                 Gemm{"llm w13 4096->28672 M=8192", 4096, 28672}, Gemm{"llm w2 14336->4096 M=8192", 14336, 4096}}) {
    Tensor x = p.random(DType::BF16, {m, g.k}), w = p.random(DType::BF16, {g.n, g.k}, 0.02f);
    Tensor y = p.b().alloc(DType::BF16, {m, g.n});
    p.report_flops(g.what, p.time_ms([&] { p.b().linear(x, w, Tensor{}, y); }), 2.0 * m * g.k * g.n);
  }
  // FP8 W8A8 at the same shapes, the activation's quantization included (not tuned yet), under each scaling
  // recipe (backend/fp8_recipe.h): per tensor (as before), per channel x per token, 128-blocks.
  for (Fp8Scaling scaling : {Fp8Scaling::Tensor, Fp8Scaling::Channel, Fp8Scaling::Block}) {
    const std::string recipe = scaling == Fp8Scaling::Tensor ? "" : std::string(" ") + fp8_scaling_name(scaling);
    for (Gemm g : {Gemm{"wqkv 4096->6144 M=8192", 4096, 6144}, Gemm{"w13 4096->28672 M=8192", 4096, 28672},
                   Gemm{"w2 14336->4096 M=8192", 14336, 4096}}) {
      Tensor x = p.random(DType::BF16, {m, g.k}), w8 = p.fp8_codes({g.n, g.k});
      Tensor w_scale = p.fp8_scales(fp8_weight_scale_shape(scaling, g.n, g.k));
      Tensor y = p.b().alloc(DType::BF16, {m, g.n});
      p.report_flops(("llm fp8" + recipe + " " + g.what).c_str(),
                     p.time_ms([&] { p.b().linear_fp8_scaled(x, w8, w_scale, scaling, Tensor{}, y); }),
                     2.0 * m * g.k * g.n);
    }
  }
  Tensor x = p.random(DType::BF16, {m, 4096}), gamma = p.random(DType::BF16, {4096}), y = p.random(DType::BF16, {m, 4096});
  p.report_bytes("llm rms_norm [8192,4096]", p.time_ms([&] { p.b().rms_norm(x, gamma, 1e-5f, y); }),
                 2.0 * m * 4096 * 2);
  Tensor res = p.random(DType::BF16, {m, 4096});
  p.report_bytes("llm add_rms_norm [8192,4096]", p.time_ms([&] { p.b().add_rms_norm(res, x, gamma, 1e-5f, y); }),
                 4.0 * m * 4096 * 2);
  Tensor qkv = p.random(DType::BF16, {m, 6144}), positions = p.b().alloc(DType::I32, {m});
  p.b().fill_zero(positions);
  p.report_bytes("llm rope [8192 tok, 32+8 heads D128]",
                 p.time_ms([&] { p.b().rope(qkv, positions, 32, 8, 128, 1e6f); }), 2.0 * m * 5120 * 2);
  // A 64-sequence decode step's rope: few tokens, so the kernel splits the heads over the grid.
  const int64_t decode_tokens = 64;
  Tensor decode_qkv = p.random(DType::BF16, {decode_tokens, 6144});
  Tensor decode_positions = p.b().alloc(DType::I32, {decode_tokens});
  p.b().fill_zero(decode_positions);
  p.report_bytes("llm rope [64 tok, 32+8 heads D128]",
                 p.time_ms([&] { p.b().rope(decode_qkv, decode_positions, 32, 8, 128, 1e6f); }),
                 2.0 * decode_tokens * 5120 * 2);
  // A layer's fused rope + KV write at a prefill step: q and k rotated in place, K and V copied to slots scattered
  // over a cache (bytes: q + k read and written, v read, k and v written).
  const int64_t cache_rows = m + 4096;
  std::vector<int32_t> slot_values(static_cast<size_t>(cache_rows));
  for (int64_t i = 0; i < cache_rows; ++i) slot_values[size_t(i)] = int32_t(i);
  std::shuffle(slot_values.begin(), slot_values.end(), std::mt19937(3));
  slot_values.resize(size_t(m));
  Tensor slots_host = Tensor::host(DType::I32, {m});
  std::copy(slot_values.begin(), slot_values.end(), slots_host.ptr<int32_t>());
  Tensor slots = p.b().alloc(DType::I32, {m});
  p.b().upload(slots, slots_host);
  KvCacheLayer cache{p.random(DType::BF16, {cache_rows / 16, 16, 8, 128}),
                     p.random(DType::BF16, {cache_rows / 16, 16, 8, 128})};
  p.report_bytes("llm rope_kv_write [8192 tok, 32+8+8 heads D128]",
                 p.time_ms([&] { p.b().rope_kv_write(qkv, positions, slots, 32, 8, 128, 1e6f, cache); }),
                 2.0 * m * (2 * 5120 + 1024 + 2 * 1024));
  Tensor gate_up = p.random(DType::BF16, {m, 2 * 14336}), h = p.b().alloc(DType::BF16, {m, 14336});
  p.report_bytes("llm silu_mul [8192,14336]", p.time_ms([&] { p.b().silu_mul(gate_up, h); }), 3.0 * m * 14336 * 2);
  Fp8Rows h8{p.b().alloc(DType::F8E4M3, {m, 14336}), p.b().alloc(DType::F32, {m})};
  p.report_bytes("llm silu_mul_fp8 [8192,14336]", p.time_ms([&] { p.b().silu_mul_fp8(gate_up, h8); }),
                 m * 14336 * (2.0 * 2 + 1));
  Fp8Rows normed8{p.b().alloc(DType::F8E4M3, {m, 4096}), p.b().alloc(DType::F32, {m})};
  p.report_bytes("llm add_rms_norm_fp8 [8192,4096]",
                 p.time_ms([&] { p.b().add_rms_norm_fp8(res, x, gamma, 1e-5f, normed8); }), m * 4096 * (3.0 * 2 + 1));
}

// The decoder's GEMMs at a 64-sequence decode step (M = 64): memory-bound, so reported as weight bytes read per
// second.
// Calls rotate over copies of the weight totalling >= 256 MB: in a real step no weight is still in the 50 MB L2
// when its layer comes round again.
void decode_gemms(Perf& p) {
  const int64_t m = 64;
  const double rotation_bytes = 256e6;
  struct Gemm {
    const char* what;
    int64_t k, n;
  };
  for (Gemm g : {Gemm{"decode wqkv 4096->6144 M=64 (weights)", 4096, 6144},
                 Gemm{"decode wo 4096->4096 M=64 (weights)", 4096, 4096},
                 Gemm{"decode w13 4096->28672 M=64 (weights)", 4096, 28672},
                 Gemm{"decode w2 14336->4096 M=64 (weights)", 14336, 4096},
                 Gemm{"decode lm_head 4096->92553 M=64 (weights)", 4096, 92553},
                 Gemm{"decode lm_head-like 4096->92544 M=64 (weights)", 4096, 92544},
                 Gemm{"decode lm_head-like 4096->92560 M=64 (weights)", 4096, 92560}}) {
    const double weight_bytes = 2.0 * double(g.n) * double(g.k);
    Tensor x = p.random(DType::BF16, {m, g.k}), y = p.b().alloc(DType::BF16, {m, g.n});
    std::vector<Tensor> w(size_t(std::max(1.0, std::ceil(rotation_bytes / weight_bytes))));
    for (Tensor& copy : w) copy = p.random(DType::BF16, {g.n, g.k}, 0.02f);
    size_t next = 0;
    p.report_bytes(g.what, p.time_ms([&] { p.b().linear(x, w[next++ % w.size()], Tensor{}, y); }), weight_bytes);
  }
}

// The fused kernel with half and twice the K splits linear_w4 picks (w4_fused_splits), where the workspace holds
// their partials: rows "w4 <shape> M=<m> S=<splits>", to tune the split rule on the device.
void w4_split_sweep(Perf& p, int64_t n, int64_t k, int64_t group, const Tensor& x, Tensor& y,
                    const std::vector<W4Weight>& w4, size_t& next, const Tensor& workspace, const std::string& shape,
                    double w4_bytes) {
  const int64_t m = x.dim(0);
  const int chosen = cuda::w4_fused_splits(n, k, cuda::sm_count(0));
  const size_t offset = cuda::w4_partials_offset(k, false);
  auto* partials = reinterpret_cast<float*>(static_cast<unsigned char*>(workspace.data) + offset);
  for (int splits : {chosen / 2, chosen * 2}) {
    const bool fits = offset + size_t(splits) * size_t(m) * size_t(n) * 4 <= workspace.nbytes();
    if (splits < 1 || splits > cuda::kW4MaxSplits || splits > k / cuda::kW4TileK || !fits) continue;
    const double ms = p.time_ms([&] {
      const W4Weight& w = w4[next++ % w4.size()];
      cuda::launch_w4_fused(static_cast<const cuda::bf16*>(x.data), static_cast<const uint32_t*>(w.codes.data),
                            static_cast<const uint32_t*>(w.params.data), nullptr, static_cast<cuda::bf16*>(y.data),
                            partials, int(m), int(n), int(k), int(group), splits, p.stream());
    });
    const std::string label = "w4 " + shape + " S=" + std::to_string(splits) + " (not " + std::to_string(chosen) + ")";
    std::printf("%-44s %9.1f us %8.0f GB/s (4-bit weight bytes)\n", label.c_str(), ms * 1e3, w4_bytes / ms / 1e6);
  }
}

// W4A16 (linear_w4, gemm_w4.h) at the InternLM2-7B projections, group 128, beside the bf16 linear at the same
// shape: microseconds and GB/s of the weight bytes each reads (4-bit: codes + params; bf16: 2 per weight),
// weights rotated over >= 256 MB copies as in decode_gemms. M = 1, 16, 64 run the fused kernel, M = 256 the
// dequantize + cuBLASLt path. Rows "w4 <shape> M=<m>", w4_split_sweep's rows and "bf16 <shape> M=<m>"; then
// "w4 dequantize <shape>", the large-M path's dequantization alone in GB/s of bf16 bytes written.
// FOVEA_OPS_PERF=w4 times only these.
void w4_gemms(Perf& p) {
  const double rotation_bytes = 256e6;
  const int64_t group = 128;
  struct Gemm {
    const char* name;
    int64_t n, k;
  };
  std::mt19937 rng(99);
  for (Gemm g : {Gemm{"wqkv 4096->6144", 6144, 4096}, Gemm{"wo 4096->4096", 4096, 4096},
                 Gemm{"w13 4096->28672", 28672, 4096}, Gemm{"w2 14336->4096", 4096, 14336}}) {
    const int64_t words = w4::code_words(g.k), groups = g.k / group;
    const double w4_bytes = double(g.n) * double(words) * 4 + double(g.n) * double(groups) * 4;
    const double bf16_bytes = 2.0 * double(g.n) * double(g.k);
    Tensor codes_host = Tensor::host(DType::I32, {g.n, words}), params_host = Tensor::host(DType::I32, {g.n, groups});
    for (int64_t i = 0; i < codes_host.numel(); ++i) codes_host.ptr<uint32_t>()[i] = uint32_t(rng());
    for (int64_t i = 0; i < params_host.numel(); ++i)
      params_host.ptr<uint32_t>()[i] = w4::make_param(f32_to_f16(0.01f + 1e-5f * float(i % 97)), false, int(i % 16));
    std::vector<W4Weight> w4(size_t(std::max(1.0, std::ceil(rotation_bytes / w4_bytes))));
    for (W4Weight& w : w4) {
      w.codes = p.b().alloc(DType::I32, codes_host.shape);
      w.params = p.b().alloc(DType::I32, params_host.shape);
      p.b().upload(w.codes, codes_host);
      p.b().upload(w.params, params_host);
      w.k = g.k;
      w.group = group;
    }
    std::vector<Tensor> dense(size_t(std::max(1.0, std::ceil(rotation_bytes / bf16_bytes))));
    for (Tensor& copy : dense) copy = p.random(DType::BF16, {g.n, g.k}, 0.02f);
    Tensor workspace = p.b().alloc(DType::U8, {int64_t(p.b().linear_w4_workspace_bytes(g.n, g.k, group, false))});
    size_t next = 0;
    for (int64_t m : {1, 16, 64, 256}) {
      Tensor x = p.random(DType::BF16, {m, g.k}), y = p.b().alloc(DType::BF16, {m, g.n});
      const std::string shape = std::string(g.name) + " M=" + std::to_string(m);
      auto run_w4 = [&] { p.b().linear_w4(x, w4[next++ % w4.size()], Tensor{}, y, workspace); };
      const double w4_ms = p.time_ms(run_w4);
      const double bf16_ms = p.time_ms([&] { p.b().linear(x, dense[next++ % dense.size()], Tensor{}, y); });
      std::printf("%-44s %9.1f us %8.0f GB/s (4-bit weight bytes)\n", ("w4 " + shape).c_str(), w4_ms * 1e3,
                  w4_bytes / w4_ms / 1e6);
      if (m <= cuda::kW4FusedMaxRows) w4_split_sweep(p, g.n, g.k, group, x, y, w4, next, workspace, shape, w4_bytes);
      std::printf("%-44s %9.1f us %8.0f GB/s (bf16 weight bytes)\n", ("bf16 " + shape).c_str(), bf16_ms * 1e3,
                  bf16_bytes / bf16_ms / 1e6);
    }
    auto* dense_out = static_cast<cuda::bf16*>(workspace.data);
    const double ms = p.time_ms([&] {
      const W4Weight& w = w4[next++ % w4.size()];
      cuda::launch_w4_dequantize(static_cast<const uint32_t*>(w.codes.data),
                                 static_cast<const uint32_t*>(w.params.data), nullptr, dense_out, int(g.n), int(g.k),
                                 int(group), p.stream());
    });
    const std::string label = std::string("w4 dequantize ") + g.name;
    std::printf("%-44s %9.1f us %8.0f GB/s (bf16 bytes written)\n", label.c_str(), ms * 1e3, bf16_bytes / ms / 1e6);
  }
}

// Sequences of equal q_len and ctx_len over a cache with a shuffled block table. planned_ctx > ctx_len plays a
// recorded decode step, whose plan (splits) is made for the bucket's padded context.
void paged(Perf& p, const char* what, int seqs, int q_len, int ctx_len, int planned_ctx = 0) {
  const int heads = 32, kv_heads = 8, head_dim = 128, block_size = 16;
  const int blocks_per_seq = (ctx_len + block_size - 1) / block_size, num_blocks = seqs * blocks_per_seq;
  std::vector<int32_t> order(static_cast<size_t>(num_blocks));
  for (int i = 0; i < num_blocks; ++i) order[size_t(i)] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(5));
  Tensor table = Tensor::host(DType::I32, {seqs, blocks_per_seq});
  std::copy(order.begin(), order.end(), table.ptr<int32_t>());
  Tensor cu = Tensor::host(DType::I32, {seqs + 1}), ctx = Tensor::host(DType::I32, {seqs});
  for (int s = 0; s <= seqs; ++s) cu.ptr<int32_t>()[s] = s * q_len;
  for (int s = 0; s < seqs; ++s) ctx.ptr<int32_t>()[s] = ctx_len;
  auto put = [&](const Tensor& host) {
    Tensor t = p.b().alloc(host.dtype, host.shape);
    p.b().upload(t, host);
    return t;
  };
  PagedAttentionBatch batch{put(cu), put(ctx), put(table), seqs, q_len, std::max(ctx_len, planned_ctx)};
  const Shape cache_shape{num_blocks, block_size, kv_heads, head_dim};
  KvCacheLayer cache{p.random(DType::BF16, cache_shape), p.random(DType::BF16, cache_shape)};
  const int tokens = seqs * q_len;
  Tensor qkv = p.random(DType::BF16, {tokens, (heads + 2 * kv_heads) * head_dim});
  Tensor out = p.b().alloc(DType::BF16, {tokens, heads * head_dim});
  const double ms = p.time_ms([&] { p.b().paged_attention(qkv, batch, cache, heads, kv_heads, head_dim, out); });
  if (q_len == 1) {
    p.report_bytes(what, ms, 2.0 * seqs * ctx_len * kv_heads * head_dim * 2);
  } else {
    double pairs = 0;  // causal (query, key) pairs
    for (int j = 0; j < q_len; ++j) pairs += ctx_len - q_len + j + 1;
    p.report_flops(what, ms, 4.0 * seqs * heads * head_dim * pairs);
  }
}

TEST(OpsPerf, KeyOpsAtRealShapes) {
  if (!std::getenv("FOVEA_OPS_PERF")) GTEST_SKIP() << "set FOVEA_OPS_PERF=1 to time the CUDA ops";
  if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA GPU";
  const std::string mode = std::getenv("FOVEA_OPS_PERF");
  const bool only_attention = mode == "attention";
  Perf p;
  if (mode == "w4") {
    w4_gemms(p);
    return;
  }
  if (mode == "family") {  // InternViT-6B and Qwen3 (ops_perf_family.cc)
    family_ops(p);
    return;
  }
  if (mode == "prefill") {  // the LLM's prefill GEMMs, bf16 and each FP8 recipe (fp8_recipes_device.sh)
    llm_prefill(p);
    return;
  }
  if (only_attention) {
    vit_attention(p);
  } else {
    vit_layer(p);
    llm_prefill(p);
    decode_gemms(p);
    w4_gemms(p);
  }
  paged(p, "paged prefill 2 x 3409 tok H32 KV8 D128", 2, 3409, 3409);
  paged(p, "paged chunk 2048 after 1361 cached", 1, 2048, 3409);
  paged(p, "paged decode 64 seq x ctx 3409 (KV bytes)", 64, 1, 3409);
  paged(p, "paged decode 8 seq x ctx 3409 (KV bytes)", 8, 1, 3409);
  paged(p, "paged decode 64 seq x ctx 480 (KV bytes)", 64, 1, 480);
  paged(p, "paged decode 256 seq x ctx 480", 256, 1, 480);
  paged(p, "paged decode 1 seq x ctx 3409", 1, 1, 3409);
  paged(p, "paged decode 64 seq x ctx 480 planned 1024", 64, 1, 480, 1024);
  paged(p, "paged decode 64 seq x ctx 352 planned 1024", 64, 1, 352, 1024);
}

}  // namespace
}  // namespace fovea::test
