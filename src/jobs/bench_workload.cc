#include "jobs/bench_workload.h"

#include <jpeglib.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <filesystem>
#include <random>

#include "core/error.h"
#include "core/local_file.h"
#include "image/resample.h"

namespace fovea {
namespace fs = std::filesystem;

const std::vector<Resolution>& listing_resolution_mix() {
  static const std::vector<Resolution> mix = {
      {480, 360, 0.25},  {640, 480, 0.15},   {800, 600, 0.20},   {1024, 768, 0.10},
      {750, 1000, 0.10}, {1080, 1440, 0.10}, {1920, 1080, 0.05}, {612, 464, 0.05},
  };
  return mix;
}

std::vector<Resolution> resolutions_for(int count, uint64_t seed) {
  const auto& mix = listing_resolution_mix();
  std::vector<Resolution> out;
  for (int i = 0; i < count; ++i) {
    const double point = (i + 0.5) / count;
    double cumulative = 0;
    size_t pick = mix.size() - 1;
    for (size_t k = 0; k < mix.size(); ++k) {
      cumulative += mix[k].share;
      if (point < cumulative) {
        pick = k;
        break;
      }
    }
    out.push_back(mix[pick]);
  }
  std::mt19937_64 rng(seed);
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

RgbImage crop_to_aspect(const RgbImage& in, int width, int height) {
  FOVEA_CHECK(in.width > 0 && in.height > 0 && width > 0 && height > 0, "crop_to_aspect: empty size");
  int crop_w = in.width;
  int crop_h = int(int64_t(in.width) * height / width);
  if (crop_h > in.height) {
    crop_h = in.height;
    crop_w = std::max(1, int(int64_t(in.height) * width / height));
  }
  crop_h = std::max(1, crop_h);
  const int x0 = (in.width - crop_w) / 2;
  const int y0 = (in.height - crop_h) / 2;
  RgbImage out;
  out.width = crop_w;
  out.height = crop_h;
  out.pixels.resize(size_t(crop_w) * crop_h * 3);
  for (int y = 0; y < crop_h; ++y)
    std::copy_n(&in.pixels[(size_t(y0 + y) * in.width + x0) * 3], size_t(crop_w) * 3, &out.pixels[size_t(y) * crop_w * 3]);
  return out;
}

namespace {
struct JpegErrorJump {
  jpeg_error_mgr base;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void on_jpeg_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorJump*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}
}  // namespace

std::string encode_jpeg(const RgbImage& image, int quality) {
  FOVEA_CHECK(image.width > 0 && image.height > 0, "encode_jpeg: empty image");
  jpeg_compress_struct cinfo{};
  JpegErrorJump err{};
  cinfo.err = jpeg_std_error(&err.base);
  err.base.error_exit = on_jpeg_error;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&cinfo);
    std::free(buffer);
    FOVEA_FAIL("JPEG encoding failed: ", err.message);
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = JDIMENSION(image.width);
  cinfo.image_height = JDIMENSION(image.height);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);  // YCbCr with 2x2 chroma subsampling, like Pillow's default
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(&image.pixels[size_t(cinfo.next_scanline) * image.width * 3]);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::string out(reinterpret_cast<char*>(buffer), size);
  jpeg_destroy_compress(&cinfo);
  std::free(buffer);
  return out;
}

namespace {
std::vector<fs::path> sorted_files(const std::string& dir) {
  std::error_code ec;
  FOVEA_CHECK(fs::is_directory(dir, ec), "not a directory: ", dir);
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (!name.empty() && name[0] != '.' && entry.is_regular_file(ec)) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  FOVEA_CHECK(!files.empty(), "no files in ", dir);
  return files;
}

std::string read_file(const fs::path& path) { return read_local_file(path.string(), LocalFileLimits{}, "image file"); }
}  // namespace

std::vector<WorkloadImage> listing_photo_workload(const std::string& photo_dir, int count, uint64_t seed,
                                                  int jpeg_quality) {
  FOVEA_CHECK(count > 0, "the workload needs at least one request");
  std::vector<RgbImage> photos;
  std::vector<std::string> names;
  for (const auto& path : sorted_files(photo_dir)) {
    try {
      photos.push_back(decode_image_file(path.string()));
      names.push_back(path.filename().string());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench: skipping %s: %s\n", path.string().c_str(), e.what());
    }
  }
  FOVEA_CHECK(!photos.empty(), "no decodable photos in ", photo_dir);
  const std::vector<Resolution> sizes = resolutions_for(count, seed);
  std::vector<WorkloadImage> out(static_cast<size_t>(count));
  ThreadPool& pool = ThreadPool::global();
  pool.parallel_for(count, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const size_t photo = size_t(i) % photos.size();
      const Resolution r = sizes[size_t(i)];
      const RgbImage resized = resize_bicubic(crop_to_aspect(photos[photo], r.width, r.height), r.width, r.height);
      out[size_t(i)] = WorkloadImage{str(names[photo], "@", r.width, "x", r.height), encode_jpeg(resized, jpeg_quality),
                                     r.width, r.height};
    }
  });
  return out;
}

std::vector<WorkloadImage> directory_workload(const std::string& dir, int count) {
  const std::vector<fs::path> files = sorted_files(dir);
  const size_t n = count > 0 ? size_t(count) : files.size();
  std::vector<WorkloadImage> out;
  for (size_t i = 0; i < n; ++i) {
    const fs::path& path = files[i % files.size()];
    out.push_back(WorkloadImage{path.filename().string(), read_file(path), 0, 0});
  }
  return out;
}

}  // namespace fovea
