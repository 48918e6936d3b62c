// Harness of the op-consistency test: every op runs on the CPU reference backend and on the CUDA backend with
// the same random inputs (rounded to bf16 first, so both see identical values), outputs are poisoned with NaN
// before each run (an unwritten element stays NaN and fails), and results are compared by the normalised error
// ||gpu - cpu|| / ||cpu||.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace fovea::test {

// bf16 carries 8 significant bits: one rounding is ~2e-3 relative; a few accumulate in norms and attention.
constexpr double kBf16Tol = 1e-2;
constexpr double kAttentionTol = 2e-2;

// A host tensor and its copies on the two backends.
struct Twin {
  Tensor host;
  Tensor cpu;
  Tensor gpu;
};

class OpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA GPU: CUDA op-consistency cases skipped";
    cpu_ = make_cpu_backend();
    gpu_ = make_cuda_backend(0);
  }

  // Uniform random values in [lo, hi), rounded to bf16 (which F32 represents exactly).
  Tensor random_host(const Shape& shape, float lo = -1.f, float hi = 1.f) {
    Tensor t = Tensor::host(DType::F32, shape);
    std::uniform_real_distribution<float> dist(lo, hi);
    for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = round_to_bf16(dist(rng_));
    return t;
  }
  Tensor int_host(const std::vector<int32_t>& values, Shape shape = {}) {
    if (shape.empty()) shape = {int64_t(values.size())};
    Tensor t = Tensor::host(DType::I32, shape);
    std::copy(values.begin(), values.end(), t.ptr<int32_t>());
    return t;
  }
  std::vector<int32_t> random_ints(int n, int lo, int hi) {  // inclusive range
    std::uniform_int_distribution<int> dist(lo, hi);
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& x : v) x = dist(rng_);
    return v;
  }
  std::vector<int32_t> permutation(int n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), 0);
    std::shuffle(v.begin(), v.end(), rng_);
    return v;
  }

  // kind: 'a' activation (compute dtype), 'w' weight (weight dtype), 'i' I32, 'f' F32 on both, '8' FP8 E4M3 codes
  // on both (the host tensor holds the codes).
  Twin twin(const Tensor& host, char kind = 'a') {
    Twin t{host, {}, {}};
    t.cpu = put(*cpu_, host, kind);
    t.gpu = put(*gpu_, host, kind);
    return t;
  }
  // A random paged K/V cache on both backends with room for `tokens` rows plus two spare blocks, and one slot per
  // token scattered over it.
  struct CacheTwin {
    Twin k, v, slots;
    KvCacheLayer cpu, gpu;
  };
  CacheTwin scattered_cache(int tokens, int kv_heads, int head_dim, int block_size = 16) {
    const int num_blocks = (tokens + block_size - 1) / block_size + 2;
    std::vector<int32_t> slots = permutation(num_blocks * block_size);
    slots.resize(size_t(tokens));
    const Shape shape{num_blocks, block_size, kv_heads, head_dim};
    CacheTwin c{twin(random_host(shape)), twin(random_host(shape)), twin(int_host(slots), 'i'), {}, {}};
    c.cpu = KvCacheLayer{c.k.cpu, c.v.cpu};
    c.gpu = KvCacheLayer{c.k.gpu, c.v.gpu};
    return c;
  }
  // An output on both backends, poisoned: NaN for floats, -77777 for I32.
  Twin output(const Shape& shape, char kind = 'a') {
    Tensor poison = Tensor::host(kind == 'i' ? DType::I32 : DType::F32, shape);
    for (int64_t i = 0; i < poison.numel(); ++i) {
      if (kind == 'i') poison.ptr<int32_t>()[i] = -77777;
      else poison.ptr<float>()[i] = NAN;
    }
    return twin(poison, kind);
  }

  // ||gpu - cpu|| / ||cpu|| over the twin's two device results; fails on NaN/Inf or a larger error.
  void expect_close(const Twin& t, double tol, const std::string& what) {
    const Tensor a = gpu_->download(t.gpu), b = cpu_->download(t.cpu);
    ASSERT_EQ(a.numel(), b.numel()) << what;
    double diff = 0, norm = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      const double x = a.ptr<float>()[i], y = b.ptr<float>()[i];
      if (!std::isfinite(x) || !std::isfinite(y)) {
        ++bad;
        continue;
      }
      diff += (x - y) * (x - y);
      norm += y * y;
    }
    EXPECT_EQ(bad, 0) << what << " (seed " << seed_ << ")" << ": " << bad << " non-finite or unwritten elements of " << a.numel();
    const double err = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
    EXPECT_LE(err, tol) << what << " (seed " << seed_ << ")" << ": normalised error " << err;
    EXPECT_GT(norm, 0) << what << ": reference output is all zeros (a test that cannot fail)";
  }
  void expect_equal_ints(const Twin& t, const std::string& what) {
    const Tensor a = gpu_->download(t.gpu), b = cpu_->download(t.cpu);
    ASSERT_EQ(a.numel(), b.numel());
    for (int64_t i = 0; i < a.numel(); ++i)
      EXPECT_EQ(a.ptr<int32_t>()[i], b.ptr<int32_t>()[i]) << what << " at " << i << " (seed " << seed_ << ")";
  }

  std::unique_ptr<Backend> cpu_, gpu_;
  // Fresh inputs every run (FOVEA_OPS_SEED repeats one); failures print the seed.
  unsigned seed_ = std::getenv("FOVEA_OPS_SEED") ? unsigned(std::atoll(std::getenv("FOVEA_OPS_SEED")))
                                                 : std::random_device{}();
  std::mt19937 rng_{seed_};

 private:
  static Tensor put(Backend& backend, const Tensor& host, char kind) {
    const DType dtype = kind == 'i'   ? DType::I32
                        : kind == 'f' ? DType::F32
                        : kind == '8' ? DType::F8E4M3
                        : kind == 'w' ? backend.weight_dtype()
                                      : backend.compute_dtype();
    Tensor t = backend.alloc(dtype, host.shape);
    backend.upload(t, host);
    return t;
  }
};

}  // namespace fovea::test
