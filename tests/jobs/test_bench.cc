#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "jobs/bench_perf.h"
#include "jobs/bench_report.h"
#include "jobs/bench_workload.h"
#include "support/temp_dir.h"

namespace fovea {
namespace {
namespace fs = std::filesystem;

TEST(BenchWorkload, ResolutionsFollowTheMix) {
  const auto sizes = resolutions_for(100, 3);
  std::map<std::pair<int, int>, int> counts;
  for (const auto& r : sizes) counts[{r.width, r.height}]++;
  EXPECT_EQ(counts[std::make_pair(480, 360)], 25);
  EXPECT_EQ(counts[std::make_pair(800, 600)], 20);
  EXPECT_EQ(counts[std::make_pair(1920, 1080)], 5);
  EXPECT_EQ(counts[std::make_pair(612, 464)], 5);
  double total = 0;
  for (const auto& r : listing_resolution_mix()) total += r.share;
  EXPECT_NEAR(total, 1.0, 1e-9);
  // The same seed gives the same order (a benchmark must be repeatable); another seed shuffles differently.
  auto widths = [](const std::vector<Resolution>& v) {
    std::vector<int> w;
    for (const auto& r : v) w.push_back(r.width * 10000 + r.height);
    return w;
  };
  EXPECT_EQ(widths(resolutions_for(100, 3)), widths(sizes));
  EXPECT_NE(widths(resolutions_for(100, 4)), widths(sizes));
  EXPECT_EQ(resolutions_for(10, 1).size(), 10u);
}

RgbImage gradient(int w, int h) {
  RgbImage img;
  img.width = w;
  img.height = h;
  img.pixels.resize(size_t(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &img.pixels[(size_t(y) * w + x) * 3];
      p[0] = uint8_t(x * 255 / std::max(1, w - 1));
      p[1] = uint8_t(y * 255 / std::max(1, h - 1));
      p[2] = 128;
    }
  return img;
}

TEST(BenchWorkload, CropKeepsTheCentreAtTheTargetAspect) {
  const RgbImage wide = gradient(400, 100);
  const RgbImage cropped = crop_to_aspect(wide, 4, 3);
  EXPECT_EQ(cropped.height, 100);
  EXPECT_EQ(cropped.width, 133);
  // The first column of the crop is column (400 - 133) / 2 of the original.
  EXPECT_EQ(cropped.pixels[0], wide.pixels[size_t((400 - 133) / 2) * 3]);
  const RgbImage tall = crop_to_aspect(gradient(100, 400), 16, 9);
  EXPECT_EQ(tall.width, 100);
  EXPECT_EQ(tall.height, 56);
}

TEST(BenchWorkload, JpegRoundTripsThroughTheDecoder) {
  const RgbImage img = gradient(64, 48);
  const std::string jpeg = encode_jpeg(img, 88);
  ASSERT_GT(jpeg.size(), 100u);
  EXPECT_EQ(uint8_t(jpeg[0]), 0xFF);
  EXPECT_EQ(uint8_t(jpeg[1]), 0xD8);
  const RgbImage back = decode_image(jpeg);
  ASSERT_EQ(back.width, 64);
  ASSERT_EQ(back.height, 48);
  double err = 0;
  for (size_t i = 0; i < img.pixels.size(); ++i) err += std::abs(int(img.pixels[i]) - int(back.pixels[i]));
  EXPECT_LT(err / double(img.pixels.size()), 4.0);  // q88 on a smooth gradient: a few levels at most
}

TEST(BenchWorkload, ListingPhotosFromADirectory) {
  const test::TempDir dir("bench");
  dir.write("a.jpg", encode_jpeg(gradient(300, 200), 90));
  dir.write("b.txt", "not an image");
  const auto workload = listing_photo_workload(dir.string(), 8, 1);
  ASSERT_EQ(workload.size(), 8u);
  for (const auto& w : workload) {
    const RgbImage img = decode_image(w.bytes);
    EXPECT_EQ(img.width, w.width);
    EXPECT_EQ(img.height, w.height);
    EXPECT_EQ(w.label.rfind("a.jpg@", 0), 0u);
  }
  EXPECT_EQ(directory_workload(dir.string(), 5).size(), 5u);
  EXPECT_EQ(directory_workload(dir.string(), 0).size(), 2u);
}

TEST(BenchPerf, FlopModelMatchesPerfNotesFor8B) {
  ModelDesc desc;  // the defaults are InternVL2-8B's shape
  // PERF.md: 13 tiles + 81 text tokens (plus template) ≈ 59 TFLOP per request at max_tokens 1.
  const int tiles = 13;
  const int prompt = 256 * tiles + 81 + 30;
  const RequestFlops f = request_flops(desc, tiles, prompt, 1);
  EXPECT_NEAR(f.total() / 1e12, 62.0, 5.0);
  EXPECT_GT(f.llm, f.vit);
  // ViT per tile as PERF.md writes it: 2 × 0.304e9 × 1025 + 24 × 4 × 1025² × 1024.
  const double vit_tile = 2 * 0.304e9 * 1025 + 24.0 * 4 * 1025.0 * 1025 * 1024;
  EXPECT_NEAR(f.vit / tiles / vit_tile, 1.0, 0.02);
  // More output tokens cost more.
  EXPECT_GT(request_flops(desc, tiles, prompt, 10).total(), f.total());
}

TEST(BenchPerf, GemmPeakOnTheCpuBackend) {
  const GemmPeak p = measure_gemm_peak("cpu", 32, 48, 64, 0.05);
  EXPECT_EQ(p.backend, "cpu");
  EXPECT_GE(p.iterations, 3);
  EXPECT_GT(p.tflops, 0.0);
}

TEST(BenchReport, JsonTableAndSvg) {
  BenchResult r;
  r.model = "m<1>";
  r.backend = "cpu";
  r.requests = 4;
  r.failed = 0;
  r.wall_s = 2.0;
  r.flops.llm = 4e12;
  r.gemm.tflops = 4.0;
  r.stage_ms = {{"vit", 40.0}, {"llm", 80.0}};
  r.timeline = {{0.5, 1}, {2.0, 4}};
  r.latencies_ms = {10, 20, 30, 40};
  EXPECT_DOUBLE_EQ(r.qpm(), 120.0);
  EXPECT_DOUBLE_EQ(r.achieved_tflops(), 2.0);
  EXPECT_DOUBLE_EQ(r.mfu(), 0.5);
  EXPECT_DOUBLE_EQ(r.flop_floor_qpm(), 240.0);  // 1 TFLOP per request at 4 TFLOP/s
  const auto j = bench_json(r);
  EXPECT_DOUBLE_EQ(j["qpm"].get<double>(), 120.0);
  EXPECT_DOUBLE_EQ(j["fraction_of_floor"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["stages"]["llm"]["ms_per_request"].get<double>(), 20.0);
  EXPECT_DOUBLE_EQ(j["latency_ms"]["p50"].get<double>(), 25.0);
  EXPECT_FALSE(j.contains("engines"));  // a lone engine
  r.engines = {{"cuda:0", 3, false}, {"cuda:1", 1, true}};
  const auto shares = bench_json(r)["engines"];
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_EQ(shares[0]["engine"], "cuda:0");
  EXPECT_DOUBLE_EQ(shares[0]["share"].get<double>(), 0.75);
  EXPECT_EQ(shares[1]["failed"], true);
  r.engines.clear();
  EXPECT_NE(bench_table(r).find("QPM             120.0"), std::string::npos);
  const std::string svg = bench_svg(r);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("m&lt;1&gt;"), std::string::npos);  // escaped
  EXPECT_EQ(svg.find("m<1>"), std::string::npos);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_EQ(percentile({}, 50), 0.0);
}

}  // namespace
}  // namespace fovea
