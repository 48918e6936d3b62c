// Op consistency, CPU reference vs CUDA: dense, norm, element-wise, row and vision ops. Attention and the
// decoder ops are in test_ops_decoder.cc, FP8 linears in test_ops_fp8.cc; the perf mode in ops_perf.cc.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops_harness.h"

namespace fovea::test {
namespace {

TEST_F(OpsTest, LinearAllEpiloguesOddRows) {
  struct Case {
    int k, n;
  };
  for (int m : {1, 7, 33, 1025}) {
    // N = 1001 and 13: output rows not 16-byte aligned (the LM head's case), through the aligned scratch.
    for (Case c : {Case{64, 96}, Case{264, 200}, Case{1024, 3072}, Case{128, 1001}, Case{64, 13}}) {
      if (m == 1025 && c.k == 1024) continue;  // keeps the CPU reference quick
      Twin x = twin(random_host({m, c.k})), w = twin(random_host({c.n, c.k}, -0.1f, 0.1f), 'w');
      Twin bias = twin(random_host({c.n}), 'w');
      for (int variant = 0; variant < 4; ++variant) {
        const bool with_bias = variant & 1;
        const Activation act = variant & 2 ? Activation::Gelu : Activation::None;
        Twin y = output({m, c.n});
        cpu_->linear(x.cpu, w.cpu, with_bias ? bias.cpu : Tensor{}, y.cpu, act);
        gpu_->linear(x.gpu, w.gpu, with_bias ? bias.gpu : Tensor{}, y.gpu, act);
        expect_close(y, kBf16Tol,
                     "linear M=" + std::to_string(m) + " K=" + std::to_string(c.k) + " N=" + std::to_string(c.n) +
                         " variant " + std::to_string(variant));
      }
    }
  }
}

// The residual add in the GEMM's epilogue (the ViT's proj and fc2), N aligned and not (the unaligned rows are
// written in place, not through the scratch), with and without bias.
TEST_F(OpsTest, LinearResidual) {
  struct Case {
    int m, k, n;
  };
  for (Case c : {Case{33, 64, 96}, Case{1025, 256, 1024}, Case{7, 128, 1001}, Case{5, 64, 13}}) {
    Twin x = twin(random_host({c.m, c.k})), w = twin(random_host({c.n, c.k}, -0.1f, 0.1f), 'w');
    Twin bias = twin(random_host({c.n}), 'w');
    for (bool with_bias : {false, true}) {
      Twin y = twin(random_host({c.m, c.n}, -4.f, 4.f));
      cpu_->linear_residual(x.cpu, w.cpu, with_bias ? bias.cpu : Tensor{}, y.cpu);
      gpu_->linear_residual(x.gpu, w.gpu, with_bias ? bias.gpu : Tensor{}, y.gpu);
      expect_close(y, kBf16Tol,
                   "linear_residual M=" + std::to_string(c.m) + " K=" + std::to_string(c.k) + " N=" +
                       std::to_string(c.n) + (with_bias ? " bias" : ""));
    }
  }
}

TEST_F(OpsTest, ScaleRows) {
  for (Shape shape : {Shape{1024, 4096}, Shape{7, 13}, Shape{1001}}) {
    Twin w = twin(random_host(shape), 'w'), scale = twin(random_host({shape[0]}, -2.f, 2.f));
    cpu_->scale_rows(w.cpu, scale.cpu);
    gpu_->scale_rows(w.gpu, scale.gpu);
    expect_close(w, kBf16Tol, "scale_rows " + shape_str(shape));
  }
}

TEST_F(OpsTest, Norms) {
  for (int m : {1, 7, 33}) {
    for (int n : {64, 100, 1024, 4096}) {
      const std::string shape = " M=" + std::to_string(m) + " N=" + std::to_string(n);
      // An offset mean checks that LayerNorm does not lose precision to E[x^2] - mean^2.
      Twin x = twin(random_host({m, n}, 2.f, 4.f)), gamma = twin(random_host({n}), 'w');
      Twin beta = twin(random_host({n}), 'w');
      Twin y = output({m, n});
      cpu_->layer_norm(x.cpu, gamma.cpu, beta.cpu, 1e-6f, y.cpu);
      gpu_->layer_norm(x.gpu, gamma.gpu, beta.gpu, 1e-6f, y.gpu);
      expect_close(y, kBf16Tol, "layer_norm" + shape);

      Twin r = output({m, n});
      cpu_->rms_norm(x.cpu, gamma.cpu, 1e-5f, r.cpu);
      gpu_->rms_norm(x.gpu, gamma.gpu, 1e-5f, r.gpu);
      expect_close(r, kBf16Tol, "rms_norm" + shape);

      Twin residual = twin(random_host({m, n})), delta = twin(random_host({m, n}));
      Twin z = output({m, n});
      cpu_->add_rms_norm(residual.cpu, delta.cpu, gamma.cpu, 1e-5f, z.cpu);
      gpu_->add_rms_norm(residual.gpu, delta.gpu, gamma.gpu, 1e-5f, z.gpu);
      expect_close(residual, kBf16Tol, "add_rms_norm residual" + shape);
      expect_close(z, kBf16Tol, "add_rms_norm output" + shape);
    }
  }
}

// scale_add_norm against the CPU reference, and on the GPU against scale_add followed by the norm bit for bit:
// the vision encoder fuses them, and its answers must not move. Widths: odd and not a multiple of 8 (the scalar
// path), InternViT-300M's 1024 and InternViT-6B's 3200 (256 threads a row).
TEST_F(OpsTest, ScaleAddNorm) {
  auto expect_same_bits = [&](const Tensor& got, const Tensor& want, const std::string& what) {
    const Tensor a = gpu_->download(got), b = gpu_->download(want);
    ASSERT_EQ(a.numel(), b.numel()) << what;
    int64_t differ = 0, first = -1;
    for (int64_t i = 0; i < a.numel(); ++i)
      if (std::memcmp(a.ptr<float>() + i, b.ptr<float>() + i, sizeof(float)) != 0 && differ++ == 0) first = i;
    EXPECT_EQ(differ, 0) << what << " (seed " << seed_ << "): " << differ << " elements differ, first at " << first;
  };
  for (int m : {1, 7, 33}) {
    for (int n : {13, 1001, 1024, 3200}) {
      for (NormKind kind : {NormKind::Layer, NormKind::Rms}) {
        for (bool scaled : {true, false}) {
          const std::string what = std::string(kind == NormKind::Layer ? " layer" : " rms") + " M=" +
                                   std::to_string(m) + " N=" + std::to_string(n) + (scaled ? " scaled" : "");
          // An offset residual mean, as in Norms; small layer scales, as InternViT's.
          const Tensor x_host = random_host({m, n}, 2.f, 4.f);
          Twin x = twin(x_host), unfused = twin(x_host), branch = twin(random_host({m, n}));
          Twin scale = twin(random_host({n}, -0.2f, 0.2f), 'w'), gamma = twin(random_host({n}), 'w');
          Twin beta = twin(random_host({n}), 'w');
          const Tensor cpu_beta = kind == NormKind::Layer ? beta.cpu : Tensor{};
          const Tensor gpu_beta = kind == NormKind::Layer ? beta.gpu : Tensor{};
          Twin y = output({m, n}), unfused_y = output({m, n});
          cpu_->scale_add_norm(x.cpu, branch.cpu, scaled ? scale.cpu : Tensor{}, kind, gamma.cpu, cpu_beta, 1e-6f,
                               y.cpu);
          gpu_->scale_add_norm(x.gpu, branch.gpu, scaled ? scale.gpu : Tensor{}, kind, gamma.gpu, gpu_beta, 1e-6f,
                               y.gpu);
          expect_close(x, kBf16Tol, "scale_add_norm residual" + what);
          expect_close(y, kBf16Tol, "scale_add_norm output" + what);

          gpu_->scale_add(unfused.gpu, branch.gpu, scaled ? scale.gpu : Tensor{});
          if (kind == NormKind::Layer) gpu_->layer_norm(unfused.gpu, gamma.gpu, beta.gpu, 1e-6f, unfused_y.gpu);
          else gpu_->rms_norm(unfused.gpu, gamma.gpu, 1e-6f, unfused_y.gpu);
          expect_same_bits(x.gpu, unfused.gpu, "scale_add_norm residual vs scale_add" + what);
          expect_same_bits(y.gpu, unfused_y.gpu, "scale_add_norm output vs scale_add + norm" + what);
        }
      }
    }
  }
}

TEST_F(OpsTest, ScaleAddAndSiluMul) {
  for (int m : {1, 7, 33}) {
    for (int n : {13, 64, 1024}) {
      const std::string shape = " M=" + std::to_string(m) + " N=" + std::to_string(n);
      Twin x = twin(random_host({m, n})), y = twin(random_host({m, n})), scale = twin(random_host({n}), 'w');
      cpu_->scale_add(x.cpu, y.cpu, scale.cpu);
      gpu_->scale_add(x.gpu, y.gpu, scale.gpu);
      expect_close(x, kBf16Tol, "scale_add" + shape);
      cpu_->scale_add(x.cpu, y.cpu, Tensor{});
      gpu_->scale_add(x.gpu, y.gpu, Tensor{});
      expect_close(x, kBf16Tol, "scale_add without scale" + shape);

      Twin gate_up = twin(random_host({m, 2 * n}, -4.f, 4.f)), out = output({m, n});
      cpu_->silu_mul(gate_up.cpu, out.cpu);
      gpu_->silu_mul(gate_up.gpu, out.gpu);
      expect_close(out, kBf16Tol, "silu_mul" + shape);
    }
  }
}

TEST_F(OpsTest, EmbeddingScatterGather) {
  for (int hidden : {24, 64, 100}) {
    const std::string tag = " H=" + std::to_string(hidden);
    Twin table = twin(random_host({50, hidden}), 'w'), ids = twin(int_host(random_ints(33, 0, 49)), 'i');
    Twin emb = output({33, hidden});
    cpu_->embedding(ids.cpu, table.cpu, emb.cpu);
    gpu_->embedding(ids.gpu, table.gpu, emb.gpu);
    expect_close(emb, kBf16Tol, "embedding" + tag);

    // Scatter 17 rows into distinct places of a 40-row destination that already holds data.
    std::vector<int32_t> places = permutation(40);
    places.resize(17);
    Twin src = twin(random_host({17, hidden})), dst = twin(random_host({40, hidden}));
    Twin idx = twin(int_host(places), 'i');
    cpu_->scatter_rows(src.cpu, idx.cpu, dst.cpu);
    gpu_->scatter_rows(src.gpu, idx.gpu, dst.gpu);
    expect_close(dst, kBf16Tol, "scatter_rows" + tag);

    Twin picks = twin(int_host(random_ints(5, 0, 39)), 'i'), gathered = output({5, hidden});
    cpu_->gather_rows(dst.cpu, picks.cpu, gathered.cpu);
    gpu_->gather_rows(dst.gpu, picks.gpu, gathered.gpu);
    expect_close(gathered, kBf16Tol, "gather_rows" + tag);
  }
}

TEST_F(OpsTest, EmbeddingOutOfRangeIdIsFlaggedOnCuda) {
  Twin table = twin(random_host({10, 16}), 'w'), ids = twin(int_host({3, 10}), 'i');
  Twin emb = output({2, 16});
  gpu_->embedding(ids.gpu, table.gpu, emb.gpu);
  EXPECT_THROW(gpu_->synchronize(), Error);
  EXPECT_NO_THROW(gpu_->synchronize());  // the flag resets once reported
}

TEST_F(OpsTest, PatchifyAndVitEmbed) {
  struct Case {
    int batch, size, patch;
  };
  for (Case c : {Case{2, 28, 14}, Case{1, 448, 14}, Case{3, 32, 8}}) {
    const int grid = c.size / c.patch, patches = grid * grid, len = 3 * c.patch * c.patch;
    const std::string tag = " B=" + std::to_string(c.batch) + " S=" + std::to_string(c.size);
    Twin pixels = twin(random_host({c.batch, 3, c.size, c.size}, -2.f, 2.f), 'f');
    Twin out = output({int64_t(c.batch) * patches, len});
    cpu_->patchify(pixels.cpu, c.patch, out.cpu);
    gpu_->patchify(pixels.gpu, c.patch, out.gpu);
    expect_close(out, kBf16Tol, "patchify" + tag);
  }
  for (int channels : {24, 64}) {
    const int batch = 3, patches = 16;
    Twin emb = twin(random_host({batch * patches, channels})), cls = twin(random_host({channels}), 'w');
    Twin pos = twin(random_host({patches + 1, channels}), 'w'), out = output({batch * (patches + 1), channels});
    cpu_->vit_embed(emb.cpu, cls.cpu, pos.cpu, batch, out.cpu);
    gpu_->vit_embed(emb.gpu, cls.gpu, pos.gpu, batch, out.gpu);
    expect_close(out, kBf16Tol, "vit_embed C=" + std::to_string(channels));
  }
}

// Tiles may travel as bytes only because the device normalisation equals the host's bit for bit; sizes
// cover the vectorised path (plane a multiple of 4 pixels) and the per-pixel one, odd tile counts both.
TEST_F(OpsTest, NormalizePixelsIsBitExact) {
  const NormalizeConstants k = normalize_kernels::kImageNet;
  struct Case {
    int tiles, height, width;
  };
  for (Case c : {Case{3, 448, 448}, Case{1, 28, 28}, Case{5, 13, 7}, Case{2, 9, 9}, Case{7, 16, 12}}) {
    const std::string tag = " T=" + std::to_string(c.tiles) + " " + std::to_string(c.height) + "x" +
                            std::to_string(c.width);
    Tensor rgb = Tensor::host(DType::U8, {c.tiles, c.height, c.width, 3});
    std::uniform_int_distribution<int> byte(0, 255);
    for (int64_t i = 0; i < rgb.numel(); ++i) rgb.ptr<uint8_t>()[i] = uint8_t(byte(rng_));
    for (int v = 0; v < 256 && v < rgb.numel(); ++v) rgb.ptr<uint8_t>()[v] = uint8_t(v);  // every byte value
    Tensor rgb_cpu = cpu_->alloc(DType::U8, rgb.shape), rgb_gpu = gpu_->alloc(DType::U8, rgb.shape);
    cpu_->upload(rgb_cpu, rgb);
    gpu_->upload(rgb_gpu, rgb);
    Twin out = output({c.tiles, 3, c.height, c.width}, 'f');
    cpu_->normalize_pixels(rgb_cpu, k, out.cpu);
    gpu_->normalize_pixels(rgb_gpu, k, out.gpu);
    const Tensor a = gpu_->download(out.gpu), b = cpu_->download(out.cpu);
    ASSERT_EQ(a.numel(), b.numel());
    int64_t differ = 0, first = -1, unwritten = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      uint32_t x, y;
      std::memcpy(&x, a.ptr<float>() + i, 4);
      std::memcpy(&y, b.ptr<float>() + i, 4);
      if (x != y && differ++ == 0) first = i;
      unwritten += !std::isfinite(b.ptr<float>()[i]);  // the poison survived on the reference
    }
    EXPECT_EQ(differ, 0) << "normalize_pixels" << tag << ": " << differ << " floats differ, first at " << first
                         << " (seed " << seed_ << ")";
    EXPECT_EQ(unwritten, 0) << "normalize_pixels" << tag;
  }
  Tensor rgb = gpu_->alloc(DType::U8, {2, 8, 8, 3});
  Tensor wrong = gpu_->alloc(DType::F32, {2, 3, 8, 4});
  EXPECT_THROW(gpu_->normalize_pixels(rgb, k, wrong), Error);
}

TEST_F(OpsTest, PixelShuffle) {
  struct Case {
    int batch, grid, channels;
  };
  for (Case c : {Case{2, 4, 8}, Case{1, 32, 64}, Case{3, 6, 12}}) {
    const int half = c.grid / 2;
    Twin x = twin(random_host({c.batch * (1 + c.grid * c.grid), c.channels}));
    Twin y = output({c.batch * half * half, 4 * c.channels});
    cpu_->pixel_shuffle(x.cpu, c.batch, c.grid, y.cpu);
    gpu_->pixel_shuffle(x.gpu, c.batch, c.grid, y.gpu);
    expect_close(y, kBf16Tol, "pixel_shuffle G=" + std::to_string(c.grid));
  }
}

TEST_F(OpsTest, ArgmaxAndLogSoftmaxGather) {
  const int rows = 5, vocab = 1000;
  Tensor logits = random_host({rows, vocab}, -8.f, 8.f);
  // Ties: row 1's maximum appears twice; the lowest index must win on both backends.
  logits.ptr<float>()[vocab + 10] = 20.f;
  logits.ptr<float>()[vocab + 700] = 20.f;
  for (char kind : {'a', 'f'}) {
    Twin l = twin(logits, kind), ids = output({rows}, 'i');
    cpu_->argmax(l.cpu, ids.cpu);
    gpu_->argmax(l.gpu, ids.gpu);
    expect_equal_ints(ids, std::string("argmax ") + kind);
    EXPECT_EQ(gpu_->download(ids.gpu).ptr<int32_t>()[1], 10);

    Twin picks = twin(int_host(random_ints(rows * 3, 0, vocab - 1), {rows, 3}), 'i'), out = output({rows, 3}, 'f');
    cpu_->log_softmax_gather(l.cpu, picks.cpu, out.cpu);
    gpu_->log_softmax_gather(l.gpu, picks.gpu, out.gpu);
    expect_close(out, 1e-3, std::string("log_softmax_gather ") + kind);
  }
}

// The LM head's vocab (92,553: several rounds of the CUDA kernel's strided loads): a tie across rounds and a
// maximum at the last index.
TEST_F(OpsTest, ArgmaxFullVocabRows) {
  const int rows = 3, vocab = 92553;
  Tensor logits = random_host({rows, vocab}, -8.f, 8.f);
  logits.ptr<float>()[vocab + 5000] = 20.f;
  logits.ptr<float>()[vocab + 91000] = 20.f;
  logits.ptr<float>()[2 * vocab + vocab - 1] = 20.f;
  Twin l = twin(logits), ids = output({rows}, 'i');
  cpu_->argmax(l.cpu, ids.cpu);
  gpu_->argmax(l.gpu, ids.gpu);
  expect_equal_ints(ids, "argmax full vocab");
  const Tensor got = gpu_->download(ids.gpu);
  EXPECT_EQ(got.ptr<int32_t>()[1], 5000);
  EXPECT_EQ(got.ptr<int32_t>()[2], vocab - 1);
}

// A recorded sequence replays exactly what direct calls compute, and picks up new data written into its inputs.
TEST_F(OpsTest, GraphReplayMatchesDirectCalls) {
  ASSERT_TRUE(gpu_->supports_graphs());
  EXPECT_FALSE(cpu_->supports_graphs());
  Backend& b = *gpu_;
  const int m = 33, k = 64, n = 96, heads = 2, head_dim = 16;
  auto put = [&](const Tensor& host) {
    Tensor t = b.alloc(DType::BF16, host.shape);
    b.upload(t, host);
    return t;
  };
  Tensor x = put(random_host({m, k})), gamma = put(random_host({k})), w = put(random_host({n, k}, -0.2f, 0.2f));
  Tensor bias = put(random_host({n}));
  Tensor normed = b.alloc(DType::BF16, {m, k}), qkv = b.alloc(DType::BF16, {m, n}), out = b.alloc(DType::BF16, {m, 32});
  auto step = [&] {
    b.rms_norm(x, gamma, 1e-5f, normed);
    b.linear(normed, w, bias, qkv, Activation::Gelu);
    b.attention_dense(qkv, 1, m, heads, head_dim, out);
  };
  auto result = [&] { return b.download(out); };
  auto same = [](const Tensor& a, const Tensor& c) {
    for (int64_t i = 0; i < a.numel(); ++i)
      if (a.ptr<float>()[i] != c.ptr<float>()[i]) return false;
    return true;
  };
  step();
  const Tensor direct = result();
  b.fill_zero(out);
  b.synchronize();
  b.graph_begin();
  step();
  const int graph = b.graph_end();
  b.graph_launch(graph);
  EXPECT_TRUE(same(result(), direct));

  b.upload(x, random_host({m, k}));  // new input, same address
  b.graph_launch(graph);
  const Tensor replayed = result();
  EXPECT_FALSE(same(replayed, direct));
  step();
  EXPECT_TRUE(same(replayed, result()));
  b.graph_release(graph);
  EXPECT_THROW(b.graph_launch(graph), Error);
}

TEST_F(OpsTest, MemoryRoundTripAndShapeErrors) {
  const size_t before = gpu_->memory_in_use();
  {
    Tensor host = random_host({7, 9});
    Tensor dev = gpu_->alloc(DType::F32, {7, 9});
    EXPECT_GE(gpu_->memory_in_use(), before + 7 * 9 * 4);
    gpu_->upload(dev, host);
    Tensor back = gpu_->download(dev);
    for (int i = 0; i < 63; ++i) EXPECT_EQ(back.ptr<float>()[i], host.ptr<float>()[i]);
    Tensor bf = gpu_->alloc(DType::BF16, {7, 9}), copy = gpu_->alloc(DType::BF16, {63});
    gpu_->upload(bf, host);  // F32 -> BF16 conversion on upload; values are bf16-exact
    gpu_->copy(copy, bf);
    Tensor back_bf = gpu_->download(copy);
    for (int i = 0; i < 63; ++i) EXPECT_EQ(back_bf.ptr<float>()[i], host.ptr<float>()[i]);
    gpu_->fill_zero(copy);
    EXPECT_EQ(gpu_->download(copy).ptr<float>()[62], 0.f);
    Tensor wrong = gpu_->alloc(DType::BF16, {7, 8});
    EXPECT_THROW(gpu_->rms_norm(bf, wrong, 1e-5f, bf), Error);
  }
  EXPECT_EQ(gpu_->memory_in_use(), before);
}

}  // namespace
}  // namespace fovea::test
