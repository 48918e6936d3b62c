// Row-wise dense ops of CpuBackend: linear, the norms, residual adds, SiLU gating, embedding and row moves.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_util.h"

namespace fovea {

using cpu::check_host;
using cpu::check_matrix;
using cpu::check_vector;
using cpu::cols_of;
using cpu::parallel_rows;
using cpu::rows_of;

void CpuBackend::linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y, Activation act) {
  check_host(w, DType::F32, "linear", "w");
  FOVEA_CHECK(w.rank() == 2, "linear: w has shape ", shape_str(w.shape), ", expected [N, K]");
  const int64_t N = w.dim(0), K = w.dim(1);
  check_host(x, DType::F32, "linear", "x");
  FOVEA_CHECK(x.rank() >= 1 && cols_of(x) == K, "linear: x ", shape_str(x.shape), " does not match w ",
              shape_str(w.shape));
  const int64_t M = rows_of(x);
  check_matrix(y, M, N, "linear", "y");
  if (!bias.empty()) check_vector(bias, N, DType::F32, "linear", "bias");
  FOVEA_CHECK(y.data != x.data && y.data != w.data, "linear: y aliases an input");
  cpu::gemm_nt(x.ptr<float>(), w.ptr<float>(), bias.empty() ? nullptr : bias.ptr<float>(), y.ptr<float>(), M, N, K,
               act);
}

// The product goes to a scratch first: gemm_nt writes its output, and the sum with y is the one rounding (in F32
// here, as everywhere on the CPU reference).
void CpuBackend::linear_residual(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  check_host(y, DType::F32, "linear_residual", "y");
  FOVEA_CHECK(y.data != x.data && y.data != w.data, "linear_residual: y aliases an input");
  Tensor product = Tensor::host(DType::F32, y.shape);
  linear(x, w, bias, product, Activation::None);
  scale_add(y, product, Tensor{});
}

void CpuBackend::scale_rows(Tensor& w, const Tensor& scale) {
  check_host(w, DType::F32, "scale_rows", "w");
  FOVEA_CHECK(w.rank() == 1 || w.rank() == 2, "scale_rows: w has shape ", shape_str(w.shape), ", expected [N] or [N, K]");
  const int64_t N = w.dim(0), K = w.rank() == 2 ? w.dim(1) : 1;
  check_vector(scale, N, DType::F32, "scale_rows", "scale");
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) w.ptr<float>()[n * K + k] *= scale.ptr<float>()[n];
}

namespace {

// out = (in - mean) / sqrt(var + eps) * gamma + beta for one row; statistics in double.
void layer_norm_row(const float* in, const float* gamma, const float* beta, float eps, int64_t n, float* out) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += in[i];
  const double mean = sum / double(n);
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sq += (in[i] - mean) * (in[i] - mean);
  const double inv_std = 1.0 / std::sqrt(sq / double(n) + double(eps));
  for (int64_t i = 0; i < n; ++i) out[i] = float((in[i] - mean) * inv_std) * gamma[i] + beta[i];
}

// out = in / sqrt(mean(in^2) + eps) * gamma for one row; out may alias in.
void rms_norm_row(const float* in, const float* gamma, float eps, int64_t n, float* out) {
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sq += double(in[i]) * in[i];
  const float inv_rms = float(1.0 / std::sqrt(sq / double(n) + double(eps)));
  for (int64_t i = 0; i < n; ++i) out[i] = (in[i] * inv_rms) * gamma[i];
}

// x += scale ⊙ y for one row; a null scale means 1.
void scale_add_row(float* x, const float* y, const float* scale, int64_t n) {
  if (scale) {
    for (int64_t i = 0; i < n; ++i) x[i] += scale[i] * y[i];
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] += y[i];
  }
}

}  // namespace

void CpuBackend::layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& y) {
  check_host(x, DType::F32, "layer_norm", "x");
  const int64_t M = rows_of(x), N = cols_of(x);
  check_matrix(y, M, N, "layer_norm", "y");
  check_vector(gamma, N, DType::F32, "layer_norm", "gamma");
  check_vector(beta, N, DType::F32, "layer_norm", "beta");
  parallel_rows(M, 8.0 * double(N), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      layer_norm_row(x.ptr<float>() + r * N, gamma.ptr<float>(), beta.ptr<float>(), eps, N, y.ptr<float>() + r * N);
  });
}

void CpuBackend::rms_norm(const Tensor& x, const Tensor& gamma, float eps, Tensor& y) {
  check_host(x, DType::F32, "rms_norm", "x");
  const int64_t M = rows_of(x), N = cols_of(x);
  check_matrix(y, M, N, "rms_norm", "y");
  check_vector(gamma, N, DType::F32, "rms_norm", "gamma");
  parallel_rows(M, 4.0 * double(N), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      rms_norm_row(x.ptr<float>() + r * N, gamma.ptr<float>(), eps, N, y.ptr<float>() + r * N);
  });
}

void CpuBackend::add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& gamma, float eps, Tensor& y) {
  check_host(residual, DType::F32, "add_rms_norm", "residual");
  const int64_t M = rows_of(residual), N = cols_of(residual);
  check_matrix(x, M, N, "add_rms_norm", "x");
  check_matrix(y, M, N, "add_rms_norm", "y");
  check_vector(gamma, N, DType::F32, "add_rms_norm", "gamma");
  parallel_rows(M, 5.0 * double(N), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* res = residual.ptr<float>() + r * N;
      const float* add = x.ptr<float>() + r * N;
      scale_add_row(res, add, nullptr, N);  // the whole row before y: y may alias x
      rms_norm_row(res, gamma.ptr<float>(), eps, N, y.ptr<float>() + r * N);
    }
  });
}

void CpuBackend::qk_rms_norm(Tensor& qkv, const Tensor& q_gamma, const Tensor& k_gamma, int heads, int kv_heads,
                             int head_dim, float eps) {
  FOVEA_CHECK(heads > 0 && kv_heads > 0 && head_dim > 0, "qk_rms_norm: bad head sizes");
  check_host(qkv, DType::F32, "qk_rms_norm", "qkv");
  const int64_t T = rows_of(qkv), D = head_dim, q_width = int64_t(heads) * D, k_width = int64_t(kv_heads) * D;
  const int64_t width = q_width + 2 * k_width;
  check_matrix(qkv, T, width, "qk_rms_norm", "qkv");
  // A part's group: D values (per head) or the whole part, as its gamma says.
  auto group_of = [&](const Tensor& gamma, int64_t part_width, const char* what) {
    check_host(gamma, DType::F32, "qk_rms_norm", what);
    FOVEA_CHECK(gamma.numel() == D || gamma.numel() == part_width, "qk_rms_norm: ", what, " has ", gamma.numel(),
                " values, expected ", D, " (per head) or ", part_width, " (all heads)");
    return gamma.numel();
  };
  const int64_t q_group = group_of(q_gamma, q_width, "q_gamma"), k_group = group_of(k_gamma, k_width, "k_gamma");
  parallel_rows(T, 4.0 * double(q_width + k_width), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* q = qkv.ptr<float>() + t * width;
      for (int64_t c = 0; c < q_width; c += q_group) rms_norm_row(q + c, q_gamma.ptr<float>(), eps, q_group, q + c);
      float* k = q + q_width;
      for (int64_t c = 0; c < k_width; c += k_group) rms_norm_row(k + c, k_gamma.ptr<float>(), eps, k_group, k + c);
    }
  });
}

void CpuBackend::scale_add(Tensor& x, const Tensor& y, const Tensor& scale) {
  check_host(x, DType::F32, "scale_add", "x");
  const int64_t M = rows_of(x), N = cols_of(x);
  check_matrix(y, M, N, "scale_add", "y");
  if (!scale.empty()) check_vector(scale, N, DType::F32, "scale_add", "scale");
  const float* s = scale.empty() ? nullptr : scale.ptr<float>();
  parallel_rows(M, 2.0 * double(N), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) scale_add_row(x.ptr<float>() + r * N, y.ptr<float>() + r * N, s, N);
  });
}

void CpuBackend::scale_add_norm(Tensor& x, const Tensor& branch, const Tensor& scale, NormKind kind,
                                const Tensor& gamma, const Tensor& beta, float eps, Tensor& y) {
  check_host(x, DType::F32, "scale_add_norm", "x");
  const int64_t M = rows_of(x), N = cols_of(x);
  check_matrix(branch, M, N, "scale_add_norm", "branch");
  check_matrix(y, M, N, "scale_add_norm", "y");
  FOVEA_CHECK(y.data != x.data, "scale_add_norm: y aliases x");
  if (!scale.empty()) check_vector(scale, N, DType::F32, "scale_add_norm", "scale");
  check_vector(gamma, N, DType::F32, "scale_add_norm", "gamma");
  if (kind == NormKind::Layer) check_vector(beta, N, DType::F32, "scale_add_norm", "beta");
  else FOVEA_CHECK(beta.empty(), "scale_add_norm: RMSNorm takes no beta");
  const float* s = scale.empty() ? nullptr : scale.ptr<float>();
  parallel_rows(M, 10.0 * double(N), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* res = x.ptr<float>() + r * N;
      float* out = y.ptr<float>() + r * N;
      scale_add_row(res, branch.ptr<float>() + r * N, s, N);  // the whole row before y: y may alias branch
      if (kind == NormKind::Layer) layer_norm_row(res, gamma.ptr<float>(), beta.ptr<float>(), eps, N, out);
      else rms_norm_row(res, gamma.ptr<float>(), eps, N, out);
    }
  });
}

void CpuBackend::silu_mul(const Tensor& gate_up, Tensor& y) {
  check_host(gate_up, DType::F32, "silu_mul", "gate_up");
  const int64_t M = rows_of(gate_up), F2 = cols_of(gate_up);
  FOVEA_CHECK(F2 % 2 == 0, "silu_mul: gate_up has an odd width ", F2);
  const int64_t F = F2 / 2;
  check_matrix(y, M, F, "silu_mul", "y");
  parallel_rows(M, 20.0 * double(F), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* gate = gate_up.ptr<float>() + r * F2;
      const float* up = gate + F;
      float* out = y.ptr<float>() + r * F;
      for (int64_t i = 0; i < F; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    }
  });
}

void CpuBackend::embedding(const Tensor& ids, const Tensor& table, Tensor& y) {
  check_host(ids, DType::I32, "embedding", "ids");
  check_host(table, DType::F32, "embedding", "table");
  FOVEA_CHECK(table.rank() == 2, "embedding: table has shape ", shape_str(table.shape));
  const int64_t T = ids.numel(), V = table.dim(0), H = table.dim(1);
  check_matrix(y, T, H, "embedding", "y");
  const int32_t* id = ids.ptr<int32_t>();
  for (int64_t t = 0; t < T; ++t)
    FOVEA_CHECK(id[t] >= 0 && id[t] < V, "embedding: id ", id[t], " at ", t, " is outside the vocabulary of ", V);
  parallel_rows(T, double(H), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      std::copy_n(table.ptr<float>() + int64_t(id[t]) * H, H, y.ptr<float>() + t * H);
  });
}

void CpuBackend::scatter_rows(const Tensor& src, const Tensor& idx, Tensor& dst) {
  check_host(src, DType::F32, "scatter_rows", "src");
  check_host(dst, DType::F32, "scatter_rows", "dst");
  const int64_t N = rows_of(src), H = cols_of(src), T = rows_of(dst);
  FOVEA_CHECK(cols_of(dst) == H, "scatter_rows: src ", shape_str(src.shape), " vs dst ", shape_str(dst.shape));
  check_vector(idx, N, DType::I32, "scatter_rows", "idx");
  const int32_t* to = idx.ptr<int32_t>();
  for (int64_t i = 0; i < N; ++i)
    FOVEA_CHECK(to[i] >= 0 && to[i] < T, "scatter_rows: index ", to[i], " at ", i, " outside [0, ", T, ")");
  for (int64_t i = 0; i < N; ++i) std::copy_n(src.ptr<float>() + i * H, H, dst.ptr<float>() + int64_t(to[i]) * H);
}

void CpuBackend::gather_rows(const Tensor& x, const Tensor& idx, Tensor& y) {
  check_host(x, DType::F32, "gather_rows", "x");
  const int64_t T = rows_of(x), H = cols_of(x), B = idx.numel();
  check_vector(idx, B, DType::I32, "gather_rows", "idx");
  check_matrix(y, B, H, "gather_rows", "y");
  const int32_t* from = idx.ptr<int32_t>();
  for (int64_t i = 0; i < B; ++i)
    FOVEA_CHECK(from[i] >= 0 && from[i] < T, "gather_rows: index ", from[i], " at ", i, " outside [0, ", T, ")");
  for (int64_t i = 0; i < B; ++i) std::copy_n(x.ptr<float>() + int64_t(from[i]) * H, H, y.ptr<float>() + i * H);
}

}  // namespace fovea
