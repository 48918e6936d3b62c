// The scalar reference of linear_w4: the weight is dequantized into its dense [N, K] float form (every value
// rounded to bf16 once, input columns back in their original order), then multiplied by gemm_nt exactly as
// linear() multiplies a bf16 weight. So on this backend linear_w4 on a repacked checkpoint gives bit for bit what
// linear() gives on the weight model/w4_dequant.h makes of it.
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_util.h"
#include "backend/w4_layout.h"

namespace fovea {
namespace {

// dense[n, perm[c]] = bf16(dequantize(q[n, c])) for every row n in [begin, end).
void dequantize_rows(const W4Weight& w, int64_t begin, int64_t end, float* dense) {
  const int64_t k = w.k, words = w4::code_words(k), groups = k / w.group;
  const auto* codes = w.codes.ptr<const uint32_t>();
  const auto* params = w.params.ptr<const uint32_t>();
  const int32_t* perm = w.perm.empty() ? nullptr : w.perm.ptr<const int32_t>();
  for (int64_t n = begin; n < end; ++n) {
    for (int64_t c = 0; c < k; ++c) {
      const w4::CodeSlot slot = w4::code_slot(c);
      const int q = int((codes[n * words + slot.word] >> slot.shift) & 0xFu);
      const float v = w4::dequantize(q, params[n * groups + c / w.group]);
      dense[n * k + (perm ? perm[c] : c)] = round_to_bf16(v);
    }
  }
}

void check_perm(const W4Weight& w) {
  if (w.perm.empty()) return;
  std::vector<bool> seen(size_t(w.k), false);
  for (int64_t c = 0; c < w.k; ++c) {
    const int32_t p = w.perm.ptr<const int32_t>()[c];
    FOVEA_CHECK(p >= 0 && p < w.k && !seen[size_t(p)], "linear_w4: perm is not a permutation of 0..", w.k - 1);
    seen[size_t(p)] = true;
    FOVEA_CHECK(w.inverse_perm.ptr<const int32_t>()[p] == c, "linear_w4: inverse_perm does not invert perm at ", c);
  }
}

}  // namespace

void CpuBackend::linear_w4(const Tensor& x, const W4Weight& w, const Tensor& bias, Tensor& y, Tensor& workspace) {
  w4::check_weight(w, Device::CPU, "linear_w4");
  check_perm(w);
  const int64_t N = w.n(), K = w.k;
  cpu::check_host(x, DType::F32, "linear_w4", "x");
  FOVEA_CHECK(x.rank() >= 1 && cpu::cols_of(x) == K, "linear_w4: x ", shape_str(x.shape), " does not match K = ", K);
  const int64_t M = cpu::rows_of(x);
  cpu::check_matrix(y, M, N, "linear_w4", "y");
  if (!bias.empty()) cpu::check_vector(bias, N, DType::F32, "linear_w4", "bias");
  FOVEA_CHECK(y.data != x.data, "linear_w4: y aliases x");
  std::vector<float> dense(size_t(N * K));
  cpu::parallel_rows(N, 2.0 * double(K),
                     [&](int64_t begin, int64_t end) { dequantize_rows(w, begin, end, dense.data()); });
  cpu::gemm_nt(x.ptr<float>(), dense.data(), bias.empty() ? nullptr : bias.ptr<float>(), y.ptr<float>(), M, N, K,
               Activation::None);
}

size_t CpuBackend::linear_w4_workspace_bytes(int64_t, int64_t, int64_t, bool) const { return 0; }

}  // namespace fovea
