#include "jobs/bench_perf.h"

#include <chrono>
#include <random>

#include "backend/backend.h"

namespace fovea {

RequestFlops request_flops(const ModelDesc& desc, int tiles, int prompt_tokens, int output_tokens) {
  const VisionConfig& v = desc.vision;
  const LlmConfig& l = desc.llm;
  RequestFlops f;
  const double c = v.hidden, tv = v.tokens();
  const double vit_params = double(v.layers) * (4.0 * c * c + 2.0 * c * v.mlp) +
                            c * 3.0 * v.patch_size * v.patch_size;
  f.vit = tiles * (2.0 * vit_params * tv + v.layers * 4.0 * tv * tv * c);
  const double h = l.hidden;
  const double proj_params = 4.0 * c * h + h * h;
  f.projector = tiles * 2.0 * proj_params * v.tokens_per_tile();
  const double attn_width = double(l.heads) * l.head_dim;
  const double llm_params =
      double(l.layers) * (h * (l.heads + 2.0 * l.kv_heads) * l.head_dim + attn_width * h + 3.0 * h * l.ffn);
  const double L = prompt_tokens;
  f.llm = 2.0 * llm_params * L + l.layers * 4.0 * attn_width * L * L / 2.0;
  for (int t = 1; t < output_tokens; ++t) f.llm += 2.0 * llm_params + l.layers * 4.0 * attn_width * (L + t);
  f.lm_head = 2.0 * h * l.vocab * std::max(1, output_tokens);
  return f;
}

GemmPeak measure_gemm_peak(const std::string& backend_name, int m, int n, int k, double budget_s, bool fp8) {
  auto backend = make_backend(backend_name);
  GemmPeak peak;
  peak.m = m;
  peak.n = n;
  peak.k = k;
  peak.backend = backend->name();
  peak.dtype = fp8 ? dtype_name(DType::F8E4M3) : dtype_name(backend->weight_dtype());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto random_host = [&](int64_t rows, int64_t cols) {
    Tensor t = Tensor::host(DType::F32, {rows, cols});
    for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = uniform(rng);
    return t;
  };
  Tensor x = backend->alloc(backend->compute_dtype(), {m, k});
  Tensor w = backend->alloc(fp8 ? DType::F8E4M3 : backend->weight_dtype(), {n, k});
  Tensor y = backend->alloc(backend->compute_dtype(), {m, n});
  Tensor w_scale;
  backend->upload(x, random_host(m, k));
  if (fp8) {
    // The same uniform values, quantized the way the loader quantizes a weight.
    const Tensor values = random_host(n, k);
    Tensor codes = Tensor::host(DType::F8E4M3, {n, k}), scale = Tensor::host(DType::F32, {1});
    scale.ptr<float>()[0] = quantize_e4m3(values.ptr<float>(), values.numel(), codes.ptr<uint8_t>());
    w_scale = backend->alloc(DType::F32, {1});
    backend->upload(w, codes);
    backend->upload(w_scale, scale);
  } else {
    backend->upload(w, random_host(n, k));
  }
  const Tensor no_bias;
  auto gemm = [&] {
    if (fp8) backend->linear_fp8(x, w, w_scale, no_bias, y);
    else backend->linear(x, w, no_bias, y);
  };
  gemm();  // warm-up: kernel selection, workspace, caches
  backend->synchronize();
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  double elapsed = 0;
  while (peak.iterations < 3 || (elapsed < budget_s && peak.iterations < 10000)) {
    gemm();
    ++peak.iterations;
    if (peak.iterations % 4 == 0 || peak.iterations < 4) {
      backend->synchronize();
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    }
  }
  backend->synchronize();
  peak.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  peak.tflops = 2.0 * m * n * double(k) * peak.iterations / peak.seconds / 1e12;
  return peak;
}

}  // namespace fovea
