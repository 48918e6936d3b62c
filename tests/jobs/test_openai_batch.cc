// `fovea run` over OpenAI batch files against a fake engine: hostile lines fail their own record.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "../engine/fake_service.h"
#include "jobs/job_input.h"
#include "jobs/openai_batch.h"
#include "support/temp_dir.h"

namespace fovea {
namespace {
namespace fs = std::filesystem;

class OpenAIBatchFiles : public ::testing::Test {
 protected:
  static std::string line(const std::string& custom_id, const std::string& body) {
    return R"({"custom_id":")" + custom_id + R"(","method":"POST","url":"/v1/chat/completions","body":)" + body + "}\n";
  }
  // Runs the batch file and returns its records by custom_id.
  std::map<std::string, nlohmann::json> run(const std::string& input, BatchJobSummary* summary = nullptr) {
    dir_.write("in.jsonl", input);
    testing::FakeService service;
    BatchJobOptions options;
    options.progress = false;
    const BatchJobSummary s =
        run_openai_batch_job(service, (dir_ / "in.jsonl").string(), (dir_ / "out.jsonl").string(), options);
    if (summary) *summary = s;
    std::map<std::string, nlohmann::json> out;
    std::ifstream in(dir_ / "out.jsonl");
    for (std::string text; std::getline(in, text);) {
      const auto j = nlohmann::json::parse(text);
      out[j["custom_id"].get<std::string>()] = j;
    }
    return out;
  }
  test::TempDir dir_{"openai_batch"};
};

const char* kHello = R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":2})";

// A body nested 100k deep used to overflow the stack while the line was copied (SIGSEGV, no records at all).
TEST_F(OpenAIBatchFiles, ADeepBodyFailsItsOwnRecord) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const auto records = run(line("deep", R"({"messages":[],"x":)" + deep + "}") + line("ok", kHello));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records.at("ok")["response"]["status_code"], 200);
  EXPECT_EQ(records.at("deep")["response"]["status_code"], 400);
  const std::string message = records.at("deep")["error"]["message"];
  EXPECT_NE(message.find("nests deeper than 32 levels"), std::string::npos) << message;
}

// The format is recognised per line: a garbage first line used to make every OpenAI batch line after it read as
// a task without an id (0 records, exit 1). Now the garbage line alone is skipped; tasks and OpenAI lines in one
// file each get their own kind of record.
TEST_F(OpenAIBatchFiles, EachLineIsRecognisedByItsOwnFields) {
  const std::string input = "this is not JSON\n" + line("o1", kHello) + R"({"id":"t1","prompt":"q"})" + "\n" +
                            line("o2", kHello);
  std::ofstream(dir_ / "in.jsonl") << input;
  const JobInput read = read_job_input((dir_ / "in.jsonl").string(), InputFormat::Auto, {});
  ASSERT_EQ(read.skipped_lines.size(), 1u);
  EXPECT_EQ(read.skipped_lines[0], "line 1: not valid JSON");
  EXPECT_EQ(read.openai.size(), 2u);
  ASSERT_EQ(read.tasks.tasks.size(), 1u);
  testing::FakeService service;
  BatchJobOptions options;
  options.progress = false;
  const fs::path out = dir_ / "out.jsonl";
  EXPECT_EQ(run_job_input(service, read, out.string(), options).ran, 3);
  std::ifstream in(out);
  int openai_records = 0, task_records = 0;
  for (std::string text; std::getline(in, text);) {
    const auto j = nlohmann::json::parse(text);
    openai_records += j.contains("custom_id") && j["response"]["status_code"] == 200;
    task_records += !j.contains("custom_id") && j["id"] == "t1";
  }
  EXPECT_EQ(openai_records, 2);
  EXPECT_EQ(task_records, 1);
  // Resuming a mixed output skips both kinds.
  EXPECT_EQ(run_job_input(service, read, out.string(), options).already_done, 3);

  // Forced formats: an OpenAI line read as a task has no id (skipped), and the other way round.
  EXPECT_EQ(read_job_input((dir_ / "in.jsonl").string(), InputFormat::Tasks, {}).skipped_lines.size(), 3u);
  EXPECT_EQ(read_job_input((dir_ / "in.jsonl").string(), InputFormat::OpenAI, {}).skipped_lines.size(), 2u);
}

// guided_choice comes back as the server answers it: every choice's total log-prob on the choice.
TEST_F(OpenAIBatchFiles, ChoicesComeBackWithTheirLogprobs) {
  const auto records = run(line("c", R"({"messages":[{"role":"user","content":"hi"}],"guided_choice":["yes","no"]})"));
  const auto& choice = records.at("c")["response"]["body"]["choices"][0];
  EXPECT_EQ(choice["choice_logprobs"], nlohmann::json::array({-1.0, -2.0})) << choice.dump();
}

// Images by URL are fetched with the job's fetch options, s3:// as the tasks format allows it; a failure names
// the URL and never advises a server flag that `fovea run` lacks.
TEST_F(OpenAIBatchFiles, UrlImagesAreFetchedWithTheJobsOptions) {
  const auto image_line = [&](const std::string& id, const std::string& url) {
    return line(id, R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":")" + url +
                        R"("}},{"type":"text","text":"q"}]}]})");
  };
  std::ofstream(dir_ / "in.jsonl") << image_line("http", "http://127.0.0.1:1/a.png")
                                   << image_line("s3", "s3://bucket/key.png");
  testing::FakeService service;
  BatchJobOptions options;
  options.progress = false;
  options.fetch.retries = 0;
  options.fetch.s3_endpoint = "http://127.0.0.1:1";
  ::setenv("AWS_ACCESS_KEY_ID", "test", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "test", 1);
  run_openai_batch_job(service, (dir_ / "in.jsonl").string(), (dir_ / "out.jsonl").string(), options);
  std::ifstream in(dir_ / "out.jsonl");
  std::map<std::string, std::string> message;
  for (std::string text; std::getline(in, text);) {
    const auto j = nlohmann::json::parse(text);
    message[j["custom_id"]] = j["error"].is_null() ? "" : j["error"]["message"].get<std::string>();
  }
  ASSERT_EQ(message.size(), 2u);
  EXPECT_NE(message["http"].find("127.0.0.1:1"), std::string::npos) << message["http"];  // it was fetched
  EXPECT_NE(message["s3"].find("s3://bucket/key.png"), std::string::npos) << message["s3"];
  for (const auto& [id, text] : message) EXPECT_EQ(text.find("--allow"), std::string::npos) << id << ": " << text;
  EXPECT_EQ(service.submitted.load(), 0);
}

// `--input /dev/zero` used to grow one endless line until memory ran out and then end "done: 0/0" with exit 0.
// A device or a directory is no input file; an over-long line is skipped alone.
TEST_F(OpenAIBatchFiles, InputsThatAreNotFilesAreRefused) {
  EXPECT_THROW(read_job_input("/dev/zero", InputFormat::Auto, {}), Error);
  EXPECT_THROW(read_job_input(dir_.string(), InputFormat::Auto, {}), Error);
  EXPECT_THROW(read_job_input((dir_ / "none.jsonl").string(), InputFormat::Auto, {}), Error);
}

}  // namespace
}  // namespace fovea
