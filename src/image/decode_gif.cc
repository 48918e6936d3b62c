// GIF (first frame), parsed and LZW-decoded here with the semantics of Pillow's GifImagePlugin + GifDecode.c,
// which are more lenient than giflib (e.g. LZW minimum code sizes up to 12) and decide what "decodable" means:
// - canvas = logical screen grown to hold the frame; filled with the frame's transparent index (or 0) before
//   the frame is pasted at its offset; indices looked up in the local palette, else the global one, else
//   read as grey levels;
// - the image is complete when its last row is written; running out of data or an end-of-information code
//   before that is an error ("image file is truncated");
// - a code beyond the next free table entry, or a first code after a clear that is not a literal, is an error.
#include <algorithm>
#include <cstring>

#include "image/image_internal.h"

namespace fovea::image_internal {
namespace {

class GifReader {
 public:
  explicit GifReader(const std::string& bytes) : data_(reinterpret_cast<const uint8_t*>(bytes.data())),
                                                 size_(bytes.size()) {}
  bool has(size_t n) const { return pos_ + n <= size_; }
  uint8_t byte() {
    FOVEA_CHECK(has(1), "GIF: image file is truncated");
    return data_[pos_++];
  }
  int le16() {
    const int lo = byte();
    return lo | byte() << 8;
  }
  const uint8_t* take(size_t n) {
    FOVEA_CHECK(has(n), "GIF: image file is truncated");
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  void skip_sub_blocks() {
    for (uint8_t n; (n = byte()) != 0;) take(n);
  }
  size_t pos() const { return pos_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

struct Frame {
  int left = 0, top = 0, width = 0, height = 0;
  bool interlaced = false;
  int transparent = -1;
  std::vector<uint8_t> palette;  // RGB triples; empty: no palette at all
  int min_code_size = 0;
};

std::vector<uint8_t> read_palette(GifReader& in, int flags) {
  const size_t entries = size_t(2) << (flags & 7);
  const uint8_t* p = in.take(entries * 3);
  return std::vector<uint8_t>(p, p + entries * 3);
}

// Walks the blocks before the first image descriptor (Pillow skips bytes it does not know one at a time).
Frame read_first_frame_header(GifReader& in, const std::vector<uint8_t>& global_palette) {
  Frame frame;
  for (;;) {
    FOVEA_CHECK(in.has(1), "GIF: no image in file");
    const uint8_t block = in.byte();
    if (block == ';') FOVEA_FAIL("GIF: no image in file");
    if (block == '!') {
      const uint8_t label = in.byte();
      const uint8_t n = in.byte();
      const uint8_t* payload = in.take(n);
      if (label == 0xF9 && n >= 4 && (payload[0] & 1)) frame.transparent = payload[3];
      // As Pillow: a comment ends at its first empty sub-block; other extensions read on to the next one.
      if (!(label == 0xFE && n == 0)) in.skip_sub_blocks();
    } else if (block == ',') {
      frame.left = in.le16();
      frame.top = in.le16();
      frame.width = in.le16();
      frame.height = in.le16();
      const uint8_t flags = in.byte();
      frame.interlaced = flags & 0x40;
      frame.palette = (flags & 0x80) ? read_palette(in, flags) : global_palette;
      frame.min_code_size = in.byte();
      return frame;
    }
  }
}

// Writes decoded indices into the frame's rows in file order (interlaced frames come in four passes).
class FrameWriter {
 public:
  FrameWriter(uint8_t* canvas, int64_t canvas_width, const Frame& f)
      : canvas_(canvas), stride_(canvas_width), frame_(f), step_(f.interlaced ? 8 : 1) {}
  bool done() const { return done_; }
  void put(uint8_t index) {
    canvas_[(int64_t(frame_.top) + y_) * stride_ + frame_.left + x_] = index;
    if (++x_ < frame_.width) return;
    x_ = 0;
    y_ += step_;
    while (y_ >= frame_.height && !done_) {
      switch (pass_++) {
        case 0: y_ = 4; step_ = 8; break;
        case 1: y_ = 2; step_ = 4; break;
        case 2: y_ = 1; step_ = 2; break;
        default: done_ = true;
      }
      if (!frame_.interlaced) done_ = true;
    }
  }

 private:
  uint8_t* canvas_;
  int64_t stride_;
  const Frame& frame_;
  int x_ = 0, y_ = 0, step_, pass_ = 0;
  bool done_ = false;
};

// LZW over the data sub-blocks that follow the frame header, until the frame is complete.
void decode_lzw(GifReader& in, const Frame& frame, FrameWriter& out, const DecodeClock& clock) {
  constexpr int kMaxBits = 12, kTableSize = 1 << kMaxBits;
  FOVEA_CHECK(frame.min_code_size >= 0 && frame.min_code_size <= kMaxBits, "GIF: bad LZW code size ",
              frame.min_code_size);
  const int clear = 1 << frame.min_code_size, end = clear + 1;
  std::vector<uint16_t> prefix(kTableSize);
  std::vector<uint8_t> suffix(kTableSize), stack;
  stack.reserve(kTableSize + 1);
  int next = clear + 2, code_size = frame.min_code_size + 1;
  int previous = -1;       // previous code, -1 right after a clear
  uint8_t first_byte = 0;  // first byte of the previous code's string
  uint32_t bit_buffer = 0;
  int bit_count = 0, block_left = 0;
  for (uint32_t codes = 1; !out.done(); ++codes) {
    if (codes % 65536 == 0) FOVEA_CHECK(!clock.expired(), "GIF: ", clock.message());
    while (bit_count < code_size) {
      if (block_left == 0) {
        block_left = in.byte();  // a zero-length block is read past, as Pillow does
        // Pillow only decodes whole sub-blocks; a cut one means a truncated file even if it held enough codes.
        FOVEA_CHECK(in.has(size_t(block_left)), "GIF: image file is truncated");
        continue;
      }
      bit_buffer |= uint32_t(in.byte()) << bit_count;
      bit_count += 8;
      --block_left;
    }
    const int code = int(bit_buffer & ((1u << code_size) - 1));
    bit_buffer >>= code_size;
    bit_count -= code_size;
    if (code == clear) {
      next = clear + 2;
      code_size = frame.min_code_size + 1;
      previous = -1;
      continue;
    }
    // Pillow stops at the end code and asks for more data, which a complete file does not have.
    FOVEA_CHECK(code != end, "GIF: image file is truncated (end of image data before the last row)");
    if (previous < 0) {
      FOVEA_CHECK(code < clear, "GIF: broken LZW data");
      first_byte = uint8_t(code);
      previous = code;
      out.put(first_byte);
      continue;
    }
    FOVEA_CHECK(code <= next, "GIF: broken LZW data");
    stack.clear();
    int walk = code;
    if (code == next) {  // the string being defined: previous string + its own first byte
      stack.push_back(first_byte);
      walk = previous;
    }
    while (walk >= clear) {
      FOVEA_CHECK(walk < kTableSize && stack.size() < size_t(kTableSize), "GIF: broken LZW data");
      stack.push_back(suffix[walk]);
      walk = prefix[walk];
    }
    stack.push_back(uint8_t(walk));
    first_byte = uint8_t(walk);
    if (next < kTableSize) {
      suffix[next] = first_byte;
      prefix[next] = uint16_t(previous);
      if (next == (1 << code_size) - 1 && code_size < kMaxBits) ++code_size;
      ++next;
    }
    previous = code;
    for (auto it = stack.rbegin(); it != stack.rend() && !out.done(); ++it) out.put(*it);
  }
}

}  // namespace

// Only the first frame is decoded (the reference's convert('RGB') reads frame 0), so later frames cost nothing.
DecodedImage decode_gif(const std::string& bytes, const ImageLimits& limits) {
  const DecodeClock clock(limits);
  GifReader in(bytes);
  const uint8_t* signature = in.take(6);
  FOVEA_CHECK(std::memcmp(signature, "GIF87a", 6) == 0 || std::memcmp(signature, "GIF89a", 6) == 0,
              "GIF: not a GIF file");
  const int screen_width = in.le16(), screen_height = in.le16();
  const uint8_t flags = in.byte();
  in.take(2);  // background index, aspect
  const std::vector<uint8_t> global_palette = (flags & 0x80) ? read_palette(in, flags) : std::vector<uint8_t>{};
  check_pixel_limit("GIF", std::max(screen_width, 1), std::max(screen_height, 1), limits);

  const Frame frame = read_first_frame_header(in, global_palette);
  const int64_t width = std::max<int64_t>(screen_width, int64_t(frame.left) + frame.width);
  const int64_t height = std::max<int64_t>(screen_height, int64_t(frame.top) + frame.height);
  check_pixel_limit("GIF", width, height, limits);
  FOVEA_CHECK(frame.width > 0 && frame.height > 0, "GIF: empty frame");

  std::vector<uint8_t> indices(size_t(width) * size_t(height), uint8_t(frame.transparent >= 0 ? frame.transparent : 0));
  FrameWriter writer(indices.data(), width, frame);
  decode_lzw(in, frame, writer, clock);

  DecodedImage out;
  out.rgb = make_rgb("GIF", width, height, limits);
  uint8_t* dst = out.rgb.pixels.data();
  const size_t palette_entries = frame.palette.size() / 3;
  for (size_t i = 0; i < indices.size(); ++i) {
    const size_t index = indices[i];
    if (frame.palette.empty()) {
      dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = uint8_t(index);
    } else if (index < palette_entries) {
      std::memcpy(dst + 3 * i, &frame.palette[3 * index], 3);
    } else {
      dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = 0;
    }
  }
  return out;
}

}  // namespace fovea::image_internal
