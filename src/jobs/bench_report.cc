#include "jobs/bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/stats_json.h"

namespace fovea {

double BenchResult::flop_floor_qpm() const {
  const int ok = requests - failed;
  if (ok <= 0 || flops.total() <= 0 || gemm.tflops <= 0) return 0;
  return gemm.tflops * 1e12 / (flops.total() / ok) * 60.0;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * double(values.size() - 1);
  const size_t lo = size_t(std::floor(rank));
  const size_t hi = std::min(values.size() - 1, lo + 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - double(lo));
}

nlohmann::ordered_json bench_json(const BenchResult& r) {
  nlohmann::ordered_json j;
  const int ok = std::max(1, r.requests - r.failed);
  j["model"] = r.model;
  j["backend"] = r.backend;
  j["workload"] = r.workload;
  j["tiling"] = r.tiling;
  j["quantization"] = r.quantization;
  j["requests"] = r.requests;
  j["failed"] = r.failed;
  j["wall_s"] = r.wall_s;
  j["qpm"] = r.qpm();
  j["prompt_tokens_per_s"] = r.wall_s > 0 ? r.prompt_tokens / r.wall_s : 0;
  j["output_tokens_per_s"] = r.wall_s > 0 ? r.output_tokens / r.wall_s : 0;
  j["tiles_per_request"] = r.total_tiles / ok;
  j["latency_ms"] = {{"p50", percentile(r.latencies_ms, 50)}, {"p90", percentile(r.latencies_ms, 90)},
                     {"p99", percentile(r.latencies_ms, 99)}};
  nlohmann::ordered_json stages;
  for (const auto& [stage, ms] : r.stage_ms) stages[stage] = {{"total_ms", ms}, {"ms_per_request", ms / ok}};
  j["stages"] = stages;
  j["flops_per_request"] = {{"vit", r.flops.vit / ok}, {"projector", r.flops.projector / ok},
                            {"llm", r.flops.llm / ok}, {"lm_head", r.flops.lm_head / ok},
                            {"total", r.flops.total() / ok}};
  j["gemm_peak"] = {{"backend", r.gemm.backend}, {"dtype", r.gemm.dtype}, {"m", r.gemm.m}, {"n", r.gemm.n},
                    {"k", r.gemm.k}, {"iterations", r.gemm.iterations}, {"tflops", r.gemm.tflops}};
  j["achieved_tflops"] = r.achieved_tflops();
  j["mfu"] = r.mfu();
  j["flop_floor_qpm"] = r.flop_floor_qpm();
  j["fraction_of_floor"] = r.flop_floor_qpm() > 0 ? r.qpm() / r.flop_floor_qpm() : 0;
  if (!r.engines.empty()) {
    int64_t all = 0;
    for (const auto& e : r.engines) all += e.requests;
    nlohmann::ordered_json engines = nlohmann::ordered_json::array();
    for (const auto& e : r.engines)
      engines.push_back({{"engine", e.engine},
                         {"requests", e.requests},
                         {"share", all > 0 ? double(e.requests) / double(all) : 0.0},
                         {"failed", e.failed}});
    j["engines"] = engines;
  }
  j["engine_stats"] = stats_json(r.engine_stats);
  nlohmann::ordered_json timeline = nlohmann::ordered_json::array();
  for (const auto& [t, done] : r.timeline) timeline.push_back({t, done});
  j["timeline"] = timeline;
  if (r.decode.requests > 0) {
    const DecodeMeasure& d = r.decode;
    j["decode"] = {{"requests", d.requests},          {"max_tokens", d.max_tokens},
                   {"min_output_tokens", d.min_output_tokens}, {"t1_s", d.t1_s},
                   {"tn_s", d.tn_s},                  {"ms_per_step", d.ms_per_step()},
                   {"decode_tokens_per_s", d.decode_tokens_per_s()},
                   {"llm_ms_1", d.llm_ms_1},          {"llm_ms_n", d.llm_ms_n},
                   {"llm_ms_per_step", d.llm_ms_per_step()},
                   {"output_tokens_per_s", d.tn_s > 0 ? d.requests * double(d.max_tokens) / d.tn_s : 0.0}};
  }
  if (r.questions.per_image > 0) {
    const QuestionsMeasure& q = r.questions;
    // The FLOP model above counts every request's whole prompt: with shared prefixes MFU is not meaningful.
    j["questions"] = {{"per_image", q.per_image},
                      {"images", q.images},
                      {"qpm_per_question", r.qpm()},
                      {"prompt_tokens_needed", q.prompt_tokens},
                      {"prompt_tokens_computed", q.prefill_tokens},
                      {"prefix_hit_tokens", q.prefix_hit_tokens},
                      {"inflight_prefix_waits", q.inflight_waits},
                      {"computed_fraction", q.prompt_tokens > 0 ? double(q.prefill_tokens) / q.prompt_tokens : 0.0}};
  }
  return j;
}

std::string bench_table(const BenchResult& r) {
  char buf[2048];
  const int ok = std::max(1, r.requests - r.failed);
  std::string stages;
  for (const auto& [stage, ms] : r.stage_ms) {
    char s[96];
    std::snprintf(s, sizeof s, " %s %.2f", stage.c_str(), ms / ok);
    stages += s;
  }
  std::snprintf(buf, sizeof buf,
                "requests        %d (%d failed) in %.2f s, %s workload, %s tiling, %.2f tiles/request\n"
                "QPM             %.1f\n"
                "tokens/s        prompt %.0f, output %.1f\n"
                "latency ms      p50 %.1f, p90 %.1f, p99 %.1f\n"
                "stage ms/req   %s\n"
                "GEMM peak       %.3f TFLOP/s (%s %s, %dx%dx%d)\n"
                "achieved        %.4f TFLOP/s, MFU %.1f%%\n"
                "FLOP floor      %.1f QPM (this run: %.1f%% of it)\n",
                r.requests, r.failed, r.wall_s, r.workload.c_str(), r.tiling.c_str(), r.total_tiles / ok, r.qpm(),
                r.wall_s > 0 ? r.prompt_tokens / r.wall_s : 0, r.wall_s > 0 ? r.output_tokens / r.wall_s : 0,
                percentile(r.latencies_ms, 50), percentile(r.latencies_ms, 90), percentile(r.latencies_ms, 99),
                stages.c_str(), r.gemm.tflops, r.gemm.backend.c_str(), r.gemm.dtype.c_str(), r.gemm.m, r.gemm.n,
                r.gemm.k, r.achieved_tflops(), 100.0 * r.mfu(), r.flop_floor_qpm(),
                r.flop_floor_qpm() > 0 ? 100.0 * r.qpm() / r.flop_floor_qpm() : 0.0);
  std::string out = buf;
  if (r.decode.requests > 0) {
    const DecodeMeasure& d = r.decode;
    std::snprintf(buf, sizeof buf,
                  "ms per decode step  %.3f (%d requests x %d tokens: %.3f s, x 1 token: %.3f s; "
                  "decode %.0f tokens/s; runner alone %.3f ms per step)\n",
                  d.ms_per_step(), d.requests, d.max_tokens, d.tn_s, d.t1_s, d.decode_tokens_per_s(),
                  d.llm_ms_per_step());
    out += buf;
  }
  if (r.questions.per_image > 0) {
    const QuestionsMeasure& q = r.questions;
    std::snprintf(buf, sizeof buf,
                  "questions       %d per image x %d images: %.1f QPM per question; prompt tokens computed %lld of "
                  "%lld needed (%.1f%%), %lld reused, %lld requests waited for an in-flight prefix\n"
                  "                (MFU and the FLOP floor count every prompt in full: not meaningful here)\n",
                  q.per_image, q.images, r.qpm(), (long long)q.prefill_tokens, (long long)q.prompt_tokens,
                  q.prompt_tokens > 0 ? 100.0 * double(q.prefill_tokens) / double(q.prompt_tokens) : 0.0,
                  (long long)q.prefix_hit_tokens, (long long)q.inflight_waits);
    out += buf;
  }
  return out;
}

namespace {

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace

std::string bench_svg(const BenchResult& r) {
  // Left: requests finished over time (the slope is the throughput). Right: engine time per request by stage.
  const double W = 900, H = 420, px = 60, py = 50, pw = 480, ph = 300;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"420\" "
                    "font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"" + num(W) + "\" height=\"" + num(H) + "\" fill=\"white\"/>\n";
  svg += "<text x=\"" + num(px) + "\" y=\"24\" font-size=\"15\">" +
         escape_xml("fovea bench: " + r.model + " on " + r.backend + ", " + num(r.qpm()) + " QPM, MFU " +
                    num(100 * r.mfu()) + "%") +
         "</text>\n";
  const double t_max = std::max(1e-9, r.timeline.empty() ? r.wall_s : std::max(r.wall_s, r.timeline.back().first));
  const double n_max = std::max(1, r.requests);
  svg += "<line x1=\"" + num(px) + "\" y1=\"" + num(py + ph) + "\" x2=\"" + num(px + pw) + "\" y2=\"" + num(py + ph) +
         "\" stroke=\"black\"/>\n";
  svg += "<line x1=\"" + num(px) + "\" y1=\"" + num(py) + "\" x2=\"" + num(px) + "\" y2=\"" + num(py + ph) +
         "\" stroke=\"black\"/>\n";
  std::string points = num(px) + "," + num(py + ph);
  for (const auto& [t, done] : r.timeline)
    points += " " + num(px + pw * t / t_max) + "," + num(py + ph - ph * done / n_max);
  svg += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"" + points + "\"/>\n";
  svg += "<text x=\"" + num(px + pw / 2 - 40) + "\" y=\"" + num(py + ph + 32) + "\">seconds (0 to " + num(t_max) +
         ")</text>\n";
  svg += "<text x=\"" + num(px - 8) + "\" y=\"" + num(py - 8) + "\">requests finished (" + num(n_max) + ")</text>\n";

  const double bx = 620, bw = 240;
  double stage_max = 1e-9;
  const int ok = std::max(1, r.requests - r.failed);
  for (const auto& s : r.stage_ms) stage_max = std::max(stage_max, s.second / ok);
  svg += "<text x=\"" + num(bx) + "\" y=\"" + num(py - 8) + "\">engine ms per request, by stage</text>\n";
  double y = py + 10;
  for (const auto& [stage, ms] : r.stage_ms) {
    const double per = ms / ok;
    svg += "<rect x=\"" + num(bx + 70) + "\" y=\"" + num(y) + "\" width=\"" + num(std::max(1.0, (bw - 70) * per / stage_max)) +
           "\" height=\"22\" fill=\"#ff7f0e\"/>\n";
    svg += "<text x=\"" + num(bx) + "\" y=\"" + num(y + 15) + "\">" + escape_xml(stage) + "</text>\n";
    svg += "<text x=\"" + num(bx + 74) + "\" y=\"" + num(y + 38) + "\">" + num(per) + " ms</text>\n";
    y += 56;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace fovea
