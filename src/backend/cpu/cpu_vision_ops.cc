// Vision ops of CpuBackend: pixel normalisation, patchify, ViT embeddings, dense (non-causal) attention and
// InternVL's pixel shuffle.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_util.h"
#include "image/normalize_kernels.h"

namespace fovea {

using cpu::check_host;
using cpu::check_matrix;
using cpu::check_vector;
using cpu::parallel_rows;

void CpuBackend::normalize_pixels(const Tensor& rgb, const NormalizeConstants& k, Tensor& out) {
  check_host(rgb, DType::U8, "normalize_pixels", "rgb");
  check_host(out, DType::F32, "normalize_pixels", "out");
  FOVEA_CHECK(rgb.rank() == 4 && rgb.dim(3) == 3, "normalize_pixels: rgb has shape ", shape_str(rgb.shape),
              ", expected [T, H, W, 3]");
  const int64_t T = rgb.dim(0), H = rgb.dim(1), W = rgb.dim(2);
  const Shape planes{T, 3, H, W};
  FOVEA_CHECK(out.shape == planes, "normalize_pixels: out has shape ", shape_str(out.shape), ", expected ",
              shape_str(planes));
  const int64_t plane = H * W;
  // The host pipeline's own loop (same float ops, same order), so the two agree bit for bit.
  parallel_rows(T, double(plane) * 6, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* r = out.ptr<float>() + t * 3 * plane;
      normalize_kernels::normalize_pixels_generic(rgb.ptr<uint8_t>() + t * plane * 3, size_t(plane), k, r,
                                                  r + plane, r + 2 * plane);
    }
  });
}

void CpuBackend::patchify(const Tensor& pixels, int patch, Tensor& patches) {
  check_host(pixels, DType::F32, "patchify", "pixels");
  FOVEA_CHECK(pixels.rank() == 4 && pixels.dim(1) == 3 && pixels.dim(2) == pixels.dim(3),
              "patchify: pixels have shape ", shape_str(pixels.shape), ", expected [B, 3, S, S]");
  const int64_t B = pixels.dim(0), S = pixels.dim(2);
  FOVEA_CHECK(patch > 0 && S % patch == 0, "patchify: image size ", S, " is not a multiple of patch ", patch);
  const int64_t G = S / patch, width = 3 * int64_t(patch) * patch;
  check_matrix(patches, B * G * G, width, "patchify", "patches");
  parallel_rows(B * G * G, double(width), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int64_t b = p / (G * G), py = (p / G) % G, px = p % G;
      float* out = patches.ptr<float>() + p * width;
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t ky = 0; ky < patch; ++ky) {
          const float* in = pixels.ptr<float>() + ((b * 3 + c) * S + py * patch + ky) * S + px * patch;
          for (int64_t kx = 0; kx < patch; ++kx) *out++ = in[kx];
        }
    }
  });
}

void CpuBackend::vit_embed(const Tensor& patch_emb, const Tensor& cls, const Tensor& pos, int batch, Tensor& out) {
  check_host(patch_emb, DType::F32, "vit_embed", "patch_emb");
  const int64_t C = cpu::cols_of(patch_emb);
  FOVEA_CHECK(batch > 0 && cpu::rows_of(patch_emb) % batch == 0, "vit_embed: ", cpu::rows_of(patch_emb),
              " patch rows do not split into ", batch, " images");
  const int64_t P = cpu::rows_of(patch_emb) / batch;
  check_vector(cls, C, DType::F32, "vit_embed", "cls");
  check_matrix(pos, P + 1, C, "vit_embed", "pos");
  check_matrix(out, batch * (P + 1), C, "vit_embed", "out");
  parallel_rows(batch * (P + 1), double(C), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t b = r / (P + 1), i = r % (P + 1);
      const float* src = i == 0 ? cls.ptr<float>() : patch_emb.ptr<float>() + (b * P + i - 1) * C;
      const float* add = pos.ptr<float>() + i * C;
      float* dst = out.ptr<float>() + r * C;
      for (int64_t c = 0; c < C; ++c) dst[c] = src[c] + add[c];
    }
  });
}

void CpuBackend::attention_dense(const Tensor& qkv, int batch, int tokens, int heads, int head_dim, Tensor& out) {
  FOVEA_CHECK(batch >= 0 && tokens > 0 && heads > 0 && head_dim > 0, "attention_dense: bad sizes");
  const int64_t T = tokens, D = head_dim, HD = int64_t(heads) * D;
  check_matrix(qkv, batch * T, 3 * HD, "attention_dense", "qkv");
  check_matrix(out, batch * T, HD, "attention_dense", "out");
  const float scale = 1.0f / std::sqrt(float(D));
  // Per (image, head): pack Q, K and V^T contiguously, then each block of queries is two small GEMMs around a
  // row softmax: scores = Q_blk K^T * scale, out = softmax(scores) V.
  constexpr int64_t kQueryBlock = 32;
  std::vector<float> q(static_cast<size_t>(T * D)), k(q.size()), v_t(q.size());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const float* rows = qkv.ptr<float>() + b * T * 3 * HD;
      for (int64_t j = 0; j < T; ++j) {
        const float* row = rows + j * 3 * HD + h * D;
        std::copy_n(row, D, q.data() + j * D);
        std::copy_n(row + HD, D, k.data() + j * D);
        for (int64_t d = 0; d < D; ++d) v_t[size_t(d * T + j)] = row[2 * HD + d];
      }
      const int64_t blocks = (T + kQueryBlock - 1) / kQueryBlock;
      parallel_rows(blocks, 4.0 * double(kQueryBlock) * double(T) * double(D), [&](int64_t begin, int64_t end) {
        std::vector<float> scores(static_cast<size_t>(kQueryBlock * T)), o(static_cast<size_t>(kQueryBlock * D));
        for (int64_t blk = begin; blk < end; ++blk) {
          const int64_t i0 = blk * kQueryBlock, n = std::min(kQueryBlock, T - i0);
          cpu::gemm_nt(q.data() + i0 * D, k.data(), nullptr, scores.data(), n, T, D, Activation::None, false);
          for (int64_t i = 0; i < n; ++i) {
            float* s = scores.data() + i * T;
            for (int64_t j = 0; j < T; ++j) s[j] *= scale;
            const float inv_sum = cpu::exp_normalize(s, T);
            for (int64_t j = 0; j < T; ++j) s[j] *= inv_sum;
          }
          cpu::gemm_nt(scores.data(), v_t.data(), nullptr, o.data(), n, D, T, Activation::None, false);
          for (int64_t i = 0; i < n; ++i)
            std::copy_n(o.data() + i * D, D, out.ptr<float>() + (b * T + i0 + i) * HD + h * D);
        }
      });
    }
}

void CpuBackend::pixel_shuffle(const Tensor& x, int batch, int grid, Tensor& y) {
  FOVEA_CHECK(batch >= 0 && grid > 0 && grid % 2 == 0, "pixel_shuffle: grid ", grid, " must be even");
  check_host(x, DType::F32, "pixel_shuffle", "x");
  const int64_t C = cpu::cols_of(x), G = grid, half = G / 2;
  check_matrix(x, batch * (1 + G * G), C, "pixel_shuffle", "x");
  check_matrix(y, batch * half * half, 4 * C, "pixel_shuffle", "y");
  // InternVL (ps_version v2): output token (r, c) concatenates patches (2r, 2c), (2r, 2c+1), (2r+1, 2c),
  // (2r+1, 2c+1) of the row-major patch grid, CLS dropped.
  parallel_rows(batch * half * half, 4.0 * double(C), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / (half * half), r = (t / half) % half, c = t % half;
      float* dst = y.ptr<float>() + t * 4 * C;
      for (int q = 0; q < 4; ++q) {
        const int64_t patch_row = 2 * r + q / 2, patch_col = 2 * c + q % 2;
        const float* src = x.ptr<float>() + (b * (1 + G * G) + 1 + patch_row * G + patch_col) * C;
        std::copy_n(src, C, dst + q * C);
      }
    }
  });
}

}  // namespace fovea
