#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>

#include "../engine/fake_service.h"
#include "jobs/batch_job.h"
#include "core/rate_window.h"
#include "jobs/progress.h"
#include "support/temp_dir.h"

namespace fovea {
namespace {
namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<nlohmann::json> read_records(const fs::path& p) {
  std::vector<nlohmann::json> out;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

class BatchFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 6; ++i) dir_.write("img/p" + std::to_string(i) + ".jpg", "JPEG" + std::to_string(i));
    dir_.write("img/broken.jpg", "bad");
    dir_.write("img/.hidden", "x");
  }
  test::TempDir dir_{"batch"};
};

TEST_F(BatchFiles, ReadsTasksResolvingPathsAndFlaggingProblems) {
  std::ofstream(dir_ / "tasks.jsonl") << R"({"id":"a","image":"img/p0.jpg","prompt":"q","max_tokens":3,"answers":["是","否"]})"
                                      << "\n\n"
                                      << R"({"id":7,"image":"img/p1.jpg"})" << "\n"
                                      << R"({"image":"img/p1.jpg"})" << "\n"
                                      << "not json\n"
                                      << R"({"id":"a","image":"img/p2.jpg"})" << "\n"
                                      << R"({"id":"m","prompt":"q","system":"Be brief."})" << "\n"
                                      << R"({"id":"n","image":"x","max_tokens":0})" << "\n"
                                      << R"({"id":"s","prompt":"q","system":3})" << "\n"
                                      << R"({"id":"e","image":"","prompt":"q"})" << "\n";
  TaskDefaults defaults;
  defaults.prompt = "default?";
  defaults.max_tokens = 2;
  const TaskList list = read_tasks_jsonl((dir_ / "tasks.jsonl").string(), defaults);
  ASSERT_EQ(list.tasks.size(), 6u);
  EXPECT_EQ(list.skipped_lines.size(), 2u);
  EXPECT_EQ(list.duplicate_ids, 1);
  EXPECT_EQ(list.tasks[0].key, "\"a\"");
  EXPECT_EQ(list.tasks[0].image_path, (dir_ / "img/p0.jpg").string());
  EXPECT_EQ(list.tasks[0].max_tokens, 3);
  EXPECT_EQ(list.tasks[0].answers, (std::vector<std::string>{"是", "否"}));
  EXPECT_EQ(list.tasks[1].id, 7);
  EXPECT_EQ(list.tasks[1].prompt, "default?");
  EXPECT_EQ(list.tasks[1].max_tokens, 2);
  EXPECT_TRUE(list.tasks[1].problem.empty());
  EXPECT_TRUE(list.tasks[2].problem.empty());  // no image: a text-only task
  EXPECT_TRUE(list.tasks[2].image_path.empty());
  EXPECT_EQ(list.tasks[2].system, "Be brief.");
  EXPECT_TRUE(list.tasks[1].system.empty());
  EXPECT_FALSE(list.tasks[3].problem.empty());  // max_tokens 0
  EXPECT_FALSE(list.tasks[4].problem.empty());  // system not a string
  EXPECT_FALSE(list.tasks[5].problem.empty());  // empty image path

  const TaskList from_dir = tasks_from_image_dir((dir_ / "img").string(), defaults);
  ASSERT_EQ(from_dir.tasks.size(), 7u);  // hidden file skipped
  EXPECT_EQ(from_dir.tasks[0].id, "broken.jpg");
  EXPECT_EQ(split_list(" a, b,,c "), (std::vector<std::string>{"a", "b", "c"}));
}

// A tasks line takes the sampling and Fovea fields by the rules an OpenAI body does (requests/request_fields.h),
// per-token log-probs as Python's Request.logprobs, and data: URL images as given.
TEST(TaskLine, SamplingTilingLogprobsAndDataUrls) {
  TaskDefaults defaults;
  defaults.answers = {"yes"};
  BatchTask task;
  std::string why;
  ASSERT_TRUE(parse_task_line(R"({"id":1,"image":"data:image/png;base64,AAAA","prompt":"q","temperature":0.7,
    "top_p":0.9,"top_k":40,"seed":42,"stop":"END","logprobs":2,"tiling":"compact","max_tiles":3,
    "choices":["a","b"]})", defaults, "/base", &task, &why)) << why;
  EXPECT_TRUE(task.problem.empty()) << task.problem;
  EXPECT_EQ(task.image_path, "data:image/png;base64,AAAA");  // not taken for a path beside the tasks file
  EXPECT_FLOAT_EQ(task.sampling.temperature, 0.7f);
  EXPECT_FLOAT_EQ(task.sampling.top_p, 0.9f);
  EXPECT_EQ(task.sampling.top_k, 40);
  EXPECT_EQ(task.sampling.seed, std::optional<uint64_t>(42));
  EXPECT_EQ(task.sampling.stop, (std::vector<std::string>{"END"}));
  EXPECT_EQ(task.logprobs, 2);
  EXPECT_EQ(task.tiling, std::optional<TilingPolicy>(TilingPolicy::Compact));
  EXPECT_EQ(task.max_tiles, 3);
  EXPECT_EQ(task.answers, (std::vector<std::string>{"yes"}));  // the default, as before
  EXPECT_EQ(task.choices, (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE(parse_task_line(R"({"id":2,"prompt":"q"})", defaults, "/base", &task, &why));
  EXPECT_EQ(task.logprobs, -1);
  EXPECT_FALSE(task.tiling.has_value());
  EXPECT_FALSE(task.sampling.seed.has_value());
  for (const std::string field : {R"("temperature":3)", R"("top_k":-2)", R"("tiling":"tall")", R"("logprobs":-1)",
                                  R"("max_tiles":0)", R"("seed":"x")", R"("answers":[1])"}) {
    ASSERT_TRUE(parse_task_line(R"({"id":3,"prompt":"q",)" + field + "}", defaults, "/base", &task, &why));
    EXPECT_FALSE(task.problem.empty()) << field;  // fails that task alone
  }
}

TEST_F(BatchFiles, RecoverTruncatesATornTailAndCollectsIds) {
  const fs::path out = dir_ / "out.jsonl";
  std::ofstream(out) << R"({"id":"a","text":"x","tokens":[],"ms":1})" << "\n"
                     << R"({"id":2,"text":"","tokens":[],"error":"boom","ms":1})" << "\n"
                     << "garbage line\n"
                     << R"({"id":"c","text":"tor)";
  const ExistingResults r = recover_results_file(out.string());
  EXPECT_EQ(r.done, (std::set<std::string>{"\"a\"", "2"}));
  EXPECT_EQ(r.failed, (std::set<std::string>{"2"}));
  EXPECT_EQ(r.unreadable_lines, 1);
  EXPECT_EQ(r.truncated_bytes, 21);
  const std::string after = read_all(out);
  EXPECT_EQ(after.back(), '\n');
  EXPECT_EQ(after.find("tor"), std::string::npos);
  EXPECT_TRUE(recover_results_file((dir_ / "missing.jsonl").string()).done.empty());
}

TEST(ResultLine, KeysInOrderAndAnswersOnlyWhenAsked) {
  BatchResult r;
  r.id = "x";
  r.text = "是";
  r.tokens = {5, 6};
  r.has_answers = true;
  r.answer_logprobs = {{"是", -0.5f}, {"否", -INFINITY}};
  r.ms = 12.345;
  EXPECT_EQ(result_line(r), "{\"id\":\"x\",\"text\":\"是\",\"tokens\":[5,6],\"logprobs\":{\"是\":-0.5,\"否\":null},\"ms\":12.35}\n");
  r.has_answers = false;
  r.error = "bad";
  r.error_kind = "invalid_image";
  r.text = std::string("\xff", 1);  // invalid UTF-8 must not lose the record
  const auto j = nlohmann::json::parse(result_line(r));
  EXPECT_EQ(j["error"], "bad");
  EXPECT_EQ(j["error_kind"], "invalid_image");
  EXPECT_FALSE(j.contains("logprobs"));
}

TEST(ProgressText, FormatsBarRateAndEta) {
  EXPECT_EQ(Progress::format(50, 2, 100, 60.0, false), "50/100 50.0% 2 failed 60.0 QPM ETA 50s");
  EXPECT_EQ(Progress::format(0, 0, 10, 0.0, true), "[........................] 0/10 0.0% 0.0 QPM ETA ?");
  EXPECT_EQ(Progress::format_duration(185), "3m05s");
  EXPECT_EQ(Progress::format_duration(7260), "2h01m");
}

TEST(ProgressText, EachEnginesShareOfTheFinishedRequests) {
  EngineStats s;
  EXPECT_EQ(engine_shares(s), "");  // a lone engine
  EngineStats a, b;
  a.engine = "cuda:0";
  a.requests_finished = 3;
  b.engine = "cuda:1";
  b.requests_finished = 1;
  b.requests_failed = 5;  // its device failed: those are not its share
  b.failed = true;
  s.engines = {a, b};
  EXPECT_EQ(engine_shares(s), "engines cuda:0 75% cuda:1 25% (cuda:1 failed)");
}

TEST(RateWindowTest, PerMinuteOverTheWindow) {
  RateWindow w(60.0);
  EXPECT_EQ(w.per_minute(0.0), 0.0);
  w.add(100.0, 10);
  w.add(110.0, 10);
  EXPECT_DOUBLE_EQ(w.per_minute(130.0), 40.0);   // 20 in 30 s
  EXPECT_DOUBLE_EQ(w.per_minute(170.0), 10.0);   // the first 10 left the window
  EXPECT_DOUBLE_EQ(w.per_minute(500.0), 0.0);
}

TEST_F(BatchFiles, RunsResumesAndRecordsErrors) {
  std::ofstream tasks(dir_ / "tasks.jsonl");
  for (int i = 0; i < 6; ++i)
    tasks << R"({"id":"t)" << i << R"(","image":"img/p)" << i << R"(.jpg","prompt":"q","max_tokens":2})" << "\n";
  tasks << R"({"id":"broken","image":"img/broken.jpg","prompt":"q","answers":["A","B"]})" << "\n";
  tasks << R"({"id":"missing","image":"img/none.jpg","prompt":"q"})" << "\n";
  tasks.close();
  const TaskList list = read_tasks_jsonl((dir_ / "tasks.jsonl").string(), {});
  const fs::path out = dir_ / "results.jsonl";
  // An earlier run finished t0 and was killed while writing t1.
  std::ofstream(out) << R"({"id":"t0","text":"old","tokens":[],"ms":1})" << "\n" << R"({"id":"t1","te)";

  testing::FakeService service;
  service.queue_limit = 2;  // fewer than the concurrency: the pump must wait and resubmit
  BatchJobOptions options;
  options.concurrency = 4;
  options.progress = false;
  const BatchJobSummary s = run_batch_job(service, list, out.string(), options);
  EXPECT_EQ(s.total, 8);
  EXPECT_EQ(s.already_done, 1);
  EXPECT_EQ(s.ran, 7);
  EXPECT_EQ(s.failed, 2);
  EXPECT_TRUE(s.any_failed());
  EXPECT_EQ(service.submitted.load(), 6);  // the missing file never reached the engine

  std::map<std::string, nlohmann::json> by_id;
  for (const auto& rec : read_records(out)) {
    EXPECT_EQ(by_id.count(rec["id"].get<std::string>()), 0u) << "duplicate " << rec["id"];
    by_id[rec["id"].get<std::string>()] = rec;
  }
  ASSERT_EQ(by_id.size(), 8u);
  EXPECT_EQ(by_id["t0"]["text"], "old");
  EXPECT_EQ(by_id["t3"]["text"], "t0 t1");
  EXPECT_EQ(by_id["t3"]["tokens"], nlohmann::json::array({0, 1}));
  EXPECT_FALSE(by_id["t3"].contains("error"));
  EXPECT_NE(by_id["broken"]["error"].get<std::string>().find("decode"), std::string::npos);
  EXPECT_NE(by_id["missing"]["error"].get<std::string>().find("none.jpg"), std::string::npos);

  // Run again: nothing left to do, the earlier failures still decide the status.
  const BatchJobSummary again = run_batch_job(service, list, out.string(), options);
  EXPECT_EQ(again.ran, 0);
  EXPECT_EQ(again.already_done, 8);
  EXPECT_EQ(again.earlier_failed, 2);
  EXPECT_EQ(read_records(out).size(), 8u);
}

// A FIFO (or a link to one), a directory or a device given as an image fails its own task at once; before, the
// job blocked in open() on the FIFO forever and no task got a record.
TEST_F(BatchFiles, FifosDirectoriesAndDevicesFailTheirOwnTask) {
  ASSERT_EQ(::mkfifo((dir_ / "img" / "pipe.jpg").c_str(), 0600), 0);
  fs::create_symlink(dir_ / "img" / "pipe.jpg", dir_ / "img" / "to_pipe.jpg");
  std::ofstream(dir_ / "tasks.jsonl") << R"({"id":"good","image":"img/p0.jpg","prompt":"q"})" << "\n"
                                      << R"({"id":"fifo","image":"img/pipe.jpg","prompt":"q"})" << "\n"
                                      << R"({"id":"link","image":"img/to_pipe.jpg","prompt":"q"})" << "\n"
                                      << R"({"id":"dir","image":"img","prompt":"q"})" << "\n"
                                      << R"({"id":"dev","image":"/dev/zero","prompt":"q"})" << "\n";
  const TaskList list = read_tasks_jsonl((dir_ / "tasks.jsonl").string(), {});
  testing::FakeService service;
  BatchJobOptions options;
  options.progress = false;
  const fs::path out = dir_ / "results.jsonl";
  const BatchJobSummary s = run_batch_job(service, list, out.string(), options);
  EXPECT_EQ(s.ran, 5);
  EXPECT_EQ(s.failed, 4);
  std::map<std::string, std::string> error;
  for (const auto& rec : read_records(out)) error[rec["id"]] = rec.value("error", "");
  EXPECT_EQ(error["good"], "");
  EXPECT_NE(error["fifo"].find("is not a regular file (a FIFO)"), std::string::npos) << error["fifo"];
  EXPECT_NE(error["link"].find("is not a regular file (a FIFO)"), std::string::npos) << error["link"];
  EXPECT_NE(error["dir"].find("is a directory"), std::string::npos) << error["dir"];
  EXPECT_NE(error["dev"].find("is not a regular file (a character device)"), std::string::npos) << error["dev"];
}

// --retry-failed on a full disk: the rewrite fails, the results stay as they were and no results.jsonl.tmp is left
// behind. A file-size limit (RLIMIT_FSIZE) stands in for the full disk: writes past it fail with EFBIG.
TEST_F(BatchFiles, RetryFailedOnAFullDiskLeavesNoTemporaryFile) {
  const fs::path out = dir_ / "results.jsonl";
  std::string before;
  for (int i = 0; i < 200; ++i) before += R"({"id":"t)" + std::to_string(i) + R"(","text":"some answer text","ms":1})" "\n";
  before += R"({"id":"bad","text":"","error":"x","ms":1})" "\n";
  std::ofstream(out) << before;
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 1024;  // the kept records need about 10 KB
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  bool threw = false;
  try {
    drop_failed_records(out.string());
  } catch (const Error&) {
    threw = true;
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(threw);
  EXPECT_FALSE(fs::exists(dir_ / "results.jsonl.tmp"));
  EXPECT_EQ(read_all(out), before);
}

TEST_F(BatchFiles, RetryFailedRunsErrorRecordsAgain) {
  std::ofstream(dir_ / "tasks.jsonl") << R"({"id":"a","image":"img/p0.jpg","prompt":"q"})" << "\n"
                                      << R"({"id":"b","image":"img/late.jpg","prompt":"q"})" << "\n";
  const TaskList list = read_tasks_jsonl((dir_ / "tasks.jsonl").string(), {});
  testing::FakeService service;
  BatchJobOptions options;
  options.progress = false;
  const fs::path out = dir_ / "retry.jsonl";
  EXPECT_EQ(run_batch_job(service, list, out.string(), options).failed, 1);  // late.jpg does not exist yet
  std::ofstream(dir_ / "img" / "late.jpg") << "JPEG";
  EXPECT_EQ(run_batch_job(service, list, out.string(), options).ran, 0);  // a plain rerun keeps the error
  options.retry_failed = true;
  const BatchJobSummary s = run_batch_job(service, list, out.string(), options);
  EXPECT_EQ(s.ran, 1);
  EXPECT_FALSE(s.any_failed());
  const auto records = read_records(out);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["id"], "a");
  EXPECT_EQ(records[1]["id"], "b");
  EXPECT_FALSE(records[1].contains("error"));
  EXPECT_FALSE(fs::exists(dir_ / "retry.jsonl.tmp"));
}

TEST_F(BatchFiles, AnswersBecomeLogprobs) {
  std::ofstream(dir_ / "tasks.jsonl") << R"({"id":"a","image":"img/p0.jpg","prompt":"q","answers":["yes","no"]})"
                                      << "\n";
  const TaskList list = read_tasks_jsonl((dir_ / "tasks.jsonl").string(), {});
  testing::FakeService service;
  BatchJobOptions options;
  options.progress = false;
  options.max_tiles = 2;
  const fs::path out = dir_ / "answers.jsonl";
  EXPECT_FALSE(run_batch_job(service, list, out.string(), options).any_failed());
  const auto records = read_records(out);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FLOAT_EQ(records[0]["logprobs"]["yes"].get<float>(), -1.0f);
  EXPECT_FLOAT_EQ(records[0]["logprobs"]["no"].get<float>(), -2.0f);
  ASSERT_EQ(service.requests.size(), 1u);
  EXPECT_EQ(service.requests[0].images[0].bytes, "JPEG0");
  EXPECT_EQ(service.requests[0].max_tiles, 2);
  EXPECT_EQ(service.requests[0].params.answers, (std::vector<std::string>{"yes", "no"}));
}

}  // namespace
}  // namespace fovea
