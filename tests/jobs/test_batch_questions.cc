// Multi-question tasks of `fovea run`: "prompts" expands into one task per question (ids "<id>#<k>"), the job
// runs an image's questions together however the input scatters them, and "choices" reach the engine and come
// back as "choice_logprobs".
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "../engine/fake_service.h"
#include "jobs/batch_job.h"
#include "jobs/job_input.h"
#include "support/temp_dir.h"

namespace fovea {
namespace {
namespace fs = std::filesystem;

class QuestionFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 3; ++i) {
      const std::string k = std::to_string(i);
      dir_.write("p" + k + ".jpg", "JPEG" + k);
    }
  }
  TaskList read(const std::string& text) { return read_tasks_jsonl(dir_.write("tasks.jsonl", text), {}); }
  test::TempDir dir_{"questions"};
};

TEST_F(QuestionFiles, PromptsBecomeOneTaskPerQuestion) {
  const TaskList list = read(R"({"id":"room","image":"p0.jpg","prompts":["bed?","sofa?","window?"],"max_tokens":2})"
                             "\n"
                             R"({"id":7,"image":"p1.jpg","prompts":["bed?"],"choices":["yes","no"]})"
                             "\n"
                             R"({"id":"both","image":"p1.jpg","prompt":"q","prompts":["a"]})"
                             "\n"
                             R"({"id":"empty","image":"p1.jpg","prompts":[]})"
                             "\n"
                             R"({"id":"bad","image":"p1.jpg","prompts":["a", 3]})"
                             "\n");
  ASSERT_EQ(list.tasks.size(), 7u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(list.tasks[size_t(k)].id, "room#" + std::to_string(k));
    EXPECT_EQ(list.tasks[size_t(k)].key, "\"room#" + std::to_string(k) + "\"");
    EXPECT_EQ(list.tasks[size_t(k)].max_tokens, 2);
    EXPECT_EQ(list.tasks[size_t(k)].image_path, (dir_ / "p0.jpg").string());
    EXPECT_TRUE(list.tasks[size_t(k)].problem.empty());
  }
  EXPECT_EQ(list.tasks[1].prompt, "sofa?");
  EXPECT_EQ(list.tasks[3].id, "7#0");
  EXPECT_EQ(list.tasks[3].choices, (std::vector<std::string>{"yes", "no"}));
  EXPECT_NE(list.tasks[4].problem.find("not both"), std::string::npos);
  EXPECT_NE(list.tasks[5].problem.find("non-empty array"), std::string::npos);
  EXPECT_NE(list.tasks[6].problem.find("non-empty array"), std::string::npos);
  EXPECT_EQ(list.tasks[6].id, "bad");
}

TEST_F(QuestionFiles, AnImagesQuestionsRunTogetherWhateverTheInputOrder) {
  // Question-major input: every image's first question, then every second one.
  std::string text;
  for (int q = 0; q < 2; ++q)
    for (int i = 0; i < 3; ++i)
      text += R"({"id":"i)" + std::to_string(i) + "q" + std::to_string(q) + R"(","image":"p)" + std::to_string(i) +
              R"(.jpg","prompt":"q)" + std::to_string(q) + "\"}\n";
  const TaskList list = read(text);
  testing::FakeService service;
  BatchJobOptions options;
  options.concurrency = 1;  // submissions in the job's order
  options.progress = false;
  EXPECT_FALSE(run_batch_job(service, list, (dir_ / "out.jsonl").string(), options).any_failed());
  ASSERT_EQ(service.requests.size(), 6u);
  const std::vector<std::string> images{"JPEG0", "JPEG0", "JPEG1", "JPEG1", "JPEG2", "JPEG2"};
  const std::vector<std::string> prompts{"q0", "q1", "q0", "q1", "q0", "q1"};
  for (size_t r = 0; r < 6; ++r) {
    EXPECT_EQ(service.requests[r].images[0].bytes, images[r]) << r;
    EXPECT_EQ(service.requests[r].prompt, prompts[r]) << r;
  }
}

// The rule of the server's guided_choice (1 to 64 non-empty strings): an empty list is an error, not "no choices".
TEST_F(QuestionFiles, ChoicesAreOneToSixtyFourNonEmptyStrings) {
  std::string many = R"({"id":"many","prompt":"q","choices":[)";
  for (int i = 0; i < 65; ++i) many += (i ? ",\"c" : "\"c") + std::to_string(i) + "\"";
  const TaskList list = read(R"({"id":"empty","prompt":"q","choices":[]})"
                             "\n" +
                             many + "]}\n" +
                             R"({"id":"blank","prompt":"q","choices":["yes",""]})"
                             "\n"
                             R"({"id":"ok","prompt":"q","choices":["yes","no"]})"
                             "\n");
  ASSERT_EQ(list.tasks.size(), 4u);
  EXPECT_NE(list.tasks[0].problem.find("\"choices\" must be an array of 1 to 64 non-empty strings"), std::string::npos)
      << list.tasks[0].problem;
  EXPECT_NE(list.tasks[1].problem.find("1 to 64"), std::string::npos) << list.tasks[1].problem;
  EXPECT_NE(list.tasks[2].problem.find("1 to 64"), std::string::npos) << list.tasks[2].problem;
  EXPECT_TRUE(list.tasks[3].problem.empty()) << list.tasks[3].problem;
}

TEST_F(QuestionFiles, ChoicesComeBackAsChoiceLogprobs) {
  const TaskList list = read(R"({"id":"a","image":"p0.jpg","prompts":["bed?","sofa?"],"choices":["yes","no"]})"
                             "\n");
  testing::FakeService service;
  BatchJobOptions options;
  options.progress = false;
  const fs::path out = dir_ / "choices.jsonl";
  EXPECT_FALSE(run_batch_job(service, list, out.string(), options).any_failed());
  std::map<std::string, nlohmann::json> by_id;
  std::ifstream in(out);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    by_id[j["id"].get<std::string>()] = j;
  }
  ASSERT_EQ(by_id.size(), 2u);
  for (const char* id : {"a#0", "a#1"}) {
    EXPECT_FLOAT_EQ(by_id[id]["choice_logprobs"]["yes"].get<float>(), -1.0f) << id;
    EXPECT_FLOAT_EQ(by_id[id]["choice_logprobs"]["no"].get<float>(), -2.0f) << id;
  }
  for (const Request& r : service.requests) EXPECT_EQ(r.params.choices, (std::vector<std::string>{"yes", "no"}));
}

// Ids made from "prompts" used to collide with the user's own ids, and one task was dropped with a line on stderr
// only. Now the later line is dropped with a message naming both lines (and `fovea run` exits 1), and every
// record of a multi-question task says which question it answers.
TEST_F(QuestionFiles, GeneratedIdsThatCollideAreRefusedNamingBothLines) {
  std::ofstream(dir_ / "tasks.jsonl") << R"({"id":"a","prompts":["q0","q1"]})" << "\n"
                                      << R"({"id":"a#1","prompt":"q"})" << "\n"
                                      << R"({"id":"7#0","prompt":"q"})" << "\n"
                                      << R"({"id":7,"prompts":["q0"]})" << "\n";
  const JobInput input = read_job_input((dir_ / "tasks.jsonl").string(), InputFormat::Auto, {});
  ASSERT_EQ(input.duplicates.size(), 2u);
  EXPECT_NE(input.duplicates[0].find("line 2: id \"a#1\" was already used by line 1 (question 1)"),
            std::string::npos) << input.duplicates[0];
  EXPECT_NE(input.duplicates[1].find("line 4 (question 0): id \"7#0\" was already used by line 3"), std::string::npos)
      << input.duplicates[1];
  ASSERT_EQ(input.tasks.tasks.size(), 3u);

  testing::FakeService service;
  BatchJobOptions options;
  options.progress = false;
  run_job_input(service, input, (dir_ / "out.jsonl").string(), options);
  std::map<std::string, nlohmann::json> by_id;
  std::ifstream in(dir_ / "out.jsonl");
  for (std::string text; std::getline(in, text);) {
    const auto j = nlohmann::json::parse(text);
    by_id[j["id"].get<std::string>()] = j;
  }
  EXPECT_EQ(by_id.at("a#0")["question_index"], 0);
  EXPECT_EQ(by_id.at("a#1")["question_index"], 1);
  EXPECT_FALSE(by_id.at("7#0").contains("question_index"));  // the plain task of line 3
}

}  // namespace
}  // namespace fovea
