#include "quantize/w4_quantize.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numeric>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace fovea {
namespace {

constexpr int kMaxQ = 15;
constexpr int kSymZero = (kMaxQ + 1) / 2;

float as_f16(float v) { return f16_to_f32(f32_to_f16(v)); }

struct GroupParams {
  float scale = 1.0f;
  int zero = 0;
  int quantize(double w) const {
    return std::clamp(int(std::nearbyint(w / scale)) + zero, 0, kMaxQ);  // half to even, like torch.round
  }
  double dequantize(int q) const { return double(q - zero) * scale; }
};

// Scale (float16-exact, as stored) and zero for the values v[0], v[stride], ... (n of them).
template <typename T>
GroupParams fit_group(const T* v, int64_t n, int64_t stride, bool sym) {
  double lo = 0.0, hi = 0.0;
  if (n > 0) lo = hi = double(v[0]);
  for (int64_t i = 1; i < n; ++i) {
    lo = std::min(lo, double(v[i * stride]));
    hi = std::max(hi, double(v[i * stride]));
  }
  GroupParams p;
  if (sym) {  // AutoGPTQ: range [-absmax, absmax] over 15 steps; an all-zero group gets [-1, 1]
    const double absmax = std::max(std::fabs(lo), std::fabs(hi));
    p.scale = as_f16(float(absmax > 0 ? 2 * absmax / kMaxQ : 2.0 / kMaxQ));
    p.zero = kSymZero;
  } else {  // AutoAWQ: [min, max] over 15 steps, zero = -round(min / scale)
    p.scale = as_f16(float(std::max(hi - lo, 1e-5) / kMaxQ));
    p.zero = std::clamp(int(std::nearbyint(-lo / p.scale)), 0, kMaxQ);
  }
  return p;
}

W4Codes empty_codes(int64_t out, int64_t in, int64_t group) {
  FOVEA_CHECK(out > 0 && in > 0 && group > 0 && in % group == 0, "4-bit quantization of a [", out, ", ", in,
              "] weight: the input size must be a multiple of the group size ", group);
  W4Codes c;
  c.out = out, c.in = in, c.groups = in / group;
  c.q.resize(size_t(out * in));
  c.zeros.resize(size_t(c.groups * out));
  c.scales.resize(size_t(c.groups * out));
  c.g_idx.resize(size_t(in));
  for (int64_t k = 0; k < in; ++k) c.g_idx[size_t(k)] = int32_t(k / group);
  return c;
}

// In-place lower Cholesky factor of the SPD matrix a [n, n] (upper triangle left as is); false when not SPD.
bool cholesky_lower(std::vector<double>& a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double d = a[size_t(j * n + j)];
    for (int64_t k = 0; k < j; ++k) d -= a[size_t(j * n + k)] * a[size_t(j * n + k)];
    if (!(d > 0)) return false;
    const double ljj = std::sqrt(d);
    a[size_t(j * n + j)] = ljj;
    ThreadPool::global().parallel_for(n - j - 1, [&](int64_t b, int64_t e) {
      for (int64_t i = j + 1 + b; i < j + 1 + e; ++i) {
        double s = a[size_t(i * n + j)];
        for (int64_t k = 0; k < j; ++k) s -= a[size_t(i * n + k)] * a[size_t(j * n + k)];
        a[size_t(i * n + j)] = s / ljj;
      }
    }, 16);
  }
  return true;
}

// U upper triangular with U^T U = H^-1 (what AutoGPTQ calls Hinv after cholesky(cholesky_inverse(...), upper)).
// Throws when H stays singular even after raising the damping a few times.
std::vector<double> inverse_hessian_factor(std::vector<double> h, int64_t n, double damp) {
  double mean_diag = 0;
  for (int64_t i = 0; i < n; ++i) mean_diag += h[size_t(i * n + i)];
  mean_diag /= double(n);
  for (int attempt = 0; attempt < 6; ++attempt, damp *= 10) {
    std::vector<double> l = h;
    for (int64_t i = 0; i < n; ++i) l[size_t(i * n + i)] += damp * mean_diag;
    if (!cholesky_lower(l, n)) continue;
    // inv(L) by forward substitution, column by column (lower triangular).
    std::vector<double> li(static_cast<size_t>(n * n), 0.0);
    ThreadPool::global().parallel_for(n, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        for (int64_t i = c; i < n; ++i) {
          double s = i == c ? 1.0 : 0.0;
          for (int64_t k = c; k < i; ++k) s -= l[size_t(i * n + k)] * li[size_t(k * n + c)];
          li[size_t(i * n + c)] = s / l[size_t(i * n + i)];
        }
      }
    });
    // H^-1 = inv(L)^T inv(L).
    std::vector<double> hinv(static_cast<size_t>(n * n), 0.0);
    ThreadPool::global().parallel_for(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t k = std::max(i, j); k < n; ++k) s += li[size_t(k * n + i)] * li[size_t(k * n + j)];
          hinv[size_t(i * n + j)] = s;
        }
    });
    if (!cholesky_lower(hinv, n)) continue;
    std::vector<double> u(static_cast<size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i; j < n; ++j) u[size_t(i * n + j)] = hinv[size_t(j * n + i)];
    return u;
  }
  FOVEA_FAIL("GPTQ: the calibration Hessian stays singular after damping (too few calibration rows?)");
}

}  // namespace

W4Codes rtn_w4(const float* w, int64_t out, int64_t in, int64_t group, bool sym) {
  W4Codes c = empty_codes(out, in, group);
  for (int64_t n = 0; n < out; ++n)
    for (int64_t g = 0; g < c.groups; ++g) {
      const float* row = w + n * in + g * group;
      const GroupParams p = fit_group(row, group, 1, sym);
      c.scales[size_t(g * out + n)] = p.scale;
      c.zeros[size_t(g * out + n)] = p.zero;
      for (int64_t k = 0; k < group; ++k) c.q[size_t(n * in + g * group + k)] = uint8_t(p.quantize(row[k]));
    }
  return c;
}

W4Codes gptq_w4(const float* w, int64_t out, int64_t in, const std::vector<double>& xtx, int64_t group, bool act_order,
                bool sym, double damp) {
  FOVEA_CHECK(int64_t(xtx.size()) == in * in, "GPTQ: Hessian has ", xtx.size(), " entries for ", in, " inputs");
  W4Codes c = empty_codes(out, in, group);
  // Columns never seen active ("dead") get H_kk = 1 and weight 0, as in AutoGPTQ.
  std::vector<bool> dead(static_cast<size_t>(in));
  for (int64_t k = 0; k < in; ++k) dead[size_t(k)] = xtx[size_t(k * in + k)] == 0;
  std::vector<int64_t> perm(static_cast<size_t>(in));
  std::iota(perm.begin(), perm.end(), 0);
  if (act_order)
    std::stable_sort(perm.begin(), perm.end(),
                     [&](int64_t a, int64_t b) { return xtx[size_t(a * in + a)] > xtx[size_t(b * in + b)]; });
  std::vector<double> h(static_cast<size_t>(in * in));
  for (int64_t i = 0; i < in; ++i)
    for (int64_t j = 0; j < in; ++j) h[size_t(i * in + j)] = xtx[size_t(perm[size_t(i)] * in + perm[size_t(j)])];
  for (int64_t i = 0; i < in; ++i)
    if (dead[size_t(perm[size_t(i)])]) h[size_t(i * in + i)] = 1;
  const std::vector<double> u = inverse_hessian_factor(std::move(h), in, damp);
  for (int64_t i = 0; i < in; ++i) c.g_idx[size_t(perm[size_t(i)])] = int32_t(i / group);

  ThreadPool::global().parallel_for(out, [&](int64_t b, int64_t e) {
    std::vector<double> row(static_cast<size_t>(in));
    for (int64_t n = b; n < e; ++n) {
      for (int64_t i = 0; i < in; ++i)
        row[size_t(i)] = dead[size_t(perm[size_t(i)])] ? 0.0 : double(w[n * in + perm[size_t(i)]]);
      GroupParams p;
      for (int64_t i = 0; i < in; ++i) {
        if (i % group == 0) {  // the group's parameters from its columns as updated so far
          p = fit_group(row.data() + i, group, 1, sym);
          c.scales[size_t((i / group) * out + n)] = p.scale;
          c.zeros[size_t((i / group) * out + n)] = p.zero;
        }
        const int q = p.quantize(row[size_t(i)]);
        c.q[size_t(n * in + perm[size_t(i)])] = uint8_t(q);
        const double err = (row[size_t(i)] - p.dequantize(q)) / u[size_t(i * in + i)];
        const double* ui = &u[size_t(i * in)];
        for (int64_t j = i + 1; j < in; ++j) row[size_t(j)] -= err * ui[j];
      }
    }
  });
  return c;
}

std::vector<float> dequantize_codes(const W4Codes& c) {
  std::vector<float> w(static_cast<size_t>(c.out * c.in));
  for (int64_t n = 0; n < c.out; ++n)
    for (int64_t k = 0; k < c.in; ++k) {
      const size_t g = size_t(c.g_idx[size_t(k)] * c.out + n);
      w[size_t(n * c.in + k)] = float(c.q[size_t(n * c.in + k)] - c.zeros[g]) * c.scales[g];
    }
  return w;
}

double output_error(const float* a, const float* b, int64_t out, int64_t in, const float* x, int64_t rows) {
  std::vector<float> diff(static_cast<size_t>(out * in));
  for (int64_t i = 0; i < out * in; ++i) diff[size_t(i)] = a[i] - b[i];
  std::mutex mutex;
  double total = 0;
  ThreadPool::global().parallel_for(rows, [&](int64_t r0, int64_t r1) {
    double part = 0;
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * in;
      for (int64_t n = 0; n < out; ++n) {
        const float* d = &diff[size_t(n * in)];
        double y = 0;
        for (int64_t k = 0; k < in; ++k) y += double(d[k]) * xr[k];
        part += y * y;
      }
    }
    std::lock_guard<std::mutex> lock(mutex);
    total += part;
  });
  return total;
}

void accumulate_xtx(const float* x, int64_t rows, int64_t in, std::vector<double>* xtx) {
  FOVEA_CHECK(int64_t(xtx->size()) == in * in, "accumulate_xtx: ", xtx->size(), " entries for ", in, " inputs");
  ThreadPool::global().parallel_for(in, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      for (int64_t r = 0; r < rows; ++r) {
        const double xi = x[r * in + i];
        if (xi == 0) continue;
        const float* xr = x + r * in;
        double* dst = &(*xtx)[size_t(i * in)];
        for (int64_t j = 0; j < in; ++j) dst[j] += xi * xr[j];
      }
  });
}

std::vector<float> awq_search_scales(const float* w, int64_t out, int64_t in, const float* x, int64_t rows,
                                     int64_t group, int grid, float* alpha) {
  FOVEA_CHECK(rows > 0 && grid > 0, "AWQ: needs calibration rows");
  std::vector<double> x_mean(static_cast<size_t>(in), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < in; ++k) x_mean[size_t(k)] += std::fabs(x[r * in + k]);
  for (double& m : x_mean) m /= double(rows);
  std::vector<float> best(static_cast<size_t>(in), 1.0f), scales(static_cast<size_t>(in)), scaled(static_cast<size_t>(out * in)), effective(static_cast<size_t>(out * in));
  double best_error = -1;
  for (int step = 0; step < grid; ++step) {
    const double a = double(step) / grid;
    double lo = 1e30, hi = 0;
    for (int64_t k = 0; k < in; ++k) {
      scales[size_t(k)] = float(std::max(std::pow(x_mean[size_t(k)], a), 1e-4));
      lo = std::min(lo, double(scales[size_t(k)]));
      hi = std::max(hi, double(scales[size_t(k)]));
    }
    const double norm = std::sqrt(lo * hi);  // AutoAWQ: s / sqrt(max * min)
    for (float& s : scales) s = float(s / norm);
    for (int64_t n = 0; n < out; ++n)
      for (int64_t k = 0; k < in; ++k) scaled[size_t(n * in + k)] = w[n * in + k] * scales[size_t(k)];
    const std::vector<float> dq = dequantize_codes(rtn_w4(scaled.data(), out, in, group, false));
    for (int64_t n = 0; n < out; ++n)
      for (int64_t k = 0; k < in; ++k) effective[size_t(n * in + k)] = dq[size_t(n * in + k)] / scales[size_t(k)];
    const double error = output_error(w, effective.data(), out, in, x, rows);
    if (best_error < 0 || error < best_error) {
      best_error = error;
      best = scales;
      if (alpha) *alpha = float(a);
    }
  }
  return best;
}

}  // namespace fovea
