// One image decoder (FUZZ_DECODER=decode_jpeg, ...) or, for decode_any, format sniffing + every decoder + EXIF
// orientation through decode_image(). Limits are lowered so a mutated size cannot make one run slow.
#include <cstdint>

#include "fuzz_util.h"
#include "image/image_internal.h"

namespace {
[[maybe_unused]] fovea::image_internal::DecodedImage decode_any(const std::string& bytes, const fovea::ImageLimits& limits) {
  fovea::image_internal::DecodedImage out;
  out.rgb = fovea::decode_image(bytes, limits, /*exif_transpose=*/true);
  return out;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fovea::image_internal;
  fovea::ImageLimits limits;
  limits.max_pixels = 1 << 20;
  limits.max_decode_cpu_seconds = 1;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  fovea::fuzz::expect_only_fovea_errors([&] {
    const DecodedImage image = FUZZ_DECODER(bytes, limits);
    if (image.rgb.pixels.size() != size_t(image.rgb.width) * size_t(image.rgb.height) * 3) std::abort();
    (void)exif_orientation(image.exif);
  });
  return 0;
}
