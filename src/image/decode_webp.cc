// WebP through libwebp's animation decoder, which is what Pillow (≥ 9 with WebP anim support, and always
// since 11) uses for every WebP: the first frame is decoded as RGBA onto a cleared canvas, alpha dropped.
#include <webp/decode.h>
#include <webp/demux.h>

#include <cstring>

#include "image/image_internal.h"

namespace fovea::image_internal {
namespace {

struct AnimDecoderHandle {
  WebPAnimDecoder* decoder = nullptr;
  ~AnimDecoderHandle() { WebPAnimDecoderDelete(decoder); }
};

struct DemuxHandle {
  WebPDemuxer* demux = nullptr;
  ~DemuxHandle() { WebPDemuxDelete(demux); }
};

std::string read_exif_chunk(const WebPData& data) {
  DemuxHandle d;
  d.demux = WebPDemux(&data);
  if (!d.demux) return {};
  WebPChunkIterator it;
  std::string exif;
  if (WebPDemuxGetChunk(d.demux, "EXIF", 1, &it)) {
    exif.assign(reinterpret_cast<const char*>(it.chunk.bytes), it.chunk.size);
    // Some writers keep JPEG's "Exif\0\0" prefix inside the chunk.
    if (exif.rfind(std::string("Exif\0\0", 6), 0) == 0) exif.erase(0, 6);
    WebPDemuxReleaseChunkIterator(&it);
  }
  return exif;
}

}  // namespace

DecodedImage decode_webp(const std::string& bytes, const ImageLimits& limits) {
  WebPData data{reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()};
  WebPBitstreamFeatures features;
  FOVEA_CHECK(WebPGetFeatures(data.bytes, data.size, &features) == VP8_STATUS_OK,
              "WebP: cannot read the bitstream header");
  check_pixel_limit("WebP", features.width, features.height, limits);

  WebPAnimDecoderOptions options;
  FOVEA_CHECK(WebPAnimDecoderOptionsInit(&options), "WebP: libwebp version mismatch");
  options.color_mode = MODE_RGBA;
  options.use_threads = 0;
  AnimDecoderHandle h;
  h.decoder = WebPAnimDecoderNew(&data, &options);
  FOVEA_CHECK(h.decoder, "WebP: cannot parse the file");
  WebPAnimInfo info;
  FOVEA_CHECK(WebPAnimDecoderGetInfo(h.decoder, &info), "WebP: cannot read the canvas size");

  DecodedImage out;
  out.rgb = make_rgb("WebP", info.canvas_width, info.canvas_height, limits);
  uint8_t* rgba = nullptr;
  int timestamp = 0;
  FOVEA_CHECK(WebPAnimDecoderHasMoreFrames(h.decoder) && WebPAnimDecoderGetNext(h.decoder, &rgba, &timestamp),
              "WebP: cannot decode the first frame");
  const size_t pixels = size_t(info.canvas_width) * info.canvas_height;
  uint8_t* dst = out.rgb.pixels.data();
  for (size_t i = 0; i < pixels; ++i) std::memcpy(dst + 3 * i, rgba + 4 * i, 3);
  out.exif = read_exif_chunk(data);
  return out;
}

}  // namespace fovea::image_internal
