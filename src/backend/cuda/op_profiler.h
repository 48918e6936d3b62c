// Per-op GPU time of the CUDA backend (FOVEA_PROFILE_OPS=1): every public op is bracketed by two CUDA events on
// the backend stream, labelled by op and shape class; the elapsed times are added up per label and printed as a
// table when the backend goes (or on profile_report()). Ops issued while the stream records a graph are not
// bracketed: a graph replay is timed as one "graph_launch" op.
//
// OpProfileTable is the host-side aggregation (no CUDA calls, tested on the CPU with made-up timings);
// OpProfiler owns the event pool and feeds the table.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fovea::cuda {

enum class OpCategory : int { Gemm, Attention, Norm, Elementwise, Copy, Other };
const char* op_category_name(OpCategory c);
// A label without its shape: bracketed spans ("[13, 448, 448, 3]") and words holding '=' ("M=8192", "rows=64")
// go, so "linear M=64 N=28672 K=4096 none" and "linear M=8192 N=28672 K=4096 none" are both "linear none".
std::string op_name_of(const std::string& label);

class OpProfileTable {
 public:
  struct Row {
    std::string label;
    OpCategory category = OpCategory::Other;
    int64_t calls = 0;
    double total_ms = 0;
  };

  void add(const std::string& label, OpCategory category, double ms);
  // GPU time spanned by one batch of events, first op start to last op end: the part of it no op covers is time
  // the GPU spent waiting for launches or host work.
  void add_window(double ms) { window_ms_ += ms; }

  double op_ms() const;
  double window_ms() const { return window_ms_; }
  std::vector<Row> rows_by_total() const;           // heaviest first; ties by label
  std::vector<Row> categories_by_total() const;     // one row per category that has calls, label = its name
  std::vector<Row> ops_by_total() const;            // one row per op_name_of(label): an op at every shape
  // The op table (top `top` rows: calls, total ms, mean µs, share of op time), every op summed over its shapes,
  // the by-category table, and the op time against the window.
  std::string report(int top = 40) const;
  bool empty() const { return rows_.empty(); }

 private:
  std::map<std::string, Row> rows_;
  double window_ms_ = 0;
};

class OpProfiler {
 public:
  // capacity: event pairs allocated up front; when all are in flight the stream is synchronized and they are
  // folded into the table and reused.
  OpProfiler(cudaStream_t stream, int capacity = 4096);
  ~OpProfiler();
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  // Records the start event of an op; returns its slot, or -1 when nothing is recorded (the stream is capturing
  // a graph, or another op is already open: nested ops count in their parent).
  int begin(OpCategory category, std::string label);
  void end(int slot);
  // Synchronizes the stream and folds every recorded pair into the table.
  void collect();
  // collect() then the table's report. Never throws: a CUDA error while collecting is reported in the text.
  std::string report();
  const OpProfileTable& table() const { return table_; }  // what collect() has folded in so far

 private:
  struct Pending {
    std::string label;
    OpCategory category;
  };
  cudaStream_t stream_;
  std::vector<cudaEvent_t> starts_, ends_;
  std::vector<Pending> pending_;  // slot i uses starts_[i], ends_[i]
  bool open_ = false;
  OpProfileTable table_;
};

// Brackets one op: `label()` is called (and the events recorded) only when profiling is on, so an op pays one
// branch when it is off.
class OpScope {
 public:
  template <class LabelFn>
  OpScope(OpProfiler* profiler, OpCategory category, LabelFn&& label) : profiler_(profiler) {
    if (profiler_) slot_ = profiler_->begin(category, label());
  }
  ~OpScope() {
    if (profiler_ && slot_ >= 0) profiler_->end(slot_);
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  OpProfiler* profiler_;
  int slot_ = -1;
};

}  // namespace fovea::cuda
