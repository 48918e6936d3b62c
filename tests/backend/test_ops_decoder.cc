// Op consistency, CPU reference vs CUDA: attention (dense ViT and paged decoder), rope, kv_write. Plus a few
// CPU-only checks against naive in-test formulas that pin the layouts both backends implement; those run in CI,
// where the CUDA cases skip.
#include "ops_harness.h"

namespace fovea::test {
namespace {

TEST_F(OpsTest, AttentionDense) {
  struct Case {
    int batch, tokens, heads, head_dim;
  };
  // 64 and 128 are the tensor-core fast paths, 24/32 the padded ones, 160 and 256 the generic path. On sm_90a the
  // keys of 1,025, 197, 72 and 259 tokens are whole tiles after 1, 5, 8 and 3 leading keys taken apart (p.lead).
  for (Case c : {Case{2, 1025, 2, 64}, Case{3, 197, 2, 64}, Case{1, 72, 2, 64}, Case{2, 1024, 2, 64},
                 Case{2, 259, 3, 128}, Case{3, 33, 2, 32}, Case{1, 7, 3, 24}, Case{2, 65, 1, 128},
                 Case{1, 40, 2, 160}, Case{1, 17, 1, 256}, Case{4, 1, 2, 64}, Case{2, 37, 3, 12},
                 Case{1, 70, 2, 20}}) {
    const int rows = c.batch * c.tokens, width = c.heads * c.head_dim;
    Twin qkv = twin(random_host({rows, 3 * width}, -2.f, 2.f)), out = output({rows, width});
    cpu_->attention_dense(qkv.cpu, c.batch, c.tokens, c.heads, c.head_dim, out.cpu);
    gpu_->attention_dense(qkv.gpu, c.batch, c.tokens, c.heads, c.head_dim, out.gpu);
    expect_close(out, kAttentionTol,
                 "attention_dense B=" + std::to_string(c.batch) + " T=" + std::to_string(c.tokens) +
                     " H=" + std::to_string(c.heads) + " D=" + std::to_string(c.head_dim));
  }
}

// A paged step: sequence s has q_lens[s] new tokens and ctx_lens[s] cached ones; its blocks are scattered over
// the cache by a shuffled block table, the cache holds random data everywhere (also where nothing may be read).
struct PagedCase {
  std::vector<int> q_lens, ctx_lens;
  int heads, kv_heads, head_dim, block_size;
  bool unused_entries_past_cache = false;  // table entries past a sequence's blocks name no block of the cache
};

std::string describe(const PagedCase& c) {
  std::string s = "H=" + std::to_string(c.heads) + " KV=" + std::to_string(c.kv_heads) +
                  " D=" + std::to_string(c.head_dim) + " bs=" + std::to_string(c.block_size) + " (q,ctx):";
  for (size_t i = 0; i < c.q_lens.size(); ++i)
    s += " (" + std::to_string(c.q_lens[i]) + "," + std::to_string(c.ctx_lens[i]) + ")";
  return s;
}

class PagedOpsTest : public OpsTest {
 protected:
  void run_case(const PagedCase& c) {
    const int seqs = int(c.q_lens.size());
    std::vector<int32_t> cu_q{0};
    int max_blocks = 1, needed = 0, max_q = 0, max_ctx = 0;
    for (int s = 0; s < seqs; ++s) {
      cu_q.push_back(cu_q.back() + c.q_lens[s]);
      const int blocks = (c.ctx_lens[s] + c.block_size - 1) / c.block_size;
      max_blocks = std::max(max_blocks, blocks + 1);
      needed += blocks;
      max_q = std::max(max_q, c.q_lens[s]);
      max_ctx = std::max(max_ctx, c.ctx_lens[s]);
    }
    const int num_blocks = needed + 3;
    const std::vector<int32_t> order = permutation(num_blocks);
    std::vector<int32_t> table(static_cast<size_t>(seqs) * max_blocks);
    int next = 0;
    for (int s = 0; s < seqs; ++s) {
      const int blocks = (c.ctx_lens[s] + c.block_size - 1) / c.block_size;
      for (int b = 0; b < max_blocks; ++b) {  // unused entries still name real blocks: they must not be read
        const int unused = c.unused_entries_past_cache ? num_blocks + b : order[size_t(num_blocks - 1)];
        table[size_t(s) * max_blocks + b] = b < blocks ? order[size_t(next++)] : unused;
      }
    }
    const int tokens = cu_q.back(), width = (c.heads + 2 * c.kv_heads) * c.head_dim;
    Twin qkv = twin(random_host({tokens, width}, -2.f, 2.f));
    const Shape cache_shape{num_blocks, c.block_size, c.kv_heads, c.head_dim};
    Twin k = twin(random_host(cache_shape, -2.f, 2.f)), v = twin(random_host(cache_shape));
    Twin cu = twin(int_host(cu_q), 'i'), ctx = twin(int_host(std::vector<int32_t>(c.ctx_lens.begin(), c.ctx_lens.end())), 'i');
    Twin bt = twin(int_host(table, {seqs, max_blocks}), 'i');
    Twin out = output({tokens, c.heads * c.head_dim});
    PagedAttentionBatch cpu_batch{cu.cpu, ctx.cpu, bt.cpu, seqs, max_q, max_ctx};
    PagedAttentionBatch gpu_batch{cu.gpu, ctx.gpu, bt.gpu, seqs, max_q, max_ctx};
    cpu_->paged_attention(qkv.cpu, cpu_batch, KvCacheLayer{k.cpu, v.cpu}, c.heads, c.kv_heads, c.head_dim, out.cpu);
    gpu_->paged_attention(qkv.gpu, gpu_batch, KvCacheLayer{k.gpu, v.gpu}, c.heads, c.kv_heads, c.head_dim, out.gpu);
    expect_close(out, kAttentionTol, "paged_attention " + describe(c));
  }
};

TEST_F(PagedOpsTest, DecodeBatch) {
  for (int head_dim : {128, 64, 24, 12, 20}) {
    std::vector<int> ctx = random_ints(6, 1, 300);
    run_case({std::vector<int>(6, 1), ctx, 8, 2, head_dim, 16});
  }
  run_case({{1, 1, 1}, {1000, 5, 129}, 32, 8, 128, 16});  // InternLM2-7B heads, one long context
  // Contexts past 256 keys take the split-KV path on CUDA: short chunks (causal inside a split), empty splits.
  run_case({{3, 1}, {700, 513}, 8, 2, 128, 16});
  run_case({{2, 1, 1}, {2100, 40, 300}, 14, 2, 64, 32});
}

// Steps whose query rows of one (sequence, KV head) fit a 16-row tile run the split-KV decode kernel
// (attention_decode.cuh). Its key tiles are 16 keys per warp and its splits
// whole multiples of the block's tiles, so contexts sit around 16, 64 and 256 keys; small batches split the
// keys (each split a partial merged by the combine kernel), big ones write the output directly.
std::vector<int> decode_steps(size_t n) { return std::vector<int>(n, 1); }

TEST_F(PagedOpsTest, DecodeInternVlShapeMixedContexts) {
  const std::vector<int> ctx{1, 15, 16, 17, 255, 256, 257, 611, 3409};
  run_case({decode_steps(ctx.size()), ctx, 32, 8, 128, 16});  // InternVL2-8B: 32 q heads, 8 KV heads, D 128
}

TEST_F(PagedOpsTest, DecodeGroupSizes) {
  const std::vector<int> ctx{1, 17, 64, 200, 513, 1000, 2049};
  for (int heads : {8, 16, 64}) run_case({decode_steps(ctx.size()), ctx, heads, 8, 128, 16});  // group 1, 2, 8
  run_case({decode_steps(ctx.size()), ctx, 16, 1, 128, 16});  // group 16: all 16 rows of the tile are real
}

TEST_F(PagedOpsTest, DecodeHeadDims) {
  const std::vector<int> ctx{1, 16, 100, 257, 700, 1500};
  // 64 exact, 72 padded to 128, 40 padded to 64, 32 exact, 8 padded to 32.
  for (int head_dim : {64, 72, 40, 32, 8}) run_case({decode_steps(ctx.size()), ctx, 32, 8, head_dim, 16});
}

TEST_F(PagedOpsTest, DecodeShortChunks) {
  // 2-4 new tokens with group 4 (8-16 rows): causal inside the last tile, a chunk as long as its context.
  run_case({{2, 3, 4, 1, 4}, {2, 300, 611, 17, 4}, 32, 8, 128, 16});
  run_case({{4, 4, 2}, {20, 1100, 129}, 8, 2, 64, 16});
  run_case({{5, 1}, {900, 40}, 32, 8, 128, 16});  // 5 x 4 = 20 rows: past one tile, the general kernel
}

TEST_F(PagedOpsTest, DecodeBlockSizesAndTableEntriesPastCache) {
  const std::vector<int> ctx{1, 30, 257, 640, 1200};
  for (int block_size : {8, 16, 32, 64}) {  // 16-key tiles spanning two cache blocks, or part of one
    PagedCase c{decode_steps(ctx.size()), ctx, 32, 8, 128, block_size};
    c.unused_entries_past_cache = true;
    run_case(c);
  }
}

TEST_F(PagedOpsTest, DecodeOneSplit) {
  // Contexts under 128 keys never split; 80 sequences x 8 KV heads fill two waves of 4-warp blocks on an H200
  // without splitting either: the kernel normalises and writes bf16 itself.
  run_case({decode_steps(12), random_ints(12, 1, 127), 32, 8, 128, 16});
  run_case({decode_steps(80), random_ints(80, 1, 400), 32, 8, 128, 16});
}

TEST_F(PagedOpsTest, PrefillAndChunkedPrefill) {
  run_case({{200}, {200}, 4, 4, 64, 16});                             // plain prefill, no GQA
  run_case({{37, 1, 64}, {100, 77, 64}, 14, 2, 64, 16});              // Qwen2-0.5B grouping, mixed step
  run_case({{70, 3}, {70, 300}, 8, 2, 128, 32});                      // chunk + decode-like tail
  run_case({{33, 9}, {50, 9}, 4, 1, 16, 8});                          // tiny head dim, MQA
  run_case({{19, 1}, {40, 7}, 2, 2, 32, 16});
  run_case({{12, 1}, {30, 5}, 4, 2, 256, 16});                        // generic path
  run_case({{45, 1, 9}, {45, 80, 20}, 6, 2, 12, 16});                 // InternLM2 golden head dim, generic path
  run_case({{30, 2}, {30, 41}, 4, 4, 20, 8});                         // head dim not a multiple of 8
}

// Steps with more than 64 query rows per (sequence, KV head) run the wgmma kernel on sm_90a: multi-tile
// prompts with decode rows in the same step, group sizes 4 and 7, head dims padded to 64 and 128, key tiles
// cut by the cache's block size and by kv_len.
TEST_F(PagedOpsTest, PrefillLongAndPaddedHeadDims) {
  run_case({{300, 1, 129, 17}, {300, 700, 700, 17}, 32, 8, 128, 16});  // InternLM2-7B heads
  run_case({{257, 2}, {400, 258}, 28, 4, 128, 16});                    // Qwen2.5-7B grouping (7)
  run_case({{96, 40}, {96, 200}, 4, 2, 72, 16});                       // head dim 72 -> 128
  run_case({{130}, {1000}, 2, 1, 40, 32});                             // head dim 40 -> 64, long context
  run_case({{65, 64}, {65, 64}, 2, 2, 96, 8});                         // one row over a tile, one at it
}

TEST_F(OpsTest, AttentionDenseVitShape) {
  const int batch = 3, tokens = 1025, heads = 4, head_dim = 64;  // InternViT-300M tile: 1,025 tokens
  const int rows = batch * tokens, width = heads * head_dim;
  Twin qkv = twin(random_host({rows, 3 * width}, -2.f, 2.f)), out = output({rows, width});
  cpu_->attention_dense(qkv.cpu, batch, tokens, heads, head_dim, out.cpu);
  gpu_->attention_dense(qkv.gpu, batch, tokens, heads, head_dim, out.gpu);
  expect_close(out, kAttentionTol, "attention_dense ViT tile shape");
}

// The leading tokens a dense problem takes apart (the class token of a ViT tile) folded in last: make key 0 of
// every image dominate most rows' softmax, so that the fold's running-max update is the one that decides.
TEST_F(OpsTest, AttentionDenseLeadKeyDominates) {
  for (int head_dim : {64, 128}) {
    const int batch = 2, tokens = 2 * head_dim + 1, heads = 2, width = heads * head_dim;
    Tensor host = random_host({int64_t(batch) * tokens, 3 * width});
    for (int image = 0; image < batch; ++image)  // K of token 0 times 8 (exact in bf16)
      for (int c = width; c < 2 * width; ++c) host.ptr<float>()[int64_t(image) * tokens * 3 * width + c] *= 8.f;
    Twin qkv = twin(host), out = output({batch * tokens, width});
    cpu_->attention_dense(qkv.cpu, batch, tokens, heads, head_dim, out.cpu);
    gpu_->attention_dense(qkv.gpu, batch, tokens, heads, head_dim, out.gpu);
    expect_close(out, kAttentionTol, "attention_dense, key 0 dominant, D=" + std::to_string(head_dim));
  }
}

TEST_F(OpsTest, RopeAndKvWrite) {
  struct Case {
    int tokens, heads, kv_heads, head_dim;
  };
  for (Case c : {Case{9, 4, 2, 64}, Case{33, 32, 8, 128}, Case{5, 2, 1, 24}, Case{7, 4, 2, 12}, Case{6, 3, 1, 20}}) {
    const int width = (c.heads + 2 * c.kv_heads) * c.head_dim;
    const std::string tag = " D=" + std::to_string(c.head_dim);
    Twin qkv = twin(random_host({c.tokens, width})), pos = twin(int_host(random_ints(c.tokens, 0, 40000)), 'i');
    cpu_->rope(qkv.cpu, pos.cpu, c.heads, c.kv_heads, c.head_dim, 1e6f);
    gpu_->rope(qkv.gpu, pos.gpu, c.heads, c.kv_heads, c.head_dim, 1e6f);
    expect_close(qkv, kBf16Tol, "rope" + tag);

    CacheTwin cache = scattered_cache(c.tokens, c.kv_heads, c.head_dim);
    cpu_->kv_write(qkv.cpu, cache.slots.cpu, c.heads, c.kv_heads, c.head_dim, cache.cpu);
    gpu_->kv_write(qkv.gpu, cache.slots.gpu, c.heads, c.kv_heads, c.head_dim, cache.gpu);
    expect_close(cache.k, kBf16Tol, "kv_write K" + tag);
    expect_close(cache.v, kBf16Tol, "kv_write V" + tag);
  }
}

// The CUDA rope splits the rotated heads into chunks over the grid when the tokens are few (decode steps) and
// runs one chunk once they fill the GPU: token counts from 1 to past that point (2,112 on an H200), InternLM2's
// 32+8 heads and an odd 5+1, head dims 128 and 64.
TEST_F(OpsTest, RopeDecodeAndPrefillSizes) {
  struct Case {
    int tokens, heads, kv_heads, head_dim;
  };
  for (Case c : {Case{1, 32, 8, 128}, Case{3, 32, 8, 128}, Case{64, 32, 8, 128}, Case{256, 32, 8, 128},
                 Case{2500, 32, 8, 128}, Case{1, 5, 1, 64}, Case{3, 5, 1, 128}, Case{64, 5, 1, 64},
                 Case{600, 5, 1, 64}, Case{64, 32, 8, 64}}) {
    const int width = (c.heads + 2 * c.kv_heads) * c.head_dim;
    Twin qkv = twin(random_host({c.tokens, width})), pos = twin(int_host(random_ints(c.tokens, 0, 40000)), 'i');
    cpu_->rope(qkv.cpu, pos.cpu, c.heads, c.kv_heads, c.head_dim, 1e6f);
    gpu_->rope(qkv.gpu, pos.gpu, c.heads, c.kv_heads, c.head_dim, 1e6f);
    expect_close(qkv, kBf16Tol,
                 "rope T=" + std::to_string(c.tokens) + " H=" + std::to_string(c.heads) + "+" +
                     std::to_string(c.kv_heads) + " D=" + std::to_string(c.head_dim));
  }
}

// The CUDA backend fuses rope and kv_write into one kernel: it must leave qkv and both caches as the two calls do
// (the CPU backend runs them one after the other), at decode and prefill sizes and with head dims whose pairs do
// not fill a warp. (Negative slots: the CPU reference rejects them, the CUDA kernels skip them.)
TEST_F(OpsTest, FusedRopeKvWrite) {
  struct Case {
    int tokens, heads, kv_heads, head_dim;
  };
  for (Case c : {Case{1, 32, 8, 128}, Case{64, 32, 8, 128}, Case{600, 32, 8, 128}, Case{9, 5, 1, 64},
                 Case{7, 4, 2, 20}, Case{2500, 28, 4, 128}}) {
    const int width = (c.heads + 2 * c.kv_heads) * c.head_dim;
    const std::string tag = " T=" + std::to_string(c.tokens) + " H=" + std::to_string(c.heads) + "+" +
                            std::to_string(c.kv_heads) + " D=" + std::to_string(c.head_dim);
    Twin qkv = twin(random_host({c.tokens, width})), pos = twin(int_host(random_ints(c.tokens, 0, 40000)), 'i');
    CacheTwin cache = scattered_cache(c.tokens, c.kv_heads, c.head_dim);
    cpu_->rope(qkv.cpu, pos.cpu, c.heads, c.kv_heads, c.head_dim, 1e6f);
    cpu_->kv_write(qkv.cpu, cache.slots.cpu, c.heads, c.kv_heads, c.head_dim, cache.cpu);
    gpu_->rope_kv_write(qkv.gpu, pos.gpu, cache.slots.gpu, c.heads, c.kv_heads, c.head_dim, 1e6f, cache.gpu);
    expect_close(qkv, kBf16Tol, "rope_kv_write qkv" + tag);
    expect_close(cache.k, kBf16Tol, "rope_kv_write K" + tag);
    expect_close(cache.v, kBf16Tol, "rope_kv_write V" + tag);
  }
}

// The fused rope + KV write moves 16-byte vectors (8 pairs a thread) when head_dim and the buffers allow and one
// pair at a time otherwise: both widths must leave qkv and the caches bit for bit alike. A qkv that starts one
// element past an aligned address takes the one-pair kernel.
TEST_F(OpsTest, RopeKvWriteVectorAndScalarKernelsAgreeBitwise) {
  struct Case {
    int tokens, heads, kv_heads, head_dim;
  };
  for (Case c : {Case{64, 32, 8, 128}, Case{600, 28, 4, 128}, Case{9, 5, 1, 64}, Case{3000, 32, 8, 128}}) {
    const int width = (c.heads + 2 * c.kv_heads) * c.head_dim;
    const std::string tag = " T=" + std::to_string(c.tokens) + " D=" + std::to_string(c.head_dim);
    const Tensor qkv_host = random_host({c.tokens, width});
    const Tensor pos = twin(int_host(random_ints(c.tokens, 0, 40000)), 'i').gpu;
    CacheTwin vector_cache = scattered_cache(c.tokens, c.kv_heads, c.head_dim);
    Tensor scalar_k = twin(vector_cache.k.host, 'a').gpu, scalar_v = twin(vector_cache.v.host, 'a').gpu;
    KvCacheLayer scalar_cache{scalar_k, scalar_v};
    Tensor vector_qkv = twin(qkv_host, 'a').gpu;
    Tensor padded = gpu_->alloc(gpu_->compute_dtype(), {qkv_host.numel() + 1});
    Tensor scalar_qkv = padded.rows(1, qkv_host.numel() + 1);
    gpu_->upload(scalar_qkv, qkv_host.view({qkv_host.numel()}));
    scalar_qkv = scalar_qkv.view({c.tokens, width});
    gpu_->rope_kv_write(vector_qkv, pos, vector_cache.slots.gpu, c.heads, c.kv_heads, c.head_dim, 1e6f,
                        vector_cache.gpu);
    gpu_->rope_kv_write(scalar_qkv, pos, vector_cache.slots.gpu, c.heads, c.kv_heads, c.head_dim, 1e6f, scalar_cache);
    const std::pair<const Tensor*, const Tensor*> pairs[] = {
        {&vector_qkv, &scalar_qkv}, {&vector_cache.gpu.k, &scalar_cache.k}, {&vector_cache.gpu.v, &scalar_cache.v}};
    for (const auto& [a_dev, b_dev] : pairs) {
      const Tensor a = gpu_->download(*a_dev), b = gpu_->download(*b_dev);
      ASSERT_EQ(a.numel(), b.numel());
      int64_t differ = 0;
      for (int64_t i = 0; i < a.numel(); ++i) differ += a.ptr<float>()[i] != b.ptr<float>()[i];
      EXPECT_EQ(differ, 0) << "rope_kv_write" << tag << " (seed " << seed_ << ")";
    }
    // The inputs were rotated at all (a kernel that wrote nothing would agree with itself).
    const Tensor rotated = gpu_->download(vector_qkv);
    int64_t moved = 0;
    for (int64_t i = 0; i < rotated.numel(); ++i)
      moved += rotated.ptr<float>()[i] != qkv_host.ptr<float>()[i];
    EXPECT_GT(moved, 0) << tag;
  }
}

// ---- CPU-only layout checks (run everywhere) ----

// out = softmax(q·K^T / sqrt(D)) V over keys 0..limit, in double.
std::vector<double> naive_attention(const float* q, const std::vector<const float*>& keys,
                                    const std::vector<const float*>& values, int head_dim) {
  std::vector<double> scores(keys.size()), out(size_t(head_dim), 0.0);
  double max_score = -1e300, sum = 0;
  for (size_t j = 0; j < keys.size(); ++j) {
    double dot = 0;
    for (int d = 0; d < head_dim; ++d) dot += double(q[d]) * keys[j][d];
    scores[j] = dot / std::sqrt(double(head_dim));
    max_score = std::max(max_score, scores[j]);
  }
  for (size_t j = 0; j < keys.size(); ++j) {
    const double w = std::exp(scores[j] - max_score);
    sum += w;
    for (int d = 0; d < head_dim; ++d) out[size_t(d)] += w * values[j][d];
  }
  for (double& x : out) x /= sum;
  return out;
}

TEST(CpuLayouts, PagedAttentionMatchesNaiveCausalGqa) {
  auto cpu = make_cpu_backend();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  const int heads = 4, kv_heads = 2, D = 8, bs = 4, q_len = 3, ctx = 6, num_blocks = 3;
  const int width = (heads + 2 * kv_heads) * D;
  Tensor qkv = Tensor::host(DType::F32, {q_len, width}), k = Tensor::host(DType::F32, {num_blocks, bs, kv_heads, D});
  Tensor v = Tensor::host(DType::F32, k.shape);
  for (Tensor* t : {&qkv, &k, &v})
    for (int64_t i = 0; i < t->numel(); ++i) t->ptr<float>()[i] = dist(rng);
  const int32_t table[2] = {2, 0};  // positions 0..3 in block 2, 4..5 in block 0
  auto put = [&](const Tensor& host) {
    Tensor t = cpu->alloc(host.dtype, host.shape);
    cpu->upload(t, host);
    return t;
  };
  Tensor cu = Tensor::host(DType::I32, {2}), len = Tensor::host(DType::I32, {1}), bt = Tensor::host(DType::I32, {1, 2});
  cu.ptr<int32_t>()[1] = q_len;
  len.ptr<int32_t>()[0] = ctx;
  std::copy(table, table + 2, bt.ptr<int32_t>());
  PagedAttentionBatch batch{put(cu), put(len), put(bt), 1, q_len, ctx};
  Tensor out = cpu->alloc(DType::F32, {q_len, heads * D});
  cpu->paged_attention(put(qkv), batch, KvCacheLayer{put(k), put(v)}, heads, kv_heads, D, out);
  Tensor got = cpu->download(out);
  for (int j = 0; j < q_len; ++j) {
    const int pos = ctx - q_len + j;
    for (int h = 0; h < heads; ++h) {
      const int g = h / (heads / kv_heads);
      std::vector<const float*> keys, values;
      for (int p = 0; p <= pos; ++p) {
        const int64_t row = (int64_t(table[p / bs]) * bs + p % bs) * kv_heads + g;
        keys.push_back(k.ptr<float>() + row * D);
        values.push_back(v.ptr<float>() + row * D);
      }
      const std::vector<double> want = naive_attention(qkv.ptr<float>() + j * width + h * D, keys, values, D);
      for (int d = 0; d < D; ++d) EXPECT_NEAR(got.ptr<float>()[j * heads * D + h * D + d], want[size_t(d)], 1e-4);
    }
  }
}

TEST(CpuLayouts, PixelShuffleChannelOrder) {
  auto cpu = make_cpu_backend();
  const int grid = 4, C = 2;
  Tensor x = Tensor::host(DType::F32, {1 + grid * grid, C});
  for (int r = 0; r < 1 + grid * grid; ++r)
    for (int c = 0; c < C; ++c) x.ptr<float>()[r * C + c] = float(r * 10 + c);
  Tensor xd = cpu->alloc(DType::F32, x.shape), yd = cpu->alloc(DType::F32, {4, 4 * C});
  cpu->upload(xd, x);
  cpu->pixel_shuffle(xd, 1, grid, yd);
  Tensor y = cpu->download(yd);
  // Output token (1, 0) = [X[2][0], X[2][1], X[3][0], X[3][1]]; patch (r, c) is row 1 + r * grid + c.
  const int expect_rows[4] = {1 + 2 * grid + 0, 1 + 2 * grid + 1, 1 + 3 * grid + 0, 1 + 3 * grid + 1};
  for (int q = 0; q < 4; ++q)
    for (int c = 0; c < C; ++c) EXPECT_EQ(y.ptr<float>()[2 * 4 * C + q * C + c], float(expect_rows[q] * 10 + c));
}

}  // namespace
}  // namespace fovea::test
