#include "backend/cuda/op_profiler.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace fovea::cuda {
namespace {

constexpr OpCategory kCategories[] = {OpCategory::Gemm, OpCategory::Attention, OpCategory::Norm,
                                      OpCategory::Elementwise, OpCategory::Copy, OpCategory::Other};

void append_row(std::string& out, const char* label, int64_t calls, double total_ms, double share) {
  char line[256];
  const double mean_us = calls > 0 ? 1000.0 * total_ms / double(calls) : 0.0;
  std::snprintf(line, sizeof line, "%-52s %8lld %11.3f %10.2f %6.1f%%\n", label, static_cast<long long>(calls),
                total_ms, mean_us, 100.0 * share);
  out += line;
}

void append_header(std::string& out, const char* first_column) {
  char line[160];
  std::snprintf(line, sizeof line, "%-52s %8s %11s %10s %7s\n", first_column, "calls", "total ms", "mean us",
                "share");
  out += line;
}

// Heaviest first; the sort is stable, so rows that come ordered by label keep that order on equal totals.
std::vector<OpProfileTable::Row> heaviest_first(std::vector<OpProfileTable::Row> rows) {
  std::stable_sort(rows.begin(), rows.end(),
                   [](const OpProfileTable::Row& a, const OpProfileTable::Row& b) { return a.total_ms > b.total_ms; });
  return rows;
}

}  // namespace

const char* op_category_name(OpCategory c) {
  switch (c) {
    case OpCategory::Gemm: return "gemm";
    case OpCategory::Attention: return "attention";
    case OpCategory::Norm: return "norm";
    case OpCategory::Elementwise: return "elementwise";
    case OpCategory::Copy: return "copy";
    case OpCategory::Other: return "other";
  }
  return "other";
}

std::string op_name_of(const std::string& label) {
  std::string words;
  int depth = 0;
  for (char c : label) {
    if (c == '[') ++depth;
    if (depth == 0) words += c;
    if (c == ']' && depth > 0) --depth;
  }
  std::string name, word;
  auto flush = [&] {
    if (!word.empty() && word.find('=') == std::string::npos) name += (name.empty() ? "" : " ") + word;
    word.clear();
  };
  for (char c : words) {
    if (c == ' ') flush();
    else word += c;
  }
  flush();
  return name.empty() ? label : name;
}

void OpProfileTable::add(const std::string& label, OpCategory category, double ms) {
  Row& row = rows_[label];
  if (row.calls == 0) {
    row.label = label;
    row.category = category;
  }
  ++row.calls;
  row.total_ms += ms;
}

double OpProfileTable::op_ms() const {
  double total = 0;
  for (const auto& [label, row] : rows_) total += row.total_ms;
  return total;
}

std::vector<OpProfileTable::Row> OpProfileTable::rows_by_total() const {
  std::vector<Row> rows;
  rows.reserve(rows_.size());
  for (const auto& [label, row] : rows_) rows.push_back(row);  // ordered by label
  return heaviest_first(std::move(rows));
}

std::vector<OpProfileTable::Row> OpProfileTable::categories_by_total() const {
  std::vector<Row> rows;
  for (OpCategory c : kCategories) {
    Row sum;
    sum.label = op_category_name(c);
    sum.category = c;
    for (const auto& [label, row] : rows_) {
      if (row.category != c) continue;
      sum.calls += row.calls;
      sum.total_ms += row.total_ms;
    }
    if (sum.calls > 0) rows.push_back(sum);
  }
  return heaviest_first(std::move(rows));
}

std::vector<OpProfileTable::Row> OpProfileTable::ops_by_total() const {
  std::map<std::string, Row> ops;
  for (const auto& [label, row] : rows_) {
    const std::string name = op_name_of(label);
    Row& op = ops[name];
    if (op.calls == 0) {
      op.label = name;
      op.category = row.category;
    }
    op.calls += row.calls;
    op.total_ms += row.total_ms;
  }
  std::vector<Row> out;
  for (const auto& [name, row] : ops) out.push_back(row);  // ordered by name
  return heaviest_first(std::move(out));
}

std::string OpProfileTable::report(int top) const {
  const double total = op_ms();
  const auto share = [&](double ms) { return total > 0 ? ms / total : 0.0; };
  std::string out = "== fovea op profile (GPU time per op, CUDA events; graph replays count as one op) ==\n";
  const std::vector<Row> rows = rows_by_total();
  append_header(out, "op");
  for (size_t i = 0; i < rows.size() && int(i) < top; ++i)
    append_row(out, rows[i].label.c_str(), rows[i].calls, rows[i].total_ms, share(rows[i].total_ms));
  if (rows.size() > size_t(std::max(top, 0))) {
    Row rest;
    for (size_t i = size_t(std::max(top, 0)); i < rows.size(); ++i) {
      rest.calls += rows[i].calls;
      rest.total_ms += rows[i].total_ms;
    }
    char label[64];
    std::snprintf(label, sizeof label, "(%zu more labels)", rows.size() - size_t(top));
    append_row(out, label, rest.calls, rest.total_ms, share(rest.total_ms));
  }
  out += "\n";
  append_header(out, "op, every shape");
  for (const Row& row : ops_by_total()) append_row(out, row.label.c_str(), row.calls, row.total_ms, share(row.total_ms));
  out += "\n";
  append_header(out, "category");
  int64_t calls = 0;
  for (const Row& row : categories_by_total()) {
    append_row(out, row.label.c_str(), row.calls, row.total_ms, share(row.total_ms));
    calls += row.calls;
  }
  append_row(out, "all ops", calls, total, total > 0 ? 1.0 : 0.0);
  // The window share is relative to the window, not to op time: "outside" is what the GPU did not spend in ops.
  char line[256];
  const double outside = std::max(0.0, window_ms_ - total);
  std::snprintf(line, sizeof line,
                "GPU window (first to last event of each batch) %.3f ms: ops %.3f ms, outside any op %.3f ms "
                "(%.1f%%: launch gaps, host work, event overhead)\n",
                window_ms_, total, outside, window_ms_ > 0 ? 100.0 * outside / window_ms_ : 0.0);
  out += line;
  return out;
}

OpProfiler::OpProfiler(cudaStream_t stream, int capacity) : stream_(stream) {
  starts_.reserve(size_t(capacity));
  ends_.reserve(size_t(capacity));
  for (int i = 0; i < capacity; ++i) {
    cudaEvent_t start = nullptr, end = nullptr;
    if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&end) != cudaSuccess) {
      if (start) cudaEventDestroy(start);
      cudaGetLastError();
      break;  // a smaller pool still works; it is only collected more often
    }
    starts_.push_back(start);
    ends_.push_back(end);
  }
  pending_.reserve(starts_.size());
}

OpProfiler::~OpProfiler() {
  for (cudaEvent_t e : starts_) cudaEventDestroy(e);
  for (cudaEvent_t e : ends_) cudaEventDestroy(e);
}

int OpProfiler::begin(OpCategory category, std::string label) {
  if (open_ || starts_.empty()) return -1;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream_, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone) return -1;
  if (pending_.size() == starts_.size()) collect();
  const int slot = int(pending_.size());
  if (cudaEventRecord(starts_[size_t(slot)], stream_) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  pending_.push_back({std::move(label), category});
  open_ = true;
  return slot;
}

void OpProfiler::end(int slot) {
  if (slot < 0 || size_t(slot) >= pending_.size()) return;
  if (cudaEventRecord(ends_[size_t(slot)], stream_) != cudaSuccess) {
    // A slot without its end event must not be read: drop it (it is the last one, the op being closed).
    cudaGetLastError();
    pending_.pop_back();
  }
  open_ = false;
}

void OpProfiler::collect() {
  if (pending_.empty()) return;
  if (cudaStreamSynchronize(stream_) != cudaSuccess) {
    cudaGetLastError();
    pending_.clear();  // the events' times cannot be trusted after a failed stream
    return;
  }
  for (size_t i = 0; i < pending_.size(); ++i) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, starts_[i], ends_[i]) == cudaSuccess) table_.add(pending_[i].label, pending_[i].category, ms);
  }
  float window = 0;
  if (cudaEventElapsedTime(&window, starts_.front(), ends_[pending_.size() - 1]) == cudaSuccess)
    table_.add_window(window);
  cudaGetLastError();
  pending_.clear();
}

std::string OpProfiler::report() {
  try {
    if (!open_) collect();
    if (table_.empty()) return "== fovea op profile: no op was recorded ==\n";
    return table_.report();
  } catch (...) {
    return "== fovea op profile: could not be collected ==\n";
  }
}

}  // namespace fovea::cuda
