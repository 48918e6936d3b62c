// Op consistency, CPU reference vs CUDA, for the shapes InternViT-6B and Qwen3 bring: the q/k RMSNorm over all heads
// (width 3200) and per head (Qwen3), the fused Qwen3 q/k norm + rope + KV write, the ViT's dense attention at 25 heads
// of 128, its norms at widths 3200 and 12800, its bias-free linears. Plus CPU-only checks of qk_rms_norm against a
// naive loop (those run in CI, where the CUDA cases skip).
#include "ops_harness.h"

namespace fovea::test {
namespace {

struct QkCase {
  int tokens, heads, kv_heads, head_dim;
  bool per_head;
};

std::string describe(const QkCase& c) {
  return " T=" + std::to_string(c.tokens) + " H=" + std::to_string(c.heads) + " KV=" + std::to_string(c.kv_heads) +
         " D=" + std::to_string(c.head_dim) + (c.per_head ? " per head" : " all heads");
}

// InternViT-6B (25 x 128 over all heads: 3200-value groups, the block kernel), Qwen3-8B (32 / 8 x 128 per head, the
// warp kernel), and odd shapes: a width not a multiple of 8 (the scalar path), one head, a 640-value group.
const QkCase kQkCases[] = {{1025, 25, 25, 128, false}, {7, 25, 25, 128, false}, {33, 32, 8, 128, true},
                           {1, 32, 8, 128, true},      {300, 16, 8, 128, true}, {9, 5, 5, 12, false},
                           {5, 5, 1, 20, true},        {17, 1, 1, 64, false},   {3, 5, 5, 128, false}};

TEST_F(OpsTest, QkRmsNorm) {
  for (const QkCase& c : kQkCases) {
    const int width = (c.heads + 2 * c.kv_heads) * c.head_dim;
    const int q_group = c.per_head ? c.head_dim : c.heads * c.head_dim;
    const int k_group = c.per_head ? c.head_dim : c.kv_heads * c.head_dim;
    Twin qkv = twin(random_host({c.tokens, width}, -3.f, 3.f));
    Twin q_gamma = twin(random_host({q_group}, 0.5f, 1.5f), 'w'),
         k_gamma = twin(random_host({k_group}, 0.5f, 1.5f), 'w');
    cpu_->qk_rms_norm(qkv.cpu, q_gamma.cpu, k_gamma.cpu, c.heads, c.kv_heads, c.head_dim, 1e-6f);
    gpu_->qk_rms_norm(qkv.gpu, q_gamma.gpu, k_gamma.gpu, c.heads, c.kv_heads, c.head_dim, 1e-6f);
    expect_close(qkv, kBf16Tol, "qk_rms_norm" + describe(c));
  }
}

// The fused Qwen3 step against the CPU's qk_rms_norm + rope + kv_write, prefill and decode sizes, positions past 4096,
// scattered slots; a padding slot (-1) writes nothing.
TEST_F(OpsTest, QkNormRopeKvWrite) {
  for (const QkCase& c : kQkCases) {
    if (!c.per_head) continue;
    const int width = (c.heads + 2 * c.kv_heads) * c.head_dim;
    Twin qkv = twin(random_host({c.tokens, width}, -3.f, 3.f));
    Twin q_gamma = twin(random_host({c.head_dim}, 0.5f, 1.5f), 'w'),
         k_gamma = twin(random_host({c.head_dim}, 0.5f, 1.5f), 'w');
    Twin pos = twin(int_host(random_ints(c.tokens, 0, 9000)), 'i');
    CacheTwin cache = scattered_cache(c.tokens, c.kv_heads, c.head_dim);
    cpu_->qk_norm_rope_kv_write(qkv.cpu, q_gamma.cpu, k_gamma.cpu, 1e-6f, pos.cpu, cache.slots.cpu, c.heads, c.kv_heads,
                                c.head_dim, 1e6f, cache.cpu);
    gpu_->qk_norm_rope_kv_write(qkv.gpu, q_gamma.gpu, k_gamma.gpu, 1e-6f, pos.gpu, cache.slots.gpu, c.heads, c.kv_heads,
                                c.head_dim, 1e6f, cache.gpu);
    gpu_->synchronize();
    expect_close(qkv, kBf16Tol, "qk_norm_rope_kv_write qkv" + describe(c));
    expect_close(cache.k, kBf16Tol, "qk_norm_rope_kv_write K" + describe(c));
    expect_close(cache.v, kBf16Tol, "qk_norm_rope_kv_write V" + describe(c));
  }
}

TEST_F(OpsTest, AttentionDenseInternViT6B) {
  // 25 heads of 128 over 1025 tokens: the tensor-core (wgmma on sm_90a) path, as InternViT-300M's 16 x 64.
  for (int batch : {1, 3}) {
    const int tokens = 1025, heads = 25, head_dim = 128, rows = batch * tokens, width = heads * head_dim;
    Twin qkv = twin(random_host({rows, 3 * width}, -2.f, 2.f)), out = output({rows, width});
    cpu_->attention_dense(qkv.cpu, batch, tokens, heads, head_dim, out.cpu);
    gpu_->attention_dense(qkv.gpu, batch, tokens, heads, head_dim, out.gpu);
    expect_close(out, kAttentionTol, "attention_dense InternViT-6B B=" + std::to_string(batch));
  }
}

TEST_F(OpsTest, NormsAtInternViT6BWidths) {
  for (int n : {3200, 12800}) {  // the ViT's RMSNorm, the projector's LayerNorm over 4 x 3200
    const std::string shape = " M=67 N=" + std::to_string(n);
    Twin x = twin(random_host({67, n}, -2.f, 3.f)), gamma = twin(random_host({n}), 'w'),
         beta = twin(random_host({n}), 'w');
    Twin y = output({67, n}), r = output({67, n});
    cpu_->layer_norm(x.cpu, gamma.cpu, beta.cpu, 1e-5f, y.cpu);
    gpu_->layer_norm(x.gpu, gamma.gpu, beta.gpu, 1e-5f, y.gpu);
    expect_close(y, kBf16Tol, "layer_norm" + shape);
    cpu_->rms_norm(x.cpu, gamma.cpu, 1e-6f, r.cpu);
    gpu_->rms_norm(x.gpu, gamma.gpu, 1e-6f, r.gpu);
    expect_close(r, kBf16Tol, "rms_norm" + shape);
  }
}

TEST_F(OpsTest, LinearsAtInternViT6BShapes) {
  struct Case {
    int n, k;
    bool bias;
    Activation act;
    const char* what;
  };
  // qkv (no bias), proj, fc1 + GELU, fc2; the projector's first linear (12800 -> 5120, InternVL2.5-38B).
  for (Case c : {Case{9600, 3200, false, Activation::None, "qkv"}, Case{3200, 3200, true, Activation::None, "proj"},
                 Case{12800, 3200, true, Activation::Gelu, "fc1"}, Case{3200, 12800, true, Activation::None, "fc2"},
                 Case{5120, 12800, true, Activation::Gelu, "projector fc1"}}) {
    const int m = 37;
    Twin x = twin(random_host({m, c.k})), w = twin(random_host({c.n, c.k}, -0.05f, 0.05f), 'w');
    Twin bias = twin(random_host({c.n}), 'w'), y = output({m, c.n});
    cpu_->linear(x.cpu, w.cpu, c.bias ? bias.cpu : Tensor{}, y.cpu, c.act);
    gpu_->linear(x.gpu, w.gpu, c.bias ? bias.gpu : Tensor{}, y.gpu, c.act);
    expect_close(y, kBf16Tol, std::string("linear InternViT-6B ") + c.what);
  }
}

// CPU only: qk_rms_norm's two scopes against a naive loop written from backend.h.
TEST(CpuQkRmsNorm, ScopesFollowTheGammas) {
  auto cpu = make_cpu_backend();
  const int T = 3, H = 3, KV = 1, D = 4, W = (H + 2 * KV) * D;
  Tensor qkv = cpu->alloc(DType::F32, {T, W});
  for (int i = 0; i < T * W; ++i) qkv.ptr<float>()[i] = float((i * 37) % 23) / 5.f - 2.f;
  Tensor before = Tensor::host(DType::F32, {T, W});
  std::copy_n(qkv.ptr<float>(), T * W, before.ptr<float>());
  auto gammas = [&](int n) {
    Tensor g = cpu->alloc(DType::F32, {n});
    for (int i = 0; i < n; ++i) g.ptr<float>()[i] = 0.5f + 0.1f * float(i);
    return g;
  };
  auto expect_scope = [&](int q_group, int k_group) {
    cpu->copy(qkv, before);
    cpu->qk_rms_norm(qkv, gammas(q_group), gammas(k_group), H, KV, D, 1e-6f);
    for (int t = 0; t < T; ++t) {
      const float* in = before.ptr<float>() + t * W;
      const float* out = qkv.ptr<float>() + t * W;
      for (int c = 0; c < W; ++c) {
        const bool is_q = c < H * D, is_k = !is_q && c < (H + KV) * D;
        if (!is_q && !is_k) {
          EXPECT_EQ(out[c], in[c]) << "v changed at " << c;
          continue;
        }
        const int part = is_q ? 0 : H * D, group = is_q ? q_group : k_group;
        const int first = part + (c - part) / group * group;
        double sq = 0;
        for (int i = first; i < first + group; ++i) sq += double(in[i]) * in[i];
        const double want = in[c] / std::sqrt(sq / group + 1e-6) * (0.5 + 0.1 * (c - first));
        EXPECT_NEAR(out[c], want, 1e-5) << "t " << t << " c " << c << " groups " << q_group << "/" << k_group;
      }
    }
  };
  expect_scope(D, D);           // Qwen3: every head on its own
  expect_scope(H * D, KV * D);  // InternViT-6B: the whole projection
  cpu->copy(qkv, before);
  EXPECT_THROW(cpu->qk_rms_norm(qkv, gammas(6), gammas(D), H, KV, D, 1e-6f),
               Error);  // neither D nor H*D
}

}  // namespace
}  // namespace fovea::test
