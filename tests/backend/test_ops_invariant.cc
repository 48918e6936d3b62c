// Backend::set_batch_invariant on the CUDA backend: a linear's row comes out bit-identical whatever other rows
// share the call (bf16 and each FP8 recipe, with and without a bias), and still matches the CPU reference. The
// shapes are SmolLM2's and InternVL2-8B's projections, M from a decode row to a prefill chunk: without the switch
// cuBLASLt picks (and the tuner times) a different algorithm per M, which changes the low bits of a row.
#include <cstring>
#include <string>
#include <vector>

#include "backend/fp8_recipe.h"
#include "ops_harness.h"

namespace fovea::test {
namespace {

class InvariantOpsTest : public OpsTest {
 protected:
  void SetUp() override {
    OpsTest::SetUp();
    if (gpu_) gpu_->set_batch_invariant(true);  // before the first GEMM picks an algorithm
  }
};

enum class Kind { Bf16, Fp8Channel, Fp8Block, Fp8ChannelAct128 };

TEST_F(InvariantOpsTest, LinearRowsDoNotDependOnTheirBatch) {
  struct Case {
    int k, n;
  };
  constexpr int kRows = 300;
  for (Kind kind : {Kind::Bf16, Kind::Fp8Channel, Kind::Fp8Block, Kind::Fp8ChannelAct128}) {
    for (Case c : {Case{576, 1536}, Case{1536, 576}, Case{576, 192}, Case{4096, 6144}}) {
      const Tensor x_host = random_host({kRows, c.k}, -2.f, 2.f);
      const Tensor w_host = random_host({c.n, c.k}, -0.1f, 0.1f);
      Twin bias = twin(random_host({c.n}), 'w');
      const Fp8Scaling scaling = kind == Kind::Fp8Block           ? Fp8Scaling::Block
                                 : kind == Kind::Fp8ChannelAct128 ? Fp8Scaling::ChannelAct128
                                                                  : Fp8Scaling::Channel;
      Fp8HostWeight q;
      Twin w, w8, ws;
      if (kind == Kind::Bf16) {
        w = twin(w_host, 'w');
      } else {
        q = quantize_fp8_weight(w_host, scaling);
        w8 = twin(q.codes, '8');
        ws = twin(q.scale, 'f');
      }
      for (bool with_bias : {false, true}) {
        const std::string what = std::string(kind == Kind::Bf16 ? "bf16" : fp8_scaling_name(scaling)) +
                                 " K=" + std::to_string(c.k) + " N=" + std::to_string(c.n) + (with_bias ? " bias" : "");
        auto run = [&](const Tensor& x, Tensor& y, Backend& be, const Tensor& b) {
          if (kind == Kind::Bf16) {
            be.linear(x, &be == gpu_.get() ? w.gpu : w.cpu, b, y);
          } else {
            be.linear_fp8_scaled(x, &be == gpu_.get() ? w8.gpu : w8.cpu, &be == gpu_.get() ? ws.gpu : ws.cpu, scaling,
                                 b, y, Activation::None);
          }
        };
        // The whole batch, against the CPU reference.
        Twin x = twin(x_host);
        Twin y = output({kRows, c.n});
        run(x.cpu, y.cpu, *cpu_, with_bias ? bias.cpu : Tensor{});
        run(x.gpu, y.gpu, *gpu_, with_bias ? bias.gpu : Tensor{});
        expect_close(y, kBf16Tol, what);
        const Tensor full = gpu_->download(y.gpu);
        // Its first rows alone: bit for bit the same.
        for (int64_t rows : {1, 3, 7, 64, 129}) {
          const Tensor part = twin(x_host.rows(0, rows)).gpu;
          Tensor out = gpu_->alloc(gpu_->compute_dtype(), {rows, c.n});
          run(part, out, *gpu_, with_bias ? bias.gpu : Tensor{});
          const Tensor got = gpu_->download(out);
          EXPECT_EQ(std::memcmp(got.ptr<float>(), full.ptr<float>(), size_t(rows * c.n) * sizeof(float)), 0)
              << what << ": the first " << rows << " rows differ from the same rows in a batch of " << kRows;
        }
      }
    }
  }
}

}  // namespace
}  // namespace fovea::test
