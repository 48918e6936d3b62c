// What `fovea bench` measured, as a JSON document, a printed table and an SVG plot (written by our own code).
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "server/bench_perf.h"

namespace fovea {

struct BenchResult {
  std::string model;
  std::string backend;
  std::string workload;  // "listing-photos" or "directory"
  std::string tiling;
  int requests = 0;
  int failed = 0;
  double wall_s = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  double total_tiles = 0;
  std::map<std::string, double> stage_ms;  // cumulative engine time per stage over the run
  RequestFlops flops;                      // summed over the successful requests
  GemmPeak gemm;
  std::vector<std::pair<double, int>> timeline;  // (seconds since start, requests finished)
  std::vector<double> latencies_ms;

  double qpm() const { return wall_s > 0 ? (requests - failed) * 60.0 / wall_s : 0; }
  double achieved_tflops() const { return wall_s > 0 ? flops.total() / wall_s / 1e12 : 0; }
  double mfu() const { return gemm.tflops > 0 ? achieved_tflops() / gemm.tflops : 0; }
  // The QPM the GEMM peak would allow if every FLOP ran at it.
  double flop_floor_qpm() const;
};

nlohmann::ordered_json bench_json(const BenchResult& r);
std::string bench_table(const BenchResult& r);  // a few aligned lines for the terminal
std::string bench_svg(const BenchResult& r);    // completions over time + time per stage

double percentile(std::vector<double> values, double p);  // p in [0, 100]; 0 for none

}  // namespace fovea
