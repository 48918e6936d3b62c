// A tasks line with OpenAI chat "messages" instead of "image" + "prompt": read by the OpenAI parser (system and
// user messages, image_url parts as paths beside the tasks file, data: and http(s):// URLs), the first remote
// image downloaded ahead by the job's prefetcher, a line that also names "image", "prompt" or "prompts" refused.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "../engine/fake_service.h"
#include "jobs/batch_job.h"
#include "jobs/job_loop.h"
#include "support/temp_dir.h"

namespace fovea {
namespace {

std::string user_with_image(const std::string& url, const std::string& text = "q") {
  return R"({"role":"user","content":[{"type":"image_url","image_url":{"url":")" + url +
         R"("}},{"type":"text","text":")" + text + R"("}]})";
}

BatchTask parse(const std::string& line, const TaskDefaults& defaults = {}) {
  BatchTask task;
  std::string why;
  EXPECT_TRUE(parse_task_line(line, defaults, "/base", &task, &why)) << why;
  return task;
}

TEST(TaskMessages, ALineWithMessagesAndAnImageOrPromptIsRefused) {
  const std::string messages = R"("messages":[{"role":"user","content":"hi"}])";
  for (const std::string other : {"image", "prompt", "prompts"}) {
    const std::string value = other == "prompts" ? R"(["a"])" : R"("x")";
    const BatchTask task = parse(R"({"id":1,)" + messages + R"(,")" + other + R"(":)" + value + "}");
    EXPECT_EQ(task.problem, "give \"messages\" or \"" + other +
                                "\", not both (images and the prompt go in the messages)")
        << other;
  }
  for (const std::string bad : {R"([])", R"("hi")", R"({"role":"user"})"})
    EXPECT_EQ(parse(R"({"id":1,"messages":)" + bad + "}").problem,
              "\"messages\" must be a non-empty array of chat messages")
        << bad;
}

TEST(TaskMessages, SystemGoesFirstAndTheDefaultPromptStaysOut) {
  TaskDefaults defaults;
  defaults.prompt = "the --prompt text";
  const BatchTask task =
      parse(R"({"id":1,"system":"Be brief.","max_tokens":3,"messages":[)" + user_with_image("img/a.png") + "]}",
            defaults);
  EXPECT_EQ(task.problem, "");
  EXPECT_EQ(task.prompt, "");
  EXPECT_EQ(task.system, "");
  EXPECT_EQ(task.base_dir, "/base");
  const auto messages = nlohmann::json::parse(task.messages);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0], nlohmann::json({{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(messages[1]["role"], "user");
  EXPECT_EQ(task.max_tokens, 3);
}

TEST(TaskMessages, TheFirstRemoteImageIsDownloadedAhead) {
  const BatchTask task = parse(R"({"id":1,"messages":[)" + user_with_image("img/a.png") + "," +
                               user_with_image("s3://bucket/one.png") + "," +
                               user_with_image("https://host/two.png") + "]}");
  EXPECT_EQ(make_task_item(task)->prefetch_url(), "s3://bucket/one.png");
  EXPECT_EQ(make_task_item(parse(R"({"id":1,"messages":[)" + user_with_image("img/a.png") + "]}"))->prefetch_url(),
            "");
}

class TaskMessagesRun : public ::testing::Test {
 protected:
  void SetUp() override { dir_.write("img/a.png", "PNG-A"); }

  // Runs the lines as a tasks file; the records by id.
  std::map<std::string, nlohmann::json> run(const std::string& lines) {
    dir_.write("tasks.jsonl", lines);
    const TaskList list = read_tasks_jsonl((dir_ / "tasks.jsonl").string(), {});
    BatchJobOptions options;
    options.progress = false;
    options.fetch.retries = 0;
    run_batch_job(service_, list, (dir_ / "out.jsonl").string(), options);
    std::map<std::string, nlohmann::json> records;
    std::ifstream in(dir_ / "out.jsonl");
    for (std::string text; std::getline(in, text);) {
      const auto j = nlohmann::json::parse(text);
      records[j["id"].get<std::string>()] = j;
    }
    return records;
  }

  test::TempDir dir_{"task_messages"};
  testing::FakeService service_;
};

TEST_F(TaskMessagesRun, MessagesBecomeTheRequestAndBadOnesFailAlone) {
  const auto records = run(
      R"({"id":"chat","system":"Be brief.","messages":[{"role":"system","content":"Say yes."},)" +
      user_with_image("img/a.png", "what?") + "]}\n" +
      R"({"id":"data","messages":[)" + user_with_image("data:image/png;base64,UE5HLUI=") + "]}\n" +
      R"({"id":"refused","messages":[)" + user_with_image("http://127.0.0.1:1/x.png") + "]}\n" +
      R"({"id":"missing","messages":[)" + user_with_image("img/none.png") + "]}\n" +
      R"({"id":"role","messages":[{"role":"robot","content":"x"}]})" + "\n" +
      R"({"id":"both","image":"img/a.png","messages":[)" + user_with_image("img/a.png") + "]}\n");
  ASSERT_EQ(records.size(), 6u);
  EXPECT_FALSE(records.at("chat").contains("error")) << records.at("chat").dump();
  EXPECT_FALSE(records.at("data").contains("error")) << records.at("data").dump();
  EXPECT_EQ(records.at("refused")["error_kind"], "invalid_image");
  EXPECT_NE(records.at("refused")["error"].get<std::string>().find("127.0.0.1:1/x.png"), std::string::npos)
      << "it was fetched: " << records.at("refused")["error"];
  EXPECT_EQ(records.at("missing")["error_kind"], "invalid_image");
  EXPECT_EQ(records.at("role")["error_kind"], "invalid_request");
  EXPECT_NE(records.at("role")["error"].get<std::string>().find("unknown message role"), std::string::npos);
  EXPECT_EQ(records.at("both")["error_kind"], "invalid_request");
  EXPECT_NE(records.at("both")["error"].get<std::string>().find("give \"messages\" or \"image\""), std::string::npos);
  std::lock_guard lock(service_.mutex);
  ASSERT_EQ(service_.requests.size(), 2u) << "only the good lines reached the engine";
  std::map<std::string, Request> by_prompt;
  for (const Request& r : service_.requests) by_prompt[r.prompt] = r;
  const Request& chat = by_prompt.at("what?");
  EXPECT_EQ(chat.system, "Be brief.\nSay yes.");  // the line's "system" first, then the messages' own
  ASSERT_EQ(chat.images.size(), 1u);
  EXPECT_EQ(chat.images[0].bytes, "PNG-A");  // the relative path, beside the tasks file
  ASSERT_EQ(by_prompt.at("q").images.size(), 1u);
  EXPECT_EQ(by_prompt.at("q").images[0].bytes, "PNG-B");  // the data: URL, decoded
}

}  // namespace
}  // namespace fovea
