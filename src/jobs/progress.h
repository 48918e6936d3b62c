// Progress of a batch job on stderr: a bar redrawn in place on a terminal (done/total, QPM, ETA), plain lines
// every few seconds otherwise (logs, CI).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

#include "fovea/options.h"

namespace fovea {

class Progress {
 public:
  Progress(int64_t total, bool terminal, double line_interval_s = 10.0, FILE* out = stderr);
  // done/failed count this run's finished tasks; qpm is the recent rate. Throttled: cheap to call often.
  void update(int64_t done, int64_t failed, double qpm, double now_s);
  void finish(int64_t done, int64_t failed, double elapsed_s);
  // Appended to every line from now on (e.g. each engine's share, engine_shares()).
  void set_detail(std::string detail) { detail_ = std::move(detail); }

  // The text of one status line, e.g. "[######....] 120/300 40.0% 2 failed 355.1 QPM ETA 30s".
  static std::string format(int64_t done, int64_t failed, int64_t total, double qpm, bool bar);
  static std::string format_duration(double seconds);  // "45s", "3m05s", "2h07m"

 private:
  int64_t total_;
  bool terminal_;
  double interval_s_;
  FILE* out_;
  double last_s_ = -1e30;
  std::string detail_;
};

// Each engine's share of the successfully finished requests behind a data-parallel dispatcher, e.g.
// "engines cuda:0 51% cuda:1 49% (cuda:1 failed)"; "" for a lone engine.
std::string engine_shares(const EngineStats& stats);

}  // namespace fovea
