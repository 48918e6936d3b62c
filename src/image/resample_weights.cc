// Pillow's coefficient computation, in double, in the same order of operations. This file is compiled with
// -ffp-contract=off: a fused multiply-add would round differently from Pillow's build and move a weight by
// one fixed-point unit, which is enough to change an output byte.
#include <cmath>

#include "image/resample.h"

namespace fovea {
namespace {

double bicubic_filter(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}
constexpr double kBicubicSupport = 2.0;

}  // namespace

ResampleWeights bicubic_weights(int in_size, int out_size) {
  FOVEA_CHECK(in_size > 0 && out_size > 0, "resize: bad sizes ", in_size, " -> ", out_size);
  // Pillow passes the box as floats; whole-image boxes are exact in float.
  const float in0 = 0.0f, in1 = float(in_size);
  const double scale = double(in1 - in0) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = kBicubicSupport * filterscale;
  ResampleWeights w;
  w.ksize = int(std::ceil(support)) * 2 + 1;
  w.first.resize(out_size);
  w.count.resize(out_size);
  w.weights.assign(size_t(out_size) * w.ksize, 0);
  std::vector<double> k(w.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = int(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = int(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      const double v = bicubic_filter((x + xmin - center + 0.5) * ss);
      k[x] = v;
      ww += v;
    }
    int32_t* fixed = &w.weights[size_t(xx) * w.ksize];
    for (int x = 0; x < xmax; ++x) {
      const double v = ww != 0.0 ? k[x] / ww : k[x];
      const double scaled = v * (1 << kResamplePrecisionBits);
      fixed[x] = v < 0 ? int32_t(-0.5 + scaled) : int32_t(0.5 + scaled);
    }
    w.first[xx] = xmin;
    w.count[xx] = xmax;
  }
  return w;
}

}  // namespace fovea
