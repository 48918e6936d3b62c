// The op profiler: its aggregation and report on made-up timings (no GPU needed), and the event pool on a real
// stream where a GPU is visible (skipped elsewhere).
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "backend/backend.h"
#include "backend/cuda/op_profiler.h"

namespace fovea::cuda {
namespace {

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

struct Sample {
  const char* label;
  OpCategory category;
  double ms;
};

OpProfileTable table_of(std::initializer_list<Sample> samples) {
  OpProfileTable table;
  for (const Sample& s : samples) table.add(s.label, s.category, s.ms);
  return table;
}

TEST(OpProfileTable, AddsUpCallsPerLabelAndSortsByTotal) {
  const OpProfileTable table = table_of({{"rms_norm rows=64", OpCategory::Norm, 0.010},
                                         {"linear M=64 N=6144 K=4096 none", OpCategory::Gemm, 0.040},
                                         {"rms_norm rows=64", OpCategory::Norm, 0.030},
                                         {"linear M=64 N=4096 K=4096 none", OpCategory::Gemm, 0.025},
                                         {"argmax rows=64", OpCategory::Other, 0.040}});

  const auto rows = table.rows_by_total();
  ASSERT_EQ(rows.size(), 4u);
  // Equal totals (0.040) keep label order: "argmax" before "linear".
  EXPECT_EQ(rows[0].label, "argmax rows=64");
  EXPECT_EQ(rows[1].label, "linear M=64 N=6144 K=4096 none");
  EXPECT_EQ(rows[2].label, "rms_norm rows=64");
  EXPECT_EQ(rows[2].calls, 2);
  EXPECT_NEAR(rows[2].total_ms, 0.040, 1e-12);
  EXPECT_EQ(rows[3].label, "linear M=64 N=4096 K=4096 none");
  EXPECT_NEAR(table.op_ms(), 0.145, 1e-12);
}

TEST(OpProfileTable, CategoriesSumTheirLabelsAndSkipEmptyOnes) {
  const OpProfileTable table = table_of({{"linear a", OpCategory::Gemm, 2.0},
                                         {"linear b", OpCategory::Gemm, 1.0},
                                         {"linear b", OpCategory::Gemm, 1.0},
                                         {"paged_attention decode seqs=64", OpCategory::Attention, 3.0},
                                         {"upload [64]", OpCategory::Copy, 0.5}});
  const auto cats = table.categories_by_total();
  ASSERT_EQ(cats.size(), 3u);
  EXPECT_EQ(cats[0].label, "gemm");
  EXPECT_EQ(cats[0].calls, 3);
  EXPECT_NEAR(cats[0].total_ms, 4.0, 1e-12);
  EXPECT_EQ(cats[1].label, "attention");
  EXPECT_EQ(cats[2].label, "copy");
  EXPECT_EQ(cats[2].calls, 1);
}

TEST(OpProfileTable, ReportShowsTopRowsSharesMeansAndTimeOutsideOps) {
  OpProfileTable table;
  for (int i = 0; i < 4; ++i) table.add("linear M=64 N=28672 K=4096 none", OpCategory::Gemm, 0.150);  // 0.6 ms
  table.add("paged_attention decode seqs=64", OpCategory::Attention, 0.3);
  table.add("silu_mul rows=64", OpCategory::Elementwise, 0.1);
  table.add_window(1.25);  // 1.0 ms of ops in a 1.25 ms window: 0.25 ms (20%) outside

  const std::string top2 = table.report(2);
  // The heaviest label: 4 calls, 0.600 ms total, 150.00 us mean, 60% of op time.
  EXPECT_NE(top2.find("linear M=64 N=28672 K=4096 none"), std::string::npos) << top2;
  EXPECT_NE(top2.find("       4       0.600     150.00   60.0%"), std::string::npos) << top2;
  EXPECT_NE(top2.find("paged_attention decode seqs=64"), std::string::npos);
  // Only the top two labels are listed; the rest is one summary row.
  EXPECT_EQ(top2.find("silu_mul rows=64"), std::string::npos) << top2;
  EXPECT_NE(top2.find("(1 more labels)"), std::string::npos) << top2;
  // The category table still counts everything.
  EXPECT_NE(top2.find("elementwise"), std::string::npos);
  EXPECT_NE(top2.find("all ops"), std::string::npos);
  EXPECT_NE(top2.find("outside any op 0.250 ms (20.0%"), std::string::npos) << top2;

  const std::string all = table.report();
  EXPECT_NE(all.find("silu_mul rows=64"), std::string::npos);
  EXPECT_EQ(count_of(all, "more labels"), 0);
}

TEST(OpProfileTable, OpNamesDropShapesAndSumAnOpOverThem) {
  EXPECT_EQ(op_name_of("linear_fp8 M=8192 N=28672 K=4096 none channel, quantized by its producer"),
            "linear_fp8 none channel, quantized by its producer");
  EXPECT_EQ(op_name_of("upload [13, 448, 448, 3]"), "upload");
  EXPECT_EQ(op_name_of("paged_attention prefill seqs=3"), "paged_attention prefill");
  EXPECT_EQ(op_name_of("fill_random [28672, 4096]"), "fill_random");
  EXPECT_EQ(op_name_of("rows=64"), "rows=64");  // nothing left: the label stays whole
  OpProfileTable table;
  table.add("silu_mul_fp8 rows=8192", OpCategory::Elementwise, 0.25);
  table.add("silu_mul_fp8 rows=1912", OpCategory::Elementwise, 0.05);
  table.add("silu_mul_fp8 rows=8192", OpCategory::Elementwise, 0.25);
  table.add("linear M=64 N=4096 K=4096 none", OpCategory::Gemm, 0.4);
  const std::vector<OpProfileTable::Row> ops = table.ops_by_total();
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].label, "silu_mul_fp8");
  EXPECT_EQ(ops[0].calls, 3);
  EXPECT_NEAR(ops[0].total_ms, 0.55, 1e-12);
  EXPECT_EQ(ops[0].category, OpCategory::Elementwise);
  EXPECT_EQ(ops[1].label, "linear none");
  const std::string report = table.report(1);
  EXPECT_NE(report.find("op, every shape"), std::string::npos) << report;
  EXPECT_NE(report.find("silu_mul_fp8                                                3       0.550"),
            std::string::npos)
      << report;
}

TEST(OpProfileTable, EmptyWindowReportsNoOutsideTime) {
  OpProfileTable table;
  EXPECT_TRUE(table.empty());
  table.add("copy [4]", OpCategory::Copy, 0.002);
  EXPECT_FALSE(table.empty());
  EXPECT_NE(table.report().find("outside any op 0.000 ms (0.0%"), std::string::npos) << table.report();
}

// The event pool on a real stream: a pool of 3 pairs folded twice, nested and captured ops not bracketed.
TEST(OpProfilerGpu, CountsEveryOpAcrossPoolRefillsAndSkipsCaptures) {
  if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA GPU";
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  void* buffer = nullptr;
  ASSERT_EQ(cudaMalloc(&buffer, 1 << 20), cudaSuccess);
  {
    OpProfiler profiler(stream, 3);
    for (int i = 0; i < 7; ++i) {
      OpScope scope(&profiler, OpCategory::Copy, [] { return std::string("fill_zero test"); });
      OpScope nested(&profiler, OpCategory::Other, [] { return std::string("nested"); });
      ASSERT_EQ(cudaMemsetAsync(buffer, 0, 1 << 20, stream), cudaSuccess);
    }
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    {
      OpScope captured(&profiler, OpCategory::Copy, [] { return std::string("captured"); });
      ASSERT_EQ(cudaMemsetAsync(buffer, 0, 1 << 20, stream), cudaSuccess);
    }
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    cudaGraphDestroy(graph);
    const std::string report = profiler.report();
    const auto rows = profiler.table().rows_by_total();
    ASSERT_EQ(rows.size(), 1u) << report;  // neither "nested" nor "captured"
    EXPECT_EQ(rows[0].label, "fill_zero test");
    EXPECT_EQ(rows[0].calls, 7);
    EXPECT_GT(rows[0].total_ms, 0.0);
    EXPECT_GE(profiler.table().window_ms(), 0.99 * rows[0].total_ms);  // ops lie inside their windows
  }
  cudaFree(buffer);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace fovea::cuda
