// Pillow-exact BICUBIC resize (Pillow's src/libImaging/Resample.c, 8-bit path): coefficients computed in
// double and normalised, rounded to 22-bit fixed point, horizontal pass first into an intermediate that only
// holds the rows the vertical pass reads, clip to 8 bits between the passes. Output is identical to
// PIL.Image.resize(size, Image.BICUBIC) on an RGB image.
#pragma once
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "image/preprocess.h"

namespace fovea {

// Fixed-point weights of one pass: output i reads `count[i]` inputs starting at `first[i]`, with weights
// weights[i * ksize + k].
struct ResampleWeights {
  int ksize = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<int32_t> weights;
};

constexpr int kResamplePrecisionBits = 32 - 8 - 2;  // Pillow's PRECISION_BITS

// Pillow's precompute_coeffs + normalize_coeffs_8bpc for BICUBIC over the box [0, in_size).
ResampleWeights bicubic_weights(int in_size, int out_size);

// Pillow-exact resize. `pool` spreads rows over threads (nullptr: the calling thread only); the result does
// not depend on the thread count or on whether the AVX2 kernels are used.
RgbImage resize_bicubic(const RgbImage& in, int out_width, int out_height, ThreadPool* pool = nullptr);

// The same with the plain scalar kernels only: the readable reference the fast path is tested against.
RgbImage resize_bicubic_reference(const RgbImage& in, int out_width, int out_height);

// The same resize to (cols·tile) × (rows·tile), written straight into row-major tiles [cols·rows, tile, tile, 3]
// (no intermediate full-size image, no copy).
void resize_bicubic_to_tiles(const RgbImage& in, int cols, int rows, int tile, uint8_t* tiles,
                             ThreadPool* pool = nullptr);

// True when this CPU runs the AVX2 kernels.
bool resample_uses_avx2();

}  // namespace fovea
