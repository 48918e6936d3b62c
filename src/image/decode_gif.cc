// GIF (first frame) through giflib's record reader, composed as Pillow's GifImagePlugin does: the canvas is
// the logical screen (grown to hold the frame if it sticks out), filled with the frame's transparent index
// (or 0), the frame pasted at its offset, then every index looked up in the frame's palette.
#include <gif_lib.h>

#include <algorithm>
#include <cstring>

#include "image/image_internal.h"

namespace fovea::image_internal {
namespace {

struct GifSource {
  const std::string* bytes = nullptr;
  size_t offset = 0;
};

int read_from_memory(GifFileType* gif, GifByteType* out, int length) {
  auto* src = static_cast<GifSource*>(gif->UserData);
  const size_t left = src->bytes->size() - src->offset;
  const size_t n = std::min(left, size_t(length < 0 ? 0 : length));
  std::memcpy(out, src->bytes->data() + src->offset, n);
  src->offset += n;
  return int(n);
}

struct GifHandle {
  GifFileType* gif = nullptr;
  ~GifHandle() {
    int error = 0;
    if (gif) DGifCloseFile(gif, &error);
  }
};

std::string gif_error(int code) {
  const char* text = GifErrorString(code);
  return text ? text : "unknown error";
}

// Reads extension blocks before the first image; returns the transparent index of its graphic control
// extension, or -1.
int read_until_first_image(GifFileType* gif) {
  int transparent = -1;
  for (;;) {
    GifRecordType record;
    FOVEA_CHECK(DGifGetRecordType(gif, &record) == GIF_OK, "GIF: ", gif_error(gif->Error));
    FOVEA_CHECK(record != TERMINATE_RECORD_TYPE, "GIF: no image in file");
    if (record == IMAGE_DESC_RECORD_TYPE) return transparent;
    if (record != EXTENSION_RECORD_TYPE) continue;
    int code = 0;
    GifByteType* block = nullptr;
    FOVEA_CHECK(DGifGetExtension(gif, &code, &block) == GIF_OK, "GIF: ", gif_error(gif->Error));
    if (code == GRAPHICS_EXT_FUNC_CODE && block && block[0] >= 4 && (block[1] & 1)) transparent = block[4];
    while (block) FOVEA_CHECK(DGifGetExtensionNext(gif, &block) == GIF_OK, "GIF: ", gif_error(gif->Error));
  }
}

// Frame rows in file order → canvas rows (GIF interlacing stores rows in four passes).
std::vector<int> frame_row_order(int height, bool interlaced) {
  std::vector<int> order;
  order.reserve(height);
  if (!interlaced) {
    for (int y = 0; y < height; ++y) order.push_back(y);
    return order;
  }
  const int starts[4] = {0, 4, 2, 1}, steps[4] = {8, 8, 4, 2};
  for (int pass = 0; pass < 4; ++pass)
    for (int y = starts[pass]; y < height; y += steps[pass]) order.push_back(y);
  return order;
}

}  // namespace

DecodedImage decode_gif(const std::string& bytes, const ImageLimits& limits) {
  GifSource src{&bytes, 0};
  int error = 0;
  GifHandle h;
  h.gif = DGifOpen(&src, read_from_memory, &error);
  FOVEA_CHECK(h.gif, "GIF: ", gif_error(error));
  GifFileType* gif = h.gif;
  check_pixel_limit("GIF", gif->SWidth, gif->SHeight, limits);

  const int transparent = read_until_first_image(gif);
  const int desc_status = DGifGetImageDesc(gif);
  // giflib fills the frame geometry before it reads the rest, so a bomb is reported as one even when its
  // data is cut short.
  const GifImageDesc& frame = gif->Image;
  const int64_t width = std::max<int64_t>(gif->SWidth, int64_t(frame.Left) + frame.Width);
  const int64_t height = std::max<int64_t>(gif->SHeight, int64_t(frame.Top) + frame.Height);
  if (frame.Width > 0 && frame.Height > 0) check_pixel_limit("GIF", width, height, limits);
  FOVEA_CHECK(desc_status == GIF_OK, "GIF: ", gif_error(gif->Error));
  FOVEA_CHECK(frame.Width > 0 && frame.Height > 0, "GIF: empty frame");

  // Canvas of palette indices, filled as Pillow fills it before pasting frame 0.
  std::vector<uint8_t> indices(size_t(width) * height, uint8_t(transparent >= 0 ? transparent : 0));
  const std::vector<int> order = frame_row_order(frame.Height, frame.Interlace);
  for (int i = 0; i < frame.Height; ++i) {
    uint8_t* row = indices.data() + (size_t(frame.Top) + order[i]) * width + frame.Left;
    // After the last row giflib also drains the frame's trailing blocks; a file cut off there still holds
    // every pixel (Pillow stops reading once the frame is complete), so only earlier failures count.
    const bool ok = DGifGetLine(gif, row, frame.Width) == GIF_OK;
    FOVEA_CHECK(ok || i == frame.Height - 1, "GIF: ", gif_error(gif->Error));
  }

  const ColorMapObject* map = frame.ColorMap ? frame.ColorMap : gif->SColorMap;
  DecodedImage out;
  out.rgb = make_rgb("GIF", width, height, limits);
  uint8_t* dst = out.rgb.pixels.data();
  for (size_t i = 0; i < indices.size(); ++i) {
    const int index = indices[i];
    if (!map) {  // no palette at all: Pillow reads the indices as grey levels
      dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = uint8_t(index);
    } else if (index < map->ColorCount) {
      const GifColorType& c = map->Colors[index];
      dst[3 * i] = c.Red, dst[3 * i + 1] = c.Green, dst[3 * i + 2] = c.Blue;
    } else {
      dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = 0;
    }
  }
  return out;
}

}  // namespace fovea::image_internal
