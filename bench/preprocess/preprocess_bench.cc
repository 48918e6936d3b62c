// fovea_preprocess_bench DIR [--threads N] [--intra-threads M] [--repeat R] [--policy official|compact]
// Times Fovea's whole preprocessing per image (decode included; files are read into memory first so disk
// speed does not count): decode → grid → Pillow-exact resize → tiles → float32 normalisation.
// N worker threads each take whole images (throughput scaling); M > 1 instead spreads each image's resize
// over a pool (latency). Prints one JSON line: images, wall seconds, ms per image, ms per image per core.
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_pool.h"
#include "image/preprocess.h"
#include "image/resample.h"

namespace {

// CPU seconds of the calling thread: robust to other processes sharing the cores, unlike wall time.
double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

std::vector<std::string> read_images(const std::string& dir) {
  std::vector<std::filesystem::path> paths;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file()) paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> files;
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    files.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [--threads N] [--intra-threads M] [--repeat R] [--policy P]\n", argv[0]);
    return 2;
  }
  int threads = 1, intra = 1, repeat = 1;
  bool compact = false;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--threads") threads = std::max(1, std::stoi(value));
    else if (flag == "--intra-threads") intra = std::max(1, std::stoi(value));
    else if (flag == "--repeat") repeat = std::max(1, std::stoi(value));
    else if (flag == "--policy") compact = value == "compact";
  }
  const std::vector<std::string> files = read_images(argv[1]);
  if (files.empty()) {
    std::fprintf(stderr, "no images in %s\n", argv[1]);
    return 1;
  }
  std::unique_ptr<fovea::ThreadPool> pool;
  if (intra > 1) pool = std::make_unique<fovea::ThreadPool>(intra - 1);  // + the calling thread
  fovea::PreprocessOptions options;
  options.compact = compact;
  options.pool = pool.get();

  const int64_t jobs = int64_t(files.size()) * repeat;
  std::atomic<int64_t> next{0}, tiles{0}, failures{0};
  std::atomic<int64_t> cpu_ns{0};
  auto worker = [&] {
    const double cpu_start = thread_cpu_seconds();
    for (int64_t j; (j = next.fetch_add(1)) < jobs;) {
      try {
        tiles += fovea::preprocess_image(files[size_t(j % int64_t(files.size()))], options).num_tiles();
      } catch (const std::exception&) {
        ++failures;
      }
    }
    cpu_ns += int64_t(1e9 * (thread_cpu_seconds() - cpu_start));
  };
  // One untimed pass warms the allocator and the page cache of the weights tables.
  fovea::preprocess_image(files[0], options);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool_threads;
  for (int t = 1; t < threads; ++t) pool_threads.emplace_back(worker);
  worker();
  for (auto& t : pool_threads) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int cores = threads * intra;
  std::printf(
      "{\"images\": %lld, \"threads\": %d, \"intra_threads\": %d, \"avx2\": %s, \"wall_s\": %.3f, "
      "\"ms_per_image\": %.3f, \"ms_per_image_per_core\": %.3f, \"cpu_ms_per_image\": %.3f, "
      "\"tiles_per_image\": %.2f, \"failures\": %lld}\n",
      (long long)jobs, threads, intra, fovea::resample_uses_avx2() ? "true" : "false", wall, 1000.0 * wall / jobs,
      1000.0 * wall * cores / jobs, 1e-6 * double(cpu_ns.load()) / jobs, double(tiles) / jobs,
      (long long)failures.load());
  return failures ? 1 : 0;
}
