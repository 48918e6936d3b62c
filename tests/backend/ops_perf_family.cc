// Perf mode FOVEA_OPS_PERF=family of test_ops: the ops of one InternViT-6B layer (width 3200, 25 heads of 128, MLP
// 12800; RMSNorm, bias-free qkv, the q/k RMSNorm over all heads) over 8 tiles, with a per-tile estimate of the 45
// layers, and Qwen3-8B's q/k norm + rope + KV write at prefill and decode sizes, fused and as two ops.
#include "ops_perf.h"

namespace fovea::test {
namespace {

void vit6b_layer(Perf& p) {
  const int batch = 8, tokens = 1025, hidden = 3200, heads = 25, head_dim = 128, mlp = 12800, layers = 45;
  const int64_t m = int64_t(batch) * tokens;
  Backend& b = p.b();
  Tensor x = p.random(DType::BF16, {m, hidden}), normed = p.random(DType::BF16, {m, hidden});
  Tensor qkv = p.random(DType::BF16, {m, 3 * hidden}), attn = p.random(DType::BF16, {m, hidden});
  Tensor proj = p.random(DType::BF16, {m, hidden}), act = p.random(DType::BF16, {m, mlp});
  Tensor w_qkv = p.random(DType::BF16, {3 * hidden, hidden}, 0.02f);
  Tensor w_proj = p.random(DType::BF16, {hidden, hidden}, 0.02f), b_hidden = p.random(DType::BF16, {hidden});
  Tensor w_fc1 = p.random(DType::BF16, {mlp, hidden}, 0.02f), b_fc1 = p.random(DType::BF16, {mlp});
  Tensor w_fc2 = p.random(DType::BF16, {hidden, mlp}, 0.01f);
  Tensor gamma = p.random(DType::BF16, {hidden}), q_norm = p.random(DType::BF16, {hidden});
  Tensor k_norm = p.random(DType::BF16, {hidden}), ls = p.random(DType::BF16, {hidden}, 0.1f);

  const double act_bytes = double(m) * hidden * 2;
  auto norm = [&] { b.rms_norm(x, gamma, 1e-6f, normed); };
  auto lin_qkv = [&] { b.linear(normed, w_qkv, Tensor{}, qkv); };
  auto qk = [&] { b.qk_rms_norm(qkv, q_norm, k_norm, heads, heads, head_dim, 1e-6f); };
  auto attention = [&] { b.attention_dense(qkv, batch, tokens, heads, head_dim, attn); };
  auto lin_proj = [&] { b.linear(attn, w_proj, b_hidden, proj); };
  auto residual = [&] { b.scale_add(x, proj, ls); };
  auto residual_norm = [&] { b.scale_add_norm(x, proj, ls, NormKind::Rms, gamma, Tensor{}, 1e-6f, normed); };
  auto fc1 = [&] { b.linear(normed, w_fc1, b_fc1, act, Activation::Gelu); };
  auto fc2 = [&] { b.linear(act, w_fc2, b_hidden, proj); };
  const double attn_flop = 4.0 * batch * heads * double(tokens) * tokens * head_dim;
  p.report_bytes("vit6b rms_norm [8200,3200]", p.time_ms(norm), 2 * act_bytes);
  p.report_flops("vit6b linear qkv 3200->9600", p.time_ms(lin_qkv), 2.0 * m * hidden * 3 * hidden);
  p.report_bytes("vit6b qk_rms_norm (q, k over 3200)", p.time_ms(qk), 4 * act_bytes);
  p.report_flops("vit6b attention_dense B=8 T=1025 H=25 D=128", p.time_ms(attention), attn_flop);
  p.report_flops("vit6b linear proj 3200->3200 +bias", p.time_ms(lin_proj), 2.0 * m * hidden * hidden);
  p.report_bytes("vit6b scale_add [8200,3200]", p.time_ms(residual), 3 * act_bytes);
  p.report_bytes("vit6b scale_add_rms_norm [8200,3200]", p.time_ms(residual_norm), 4 * act_bytes);
  p.report_flops("vit6b linear fc1 3200->12800 +bias+gelu", p.time_ms(fc1), 2.0 * m * hidden * mlp);
  p.report_flops("vit6b linear fc2 12800->3200 +bias", p.time_ms(fc2), 2.0 * m * hidden * mlp);
  // The encoder's sequence: the previous layer's MLP branch is folded in while norm1 is computed.
  const double layer_ms = p.time_ms(
      [&] {
        residual_norm();
        lin_qkv();
        qk();
        attention();
        lin_proj();
        residual_norm();
        fc1();
        fc2();
      },
      5);
  const double layer_flop = 2.0 * m * (4.0 * hidden * hidden + 2.0 * hidden * mlp) + attn_flop;
  p.report_flops("vit6b full layer (8 tiles)", layer_ms, layer_flop);
  std::printf("%-44s %9.3f ms per tile (%d layers), %.1f tiles/s\n", "vit6b encoder estimate",
              layer_ms * layers / batch, layers, 1000.0 * batch / (layer_ms * layers));
}

// Qwen3-8B: 32 q heads, 8 KV heads of 128; the fused kernel against qk_rms_norm + rope_kv_write.
void qwen3_qk_rope(Perf& p, int tokens) {
  const int heads = 32, kv_heads = 8, head_dim = 128, block_size = 16;
  const int blocks = (tokens + block_size - 1) / block_size;
  Backend& b = p.b();
  Tensor qkv = p.random(DType::BF16, {tokens, (heads + 2 * kv_heads) * head_dim});
  Tensor q_norm = p.random(DType::BF16, {head_dim}), k_norm = p.random(DType::BF16, {head_dim});
  KvCacheLayer cache{p.random(DType::BF16, {blocks, block_size, kv_heads, head_dim}),
                     p.random(DType::BF16, {blocks, block_size, kv_heads, head_dim})};
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  for (int i = 0; i < tokens; ++i) ids[size_t(i)] = i;
  Tensor host = Tensor::host(DType::I32, {tokens});
  std::copy(ids.begin(), ids.end(), host.ptr<int32_t>());
  Tensor positions = b.alloc(DType::I32, {tokens}), slots = b.alloc(DType::I32, {tokens});
  b.upload(positions, host);
  b.upload(slots, host);
  const double bytes = double(tokens) * (heads + 4 * kv_heads) * head_dim * 2 * 2;  // q, k in and out; k, v to cache
  const std::string size = " T=" + std::to_string(tokens);
  p.report_bytes(("qwen3 qk_norm_rope_kv_write fused" + size).c_str(), p.time_ms([&] {
    b.qk_norm_rope_kv_write(qkv, q_norm, k_norm, 1e-6f, positions, slots, heads, kv_heads, head_dim, 1e6f, cache);
  }),
                 bytes);
  p.report_bytes(("qwen3 qk_rms_norm + rope_kv_write" + size).c_str(), p.time_ms([&] {
    b.qk_rms_norm(qkv, q_norm, k_norm, heads, kv_heads, head_dim, 1e-6f);
    b.rope_kv_write(qkv, positions, slots, heads, kv_heads, head_dim, 1e6f, cache);
  }),
                 bytes);
}

}  // namespace

void family_ops(Perf& p) {
  vit6b_layer(p);
  for (int tokens : {64, 8192}) qwen3_qk_rope(p, tokens);
}

}  // namespace fovea::test
