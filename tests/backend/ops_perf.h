// The timing helper of test_ops' perf mode (ops_perf.cc, ops_perf_family.cc): random device tensors, the median of
// CUDA-event-timed calls on the backend's stream, and TFLOP/s or GB/s against the H200 ceilings.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "ops_harness.h"

namespace fovea::test {

constexpr double kGemmCeilingTflops = 790, kCopyCeilingGBs = 4300;

class Perf {
 public:
  Perf() : backend_(make_cuda_backend(0)), cuda_(static_cast<cuda::CudaBackend*>(backend_.get())) {}
  Backend& b() { return *backend_; }
  cudaStream_t stream() const { return cuda_->stream(); }

  // Random bf16-exact data everywhere: a 1M-element random chunk uploaded once per tensor, then replicated with
  // device copies (never zeros: zeros run faster than real data).
  // FP8 E4M3 weight codes of N(0, 1)-ish values (never NaN codes), replicated like random().
  Tensor fp8_codes(const Shape& shape) {
    Tensor t = backend_->alloc(DType::F8E4M3, shape);
    const int64_t n = t.numel(), chunk = std::min<int64_t>(n, 1 << 20);
    Tensor host = Tensor::host(DType::F8E4M3, {chunk});
    std::normal_distribution<float> dist(0.f, 64.f);
    for (int64_t i = 0; i < chunk; ++i) host.ptr<uint8_t>()[i] = f32_to_e4m3(dist(rng_));
    Tensor flat = t.view({n});
    for (int64_t done = 0; done < n; done += chunk) {
      Tensor part = flat.rows(done, std::min(n, done + chunk));
      backend_->upload(part, host.view({chunk}).rows(0, part.numel()));
    }
    return t;
  }
  // FP8 weight scales of any recipe's shape, all 1e-3 (the codes are N(0, 64)-ish).
  Tensor fp8_scales(const Shape& shape) {
    Tensor host = Tensor::host(DType::F32, shape);
    std::fill(host.ptr<float>(), host.ptr<float>() + host.numel(), 1e-3f);
    Tensor t = backend_->alloc(DType::F32, shape);
    backend_->upload(t, host);
    return t;
  }
  Tensor random(DType dtype, const Shape& shape, float scale = 1.f) {
    Tensor t = backend_->alloc(dtype, shape);
    const int64_t n = t.numel(), chunk = std::min<int64_t>(n, 1 << 20);
    Tensor host = Tensor::host(DType::F32, {chunk});
    std::uniform_real_distribution<float> dist(-scale, scale);
    for (int64_t i = 0; i < chunk; ++i) host.ptr<float>()[i] = dist(rng_);
    Tensor flat = t.view({n});
    Tensor first = flat.rows(0, chunk);
    backend_->upload(first, host);
    for (int64_t begin = chunk; begin < n; begin += chunk) {
      Tensor dst = flat.rows(begin, std::min(n, begin + chunk));
      backend_->copy(dst, first.rows(0, dst.numel()));
    }
    return t;
  }

  // Median milliseconds of one call of fn over `iters` timed calls after 3 warm-ups.
  double time_ms(const std::function<void()>& fn, int iters = 20) {
    for (int i = 0; i < 3; ++i) fn();
    std::vector<cudaEvent_t> events(static_cast<size_t>(iters) + 1);
    for (auto& e : events) cudaEventCreate(&e);
    cudaEventRecord(events[0], cuda_->stream());
    for (int i = 0; i < iters; ++i) {
      fn();
      cudaEventRecord(events[size_t(i) + 1], cuda_->stream());
    }
    backend_->synchronize();
    std::vector<float> ms(static_cast<size_t>(iters));
    for (int i = 0; i < iters; ++i) cudaEventElapsedTime(&ms[size_t(i)], events[size_t(i)], events[size_t(i) + 1]);
    for (auto& e : events) cudaEventDestroy(e);
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }

  void report_flops(const char* what, double ms, double flop) {
    const double tflops = flop / ms / 1e9;
    std::printf("%-44s %9.3f ms %8.1f TFLOP/s %5.1f%% of %g\n", what, ms, tflops, 100 * tflops / kGemmCeilingTflops,
                kGemmCeilingTflops);
  }
  void report_bytes(const char* what, double ms, double bytes) {
    const double gbs = bytes / ms / 1e6;
    std::printf("%-44s %9.3f ms %8.0f GB/s    %5.1f%% of %g\n", what, ms, gbs, 100 * gbs / kCopyCeilingGBs,
                kCopyCeilingGBs);
  }

 private:
  std::unique_ptr<Backend> backend_;
  cuda::CudaBackend* cuda_;
  std::mt19937 rng_{1234};
};

// The InternViT-6B layer and the Qwen3 q/k norm step (ops_perf_family.cc; FOVEA_OPS_PERF=family).
void family_ops(Perf& p);

}  // namespace fovea::test
