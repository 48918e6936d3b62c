// `fovea run`'s job over two CPU replicas of the REAL demo model, one of which fails mid-batch as if its device
// had (make_engine_service_with_failure, the test-only fault hook): no request is lost, every record equals the
// single engine's, and the failure is reported.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/service.h"
#include "engine_test_util.h"
#include "jobs/batch_job.h"

namespace fovea {
namespace {

namespace fs = std::filesystem;

// Eight images asked two questions each (the second meets the first's caches on the same engine), a task with
// answers, and a corrupt image.
std::string write_tasks(const fs::path& dir) {
  fs::create_directories(dir);
  for (int i = 0; i < 8; ++i)
    std::ofstream(dir / ("img" + std::to_string(i) + ".bmp")) << test::make_bmp(40 + 3 * i, 30 + 5 * i, uint32_t(i));
  std::ofstream(dir / "corrupt.png") << std::string("\x89PNG\r\n\x1a\n", 8) + std::string(40, '\x01');
  nlohmann::json lines = nlohmann::json::array();
  for (int i = 0; i < 16; ++i)
    lines.push_back({{"id", "t" + std::to_string(i)},
                     {"image", "img" + std::to_string(i % 8) + ".bmp"},
                     {"prompt", i < 8 ? "Is there a bed?" : "What room?"},
                     {"max_tokens", 3}});
  lines.push_back({{"id", "ans"}, {"image", "img3.bmp"}, {"prompt", "Is there a bed?"}, {"answers", {"yes", "no"}}});
  lines.push_back({{"id", "corrupt"}, {"image", "corrupt.png"}, {"prompt", "q"}});
  const fs::path path = dir / "tasks.jsonl";
  std::ofstream out(path);
  for (const auto& line : lines) out << line.dump() << "\n";
  return path.string();
}

// The records by id, without the timing field.
std::map<std::string, nlohmann::json> read_records(const fs::path& path) {
  std::map<std::string, nlohmann::json> records;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json r = nlohmann::json::parse(line);
    r.erase("ms");
    const std::string id = r["id"];
    EXPECT_TRUE(records.emplace(id, r).second) << id << " was written twice";
  }
  return records;
}

TEST(EngineFailureDemo, AReplicaFailingMidBatchLosesNoRequest) {
  test::DemoModelDir model;
  const fs::path dir = fs::path(model.path()) / "job";
  const TaskList tasks = read_tasks_jsonl(write_tasks(dir), TaskDefaults{});
  EngineConfig config;
  config.model_dir = model.path();
  config.backend = "cpu";
  config.kv_blocks = 256;
  BatchJobOptions options;
  options.max_tiles = 1;
  options.concurrency = 6;
  options.progress_interval_s = 0.2;

  {
    auto reference = make_engine_service(config);
    run_batch_job(*reference, tasks, (dir / "ref.jsonl").string(), options);
    reference->drain();
  }
  config.replicas = 2;
  testing::internal::CaptureStderr();
  auto service = make_engine_service_with_failure(config, InjectedFailure{1, 2});
  const BatchJobSummary summary = run_batch_job(*service, tasks, (dir / "fail.jsonl").string(), options);
  service->drain();
  const EngineStats stats = service->stats();
  const std::string log = testing::internal::GetCapturedStderr();

  EXPECT_EQ(summary.ran, int64_t(tasks.tasks.size()));
  ASSERT_EQ(stats.engines.size(), 2u);
  EXPECT_TRUE(stats.engines[1].failed);
  EXPECT_NE(log.find("engine failed: injected device failure"), std::string::npos) << log;
  EXPECT_NE(log.find("cpu#1 taken out of rotation"), std::string::npos) << log;
  EXPECT_NE(log.find("(cpu#1 failed)"), std::string::npos) << log;
  const auto reference = read_records(dir / "ref.jsonl"), records = read_records(dir / "fail.jsonl");
  ASSERT_EQ(records.size(), reference.size());
  for (const auto& [id, record] : reference) {  // every request ran (retried on cpu#0) with one engine's answer
    ASSERT_TRUE(records.count(id)) << id;
    EXPECT_EQ(records.at(id), record) << id;
  }
  EXPECT_TRUE(records.at("corrupt").contains("error"));
  EXPECT_FALSE(records.at("t0").contains("error"));
}

}  // namespace
}  // namespace fovea
