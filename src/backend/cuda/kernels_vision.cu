// Vision-side data movement: pixel normalisation (U8 RGB tiles -> F32 planes), patch extraction (F32 pixels ->
// bf16 patches), CLS + position embedding, and InternVL's pixel shuffle.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/kernels.h"

namespace fovea::cuda {
namespace {

constexpr int kThreads = 256;

// (v / 255 - mean) / std with explicitly round-to-nearest IEEE division and subtraction: the same float ops
// as the host pipeline (image/normalize_kernels.h), so the result is bit-identical whatever nvcc's flags.
struct NormalizeArgs {
  float mean[3];
  float std_dev[3];
};

__device__ __forceinline__ float normalize_channel(uint32_t v, float mean, float std_dev) {
  return __fdiv_rn(__fsub_rn(__fdiv_rn(float(v), 255.0f), mean), std_dev);
}

// One thread per pixel: 3 bytes in, one float to each of the three planes (neighbouring threads write
// neighbouring floats of a plane, so stores coalesce).
__global__ void normalize_pixels_kernel(const uint8_t* rgb, int64_t plane, int64_t total, NormalizeArgs k,
                                        float* out) {
  const int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= total) return;
  const int64_t tile = p / plane, i = p % plane;
  const uint8_t* px = rgb + p * 3;
  float* dst = out + tile * 3 * plane + i;
#pragma unroll
  for (int c = 0; c < 3; ++c) dst[c * plane] = normalize_channel(px[c], k.mean[c], k.std_dev[c]);
}

// Four pixels per thread when a plane holds a multiple of 4 pixels and both buffers are 16-byte aligned:
// three 4-byte loads (12 bytes = 4 RGB pixels) and one float4 store per plane.
__global__ void normalize_pixels4_kernel(const uint8_t* rgb, int64_t plane, int64_t total_quads, NormalizeArgs k,
                                         float* out) {
  const int64_t q = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (q >= total_quads) return;
  const int64_t p = q * 4, tile = p / plane, i = p % plane;
  const uint32_t* words = reinterpret_cast<const uint32_t*>(rgb + p * 3);
  const uint32_t w[3] = {words[0], words[1], words[2]};
  float v[3][4];
#pragma unroll
  for (int b = 0; b < 12; ++b) {
    const uint32_t byte = (w[b / 4] >> (8 * (b % 4))) & 0xffu;  // little-endian: byte b of the 12
    const int c = b % 3, pixel = b / 3;
    v[c][pixel] = normalize_channel(byte, k.mean[c], k.std_dev[c]);
  }
  float* dst = out + tile * 3 * plane + i;
#pragma unroll
  for (int c = 0; c < 3; ++c)
    *reinterpret_cast<float4*>(dst + c * plane) = make_float4(v[c][0], v[c][1], v[c][2], v[c][3]);
}

// One thread per output element, so writes are coalesced; reads come from p-long runs of one pixel row.
__global__ void patchify_kernel(const float* pixels, int size, int patch, int grid, int64_t total, bf16* patches) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int patch_len = 3 * patch * patch;
  const int64_t patch_index = i / patch_len;
  const int k = int(i % patch_len);
  const int ch = k / (patch * patch), ky = (k / patch) % patch, kx = k % patch;
  const int64_t b = patch_index / (grid * grid);
  const int py = int(patch_index % (grid * grid)) / grid, px = int(patch_index % grid);
  const int64_t src = ((b * 3 + ch) * size + py * patch + ky) * size + px * patch + kx;
  patches[i] = __float2bfloat16(pixels[src]);
}

template <int W>
__global__ void vit_embed_kernel(const bf16* patch_emb, const bf16* cls, const bf16* pos, int patches, int cols,
                                 int64_t total_chunks, bf16* out) {
  const int64_t chunk = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (chunk >= total_chunks) return;
  const int chunks_per_row = cols / W;
  const int64_t row = chunk / chunks_per_row;
  const int c = int(chunk % chunks_per_row) * W;
  const int64_t b = row / (patches + 1);
  const int token = int(row % (patches + 1));
  const bf16* src = token == 0 ? cls + c : patch_emb + (b * patches + token - 1) * cols + c;
  float v[W], p[W];
  load_bf16<W>(src, v);
  load_bf16<W>(pos + int64_t(token) * cols + c, p);
#pragma unroll
  for (int k = 0; k < W; ++k) v[k] += p[k];
  store_bf16<W>(out + row * cols + c, v);
}

// Output token (r, c) of image b is [X[2r][2c], X[2r][2c+1], X[2r+1][2c], X[2r+1][2c+1]] (CLS dropped), the
// order InternVL's pixel_shuffle (ps_version v2) produces.
template <int W>
__global__ void pixel_shuffle_kernel(const bf16* x, int grid, int cols, int64_t total_chunks, bf16* y) {
  const int64_t chunk = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (chunk >= total_chunks) return;
  const int chunks_per_part = cols / W;
  const int64_t part = chunk / chunks_per_part;  // (output row, quarter)
  const int c = int(chunk % chunks_per_part) * W;
  const int64_t out_row = part / 4;
  const int quarter = int(part % 4);
  const int half = grid / 2;
  const int64_t b = out_row / (half * half);
  const int r = int(out_row % (half * half)) / half, col = int(out_row % half);
  const int src_y = 2 * r + quarter / 2, src_x = 2 * col + quarter % 2;
  const int64_t src_row = b * (1 + int64_t(grid) * grid) + 1 + int64_t(src_y) * grid + src_x;
  const bf16* src = x + src_row * cols + c;
  bf16* dst = y + out_row * 4 * cols + quarter * cols + c;
  if constexpr (W == 8) {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  } else {
    *dst = *src;
  }
}

}  // namespace

void launch_normalize_pixels(const uint8_t* rgb, int64_t tiles, int64_t plane, const float mean[3],
                             const float std_dev[3], float* out, cudaStream_t stream) {
  const int64_t total = tiles * plane;
  if (total == 0) return;
  NormalizeArgs k;
  for (int c = 0; c < 3; ++c) {
    k.mean[c] = mean[c];
    k.std_dev[c] = std_dev[c];
  }
  // Tile starts stay 16-byte aligned in both buffers when the plane is a multiple of 4 pixels (48 and 16 bytes).
  if (plane % 4 == 0 && aligned16(rgb) && aligned16(out)) {
    const int64_t quads = total / 4;
    normalize_pixels4_kernel<<<blocks_for(quads, kThreads), kThreads, 0, stream>>>(rgb, plane, quads, k, out);
  } else {
    normalize_pixels_kernel<<<blocks_for(total, kThreads), kThreads, 0, stream>>>(rgb, plane, total, k, out);
  }
  FOVEA_CUDA_CHECK_LAUNCH();
}

void launch_patchify(const float* pixels, int batch, int size, int patch, bf16* patches, cudaStream_t stream) {
  const int grid = size / patch;
  const int64_t total = int64_t(batch) * grid * grid * 3 * patch * patch;
  if (total == 0) return;
  patchify_kernel<<<blocks_for(total, kThreads), kThreads, 0, stream>>>(pixels, size, patch, grid, total, patches);
  FOVEA_CUDA_CHECK_LAUNCH();
}

void launch_vit_embed(const bf16* patch_emb, const bf16* cls, const bf16* pos, int batch, int patches, int cols,
                      bf16* out, cudaStream_t stream) {
  const int64_t rows = int64_t(batch) * (patches + 1);
  if (rows == 0 || cols == 0) return;
  if (cols % 8 == 0 && aligned16(patch_emb) && aligned16(cls) && aligned16(pos) && aligned16(out)) {
    const int64_t chunks = rows * cols / 8;
    vit_embed_kernel<8><<<blocks_for(chunks, kThreads), kThreads, 0, stream>>>(patch_emb, cls, pos, patches, cols,
                                                                               chunks, out);
  } else {
    const int64_t chunks = rows * cols;
    vit_embed_kernel<1><<<blocks_for(chunks, kThreads), kThreads, 0, stream>>>(patch_emb, cls, pos, patches, cols,
                                                                               chunks, out);
  }
  FOVEA_CUDA_CHECK_LAUNCH();
}

void launch_pixel_shuffle(const bf16* x, int batch, int grid, int cols, bf16* y, cudaStream_t stream) {
  const int64_t parts = int64_t(batch) * (grid / 2) * (grid / 2) * 4;
  if (parts == 0 || cols == 0) return;
  if (cols % 8 == 0 && aligned16(x) && aligned16(y)) {
    const int64_t chunks = parts * cols / 8;
    pixel_shuffle_kernel<8><<<blocks_for(chunks, kThreads), kThreads, 0, stream>>>(x, grid, cols, chunks, y);
  } else {
    const int64_t chunks = parts * cols;
    pixel_shuffle_kernel<1><<<blocks_for(chunks, kThreads), kThreads, 0, stream>>>(x, grid, cols, chunks, y);
  }
  FOVEA_CUDA_CHECK_LAUNCH();
}

}  // namespace fovea::cuda
