// What `fovea bench` measured, as a JSON document, a printed table and an SVG plot (written by our own code).
#pragma once
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "fovea/options.h"
#include "jobs/bench_perf.h"

namespace fovea {

// The decode rate of long outputs: the same requests timed with max_tokens 1 and with max_tokens N (both
// after a first pass, so caches and recordings are warm for both); their difference is N - 1 decode steps of
// the whole batch, whatever prefill, preprocessing and submission cost.
struct DecodeMeasure {
  int requests = 0;
  int max_tokens = 0;         // N
  int min_output_tokens = 0;  // over the N-token pass (N unless a request stopped early)
  double t1_s = 0, tn_s = 0;  // best wall time of the max_tokens 1 and N passes
  // Best EngineStats::llm_ms of the same passes: the runner's own step time, without scheduling and
  // submission gaps (what dominates the wall-time difference for a tiny model on a CPU).
  double llm_ms_1 = 0, llm_ms_n = 0;
  int steps() const { return std::max(0, max_tokens - 1); }
  double ms_per_step() const { return steps() > 0 ? (tn_s - t1_s) * 1e3 / steps() : 0; }
  double llm_ms_per_step() const { return steps() > 0 ? (llm_ms_n - llm_ms_1) / steps() : 0; }
  double decode_tokens_per_s() const { return tn_s > t1_s ? requests * double(steps()) / (tn_s - t1_s) : 0; }
};

// `fovea bench --questions K`: every image asked K distinct questions, one request each; how much of the
// prompts' KV was computed against what K separate requests per image would compute.
struct QuestionsMeasure {
  int per_image = 0;                // K; 0: not a multi-question run
  int images = 0;
  int64_t prompt_tokens = 0;        // needed: the prompts' tokens, each request counted in full
  int64_t prefill_tokens = 0;       // computed (EngineStats::prefill_tokens over the run)
  int64_t prefix_hit_tokens = 0;    // reused from the prefix cache
  int64_t inflight_waits = 0;       // requests that waited for a prefix being computed
};

struct BenchResult {
  std::string model;
  std::string backend;
  std::string workload;  // "listing-photos" or "directory"
  std::string tiling;
  std::string quantization = "none";  // the engine's: none or fp8
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
  DecodeMeasure decode;  // requests 0: not measured (max_tokens 1)
  QuestionsMeasure questions;
  // Behind the data-parallel dispatcher (--gpus / --replicas): the requests each engine finished in the run.
  struct EngineShare {
    std::string engine;  // "cuda:0", "cpu#1"
    int64_t requests = 0;
    bool failed = false;
  };
  std::vector<EngineShare> engines;
  // Every EngineStats field over the run (engine/stats_fields.h: counters as after - before, gauges after).
  EngineStats engine_stats;

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
