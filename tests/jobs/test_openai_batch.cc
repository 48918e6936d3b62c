// `fovea run` over OpenAI batch files against a fake engine: hostile lines fail their own record.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "../engine/fake_service.h"
#include "jobs/openai_batch.h"

namespace fovea {
namespace {
namespace fs = std::filesystem;

class OpenAIBatchFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fovea_openai_batch_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string line(const std::string& custom_id, const std::string& body) {
    return R"({"custom_id":")" + custom_id + R"(","method":"POST","url":"/v1/chat/completions","body":)" + body + "}\n";
  }
  // Runs the batch file and returns its records by custom_id.
  std::map<std::string, nlohmann::json> run(const std::string& input, BatchJobSummary* summary = nullptr) {
    std::ofstream(dir_ / "in.jsonl") << input;
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
  fs::path dir_;
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

}  // namespace
}  // namespace fovea
