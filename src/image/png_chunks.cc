// A PNG's chunk list checked before libpng decodes it, with Pillow's PngImagePlugin as the reference for what
// is refused. libpng alone accepts files Pillow refuses (it skips bad ancillary chunks and stops reading once
// the image rows are complete), and inflates zTXt/iTXt/iCCP up to its malloc limit; Pillow bounds each one.
//
// What Pillow checks and we mirror:
// - before the first IDAT: each chunk complete with a correct CRC; iCCP and zTXt with compression method 0;
//   acTL of 8 bytes and more; fcTL of 26 bytes, sequence numbers from 0 up, frame inside the image;
// - after it (up to IEND, a header it cannot read, or the next APNG frame's fcTL): each chunk complete,
//   fdAT numbered after the previous fcTL/fdAT;
// - anywhere: zTXt, compressed iTXt and iCCP inflate to at most limits.max_png_text_bytes ("Decompressed
//   data too large"), text in all at most 64 times that; corrupt deflate data in them is ignored, as Pillow
//   ignores it.
// And one limit of our own: a chunk other than IDAT/fdAT over limits.max_png_chunk_bytes is refused.
#include <zlib.h>

#include <cstring>

#include "image/image_internal.h"

namespace fovea::image_internal {
namespace {

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

bool is_chunk_type(const uint8_t* t) {
  for (int i = 0; i < 4; ++i)
    if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z') || (t[i] >= '0' && t[i] <= '9') ||
          t[i] == '_'))
      return false;
  return true;
}

// Inflated size of a zlib stream, stopping once it passes `limit` (returns limit + 1 then). Corrupt or
// incomplete data: returns what was inflated before the error, as Pillow keeps going without the text.
int64_t inflated_size(const uint8_t* data, size_t size, int64_t limit) {
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return 0;
  z.next_in = const_cast<uint8_t*>(data);
  z.avail_in = uInt(size);
  uint8_t out[16384];
  int64_t total = 0;
  for (;;) {
    z.next_out = out;
    z.avail_out = sizeof out;
    const int rc = inflate(&z, Z_NO_FLUSH);
    total += int64_t(sizeof out - z.avail_out);
    if (total > limit) {
      total = limit + 1;
      break;
    }
    if (rc != Z_OK) break;  // Z_STREAM_END, a data error, or no progress possible
  }
  inflateEnd(&z);
  return total;
}

struct Chunk {
  char type[5] = {};
  const uint8_t* data = nullptr;
  uint32_t length = 0;
  bool is(const char* t) const { return std::memcmp(type, t, 4) == 0; }
};

class ChunkWalker {
 public:
  ChunkWalker(const std::string& bytes, const ImageLimits& limits)
      : p_(reinterpret_cast<const uint8_t*>(bytes.data())), size_(bytes.size()), limits_(limits) {}

  void run() {
    size_t at = 8;
    bool after_idat = false;
    while (at + 8 <= size_) {
      Chunk c;
      c.length = be32(p_ + at);
      std::memcpy(c.type, p_ + at + 4, 4);
      if (!is_chunk_type(p_ + at + 4)) {
        // Pillow: "broken PNG file" before the image data; after it, the end of what it reads.
        if (after_idat) return;
        FOVEA_FAIL("PNG: broken PNG file (chunk type ", printable(c.type), ")");
      }
      if (c.is("IEND")) return;
      const bool image_data = c.is("IDAT") || c.is("fdAT");
      FOVEA_CHECK(image_data || int64_t(c.length) <= limits_.max_png_chunk_bytes, "PNG: ", c.type, " chunk of ",
                  c.length, " bytes is over the limit of ", limits_.max_png_chunk_bytes, " bytes");
      FOVEA_CHECK(c.length <= size_ - at - 8, "PNG: image file is truncated (", c.type, " chunk)");
      c.data = p_ + at + 8;
      if (c.is("IDAT") && !after_idat) {
        after_idat = true;
        // Pillow counts an IDAT that no fcTL precedes as an extra default image.
        animated_ = (frames_ ? frames_ : 1) + (frames_ && !seen_fctl_ ? 1 : 0) > 1;
      } else if (after_idat && c.is("fcTL") && animated_) {
        return;  // the next frame starts: Pillow's first frame ends here
      }
      check_chunk(c, after_idat);  // before the CRC, as Pillow reads a chunk and then its checksum
      if (!after_idat) {
        FOVEA_CHECK(at + 12 + size_t(c.length) <= size_, "PNG: broken PNG file (incomplete checksum in ", c.type, ")");
        const uint32_t crc = uint32_t(crc32(crc32(0, p_ + at + 4, 4), c.data, c.length));
        FOVEA_CHECK(crc == be32(c.data + c.length), "PNG: broken PNG file (bad checksum in ", c.type, ")");
      }
      at += 12 + size_t(c.length);
    }
    // Pillow reads chunks until IEND; a file cut before it fails there unless the image data is complete,
    // which libpng decides.
  }

 private:
  static std::string printable(const char* t) {
    std::string s;
    for (int i = 0; i < 4; ++i) s += (t[i] >= 32 && t[i] < 127) ? t[i] : '?';
    return s;
  }

  void check_inflated(const Chunk& c, const uint8_t* z, size_t n) {
    const int64_t size = inflated_size(z, n, limits_.max_png_text_bytes);
    FOVEA_CHECK(size <= limits_.max_png_text_bytes, "PNG: ", c.type, " chunk inflates to more than ",
                limits_.max_png_text_bytes, " bytes (decompression bomb)");
    add_text(size);
  }

  void add_text(int64_t n) {
    text_bytes_ += n;
    FOVEA_CHECK(text_bytes_ <= 64 * limits_.max_png_text_bytes, "PNG: text chunks hold more than ",
                64 * limits_.max_png_text_bytes, " bytes");
  }

  void check_sequence(const Chunk& c) {
    FOVEA_CHECK(c.length >= 4, "PNG: APNG contains truncated ", c.type, " chunk");
    const uint32_t seq = be32(c.data);
    // The first fcTL is number 0; an fdAT must follow an fcTL or fdAT.
    const bool ok = seq_valid_ ? seq == seq_ + 1 : c.is("fcTL") && seq == 0;
    FOVEA_CHECK(ok, "PNG: APNG contains frame sequence errors (", c.type, ")");
    seq_ = seq;
    seq_valid_ = true;
  }

  void check_chunk(const Chunk& c, bool after_idat) {
    const uint8_t* d = c.data;
    const size_t n = c.length;
    const uint8_t* nul = static_cast<const uint8_t*>(std::memchr(d, 0, n));
    if (c.is("zTXt")) {
      const size_t v = nul ? size_t(nul - d) + 1 : n;  // value after the keyword's NUL
      FOVEA_CHECK(v >= n || d[v] == 0, "PNG: unknown compression method ", int(d[v]), " in zTXt chunk");
      if (v < n) check_inflated(c, d + v + 1, n - v - 1);
    } else if (c.is("iCCP")) {
      // Pillow reads the method right after the first NUL (or at byte 0 when there is none).
      const size_t m = nul ? size_t(nul - d) + 1 : 0;
      FOVEA_CHECK(m < n, "PNG: truncated iCCP chunk");
      FOVEA_CHECK(d[m] == 0, "PNG: unknown compression method ", int(d[m]), " in iCCP chunk");
      check_inflated(c, d + m + 1, n - m - 1);
    } else if (c.is("iTXt")) {
      if (!nul || size_t(nul - d) + 3 > n) return;
      const size_t flag = size_t(nul - d) + 1;
      if (d[flag] == 0) {  // uncompressed
        add_text(int64_t(n));
        return;
      }
      if (d[flag + 1] != 0) return;  // a compression method Pillow skips
      // language NUL translated-keyword NUL text
      const uint8_t* rest = d + flag + 2;
      size_t left = n - flag - 2;
      for (int field = 0; field < 2; ++field) {
        const uint8_t* end = static_cast<const uint8_t*>(std::memchr(rest, 0, left));
        if (!end) return;
        left -= size_t(end - rest) + 1;
        rest = end + 1;
      }
      check_inflated(c, rest, left);
    } else if (c.is("tEXt")) {
      add_text(nul ? int64_t(n) - (nul - d) - 1 : 0);
    } else if (c.is("acTL") && !after_idat) {
      FOVEA_CHECK(n >= 8, "PNG: APNG contains truncated acTL chunk");
      const uint32_t frames = be32(d);
      if (frames_) {
        frames_ = 0;  // a second valid acTL: Pillow falls back to the default image
      } else if (frames != 0 && frames <= 0x80000000u) {
        frames_ = frames;
      }
    } else if (c.is("fcTL")) {
      FOVEA_CHECK(n >= 26, "PNG: APNG contains truncated fcTL chunk");
      check_sequence(c);
      seen_fctl_ = true;
      FOVEA_CHECK(uint64_t(be32(d + 12)) + be32(d + 4) <= width_ && uint64_t(be32(d + 16)) + be32(d + 8) <= height_,
                  "PNG: APNG contains invalid frames");
    } else if (c.is("fdAT")) {
      check_sequence(c);
    } else if (c.is("IHDR") && n >= 8) {
      width_ = be32(d);
      height_ = be32(d + 4);
    }
  }

  const uint8_t* p_;
  size_t size_;
  const ImageLimits& limits_;
  int64_t text_bytes_ = 0;
  uint32_t width_ = 0, height_ = 0;
  uint32_t frames_ = 0;  // acTL's frame count, 0 when absent or invalid
  bool seen_fctl_ = false, animated_ = false;
  uint32_t seq_ = 0;
  bool seq_valid_ = false;
};

}  // namespace

void check_png_chunks(const std::string& bytes, const ImageLimits& limits) { ChunkWalker(bytes, limits).run(); }

}  // namespace fovea::image_internal
