// Choices and shared image prefixes on the REAL demo model (CPU backend). A choice's total log-prob must equal
// the brute-force sum of the step log-probs got by feeding its tokens one by one (each step's full logits,
// log-softmaxed on the host); K questions asked at once about one image compute its prefix once and answer
// exactly as with the prefix cache off (the scheduler driven directly, and through the Engine), and further
// questions reuse an image's prepared tiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "backend/backend.h"
#include "engine/engine.h"
#include "engine/request_prep.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine_test_util.h"
#include "model/model_desc.h"
#include "runtime/internvl_runner.h"

using namespace fovea;
using namespace fovea::test;

namespace {

// The demo model's runner, tokenizer and a scheduler over them, driven directly (no engine threads).
struct DemoScheduler {
  explicit DemoScheduler(const std::string& dir, const SchedulerConfig& config = {}) {
    RunnerOptions opts;
    opts.kv_blocks = 256;
    opts.max_step_tokens = 1024;
    opts.max_answer_ids = kMaxAnswers;
    runner = make_internvl_runner(load_model(dir), make_backend("cpu"), opts);
    tokenizer = load_tokenizer(dir);
    context.desc = &runner->desc();
    context.tokenizer = tokenizer.get();
    scheduler = std::make_unique<Scheduler>(*runner, tokenizer.get(), config,
                                            [this](int64_t id, const RequestEvent& e) {
                                              tokens[id].insert(tokens[id].end(), e.token_delta.begin(),
                                                                e.token_delta.end());
                                              if (e.finished) finals[id] = e;
                                            });
  }
  RequestEvent run(PreparedRequest request) {
    const int64_t id = request.id;
    scheduler->add(std::move(request));
    while (scheduler->has_work()) scheduler->step();
    return finals.at(id);
  }
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<Tokenizer> tokenizer;
  PrepContext context;
  std::unique_ptr<Scheduler> scheduler;
  std::map<int64_t, RequestEvent> finals;
  std::map<int64_t, std::vector<int32_t>> tokens;  // every event's, in order
};

Request image_question(const std::string& image, const std::string& question) {
  Request r;
  r.images.push_back(ImageInput{image, "test image"});
  r.prompt = question;
  r.max_tiles = 2;
  r.params.max_tokens = 3;
  return r;
}

}  // namespace

TEST(QuestionsDemo, TotalLogprobEqualsTheSumOfStepLogprobsFedOneByOne) {
  DemoModelDir dir;
  DemoScheduler demo(dir.path());
  Request request = image_question(make_bmp(96, 48, 7), "图中有床吗？");
  request.params.choices = {"是", "否", "not visible", "是的，有一张床"};
  const RequestEvent scored = demo.run(prepare_request(1, request, demo.context));
  ASSERT_TRUE(scored.error.empty()) << scored.error;
  ASSERT_EQ(scored.choice_logprobs.size(), request.params.choices.size());

  const PreparedRequest prepared = prepare_request(2, request, demo.context);
  int multi_token = 0;
  size_t best = 0;
  for (size_t c = 0; c < prepared.choice_ids.size(); ++c) {
    const std::vector<int32_t>& ids = prepared.choice_ids[c];
    multi_token += ids.size() > 1;
    double total = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      Request plain = request;
      plain.params.choices.clear();
      PreparedRequest step = prepare_request(int64_t(100 + 10 * c + i), plain, demo.context);
      step.prompt.insert(step.prompt.end(), ids.begin(), ids.begin() + std::ptrdiff_t(i));
      step.params.max_tokens = 1;
      step.params.return_first_logits = true;
      const RequestEvent e = demo.run(std::move(step));
      ASSERT_TRUE(e.error.empty()) << e.error;
      total += token_logprob(e.first_logits, ids[i]);
    }
    EXPECT_NEAR(scored.choice_logprobs[c], total, 1e-3) << "choice " << request.params.choices[c];
    if (scored.choice_logprobs[c] > scored.choice_logprobs[best]) best = c;
  }
  EXPECT_GE(multi_token, 2);  // the test covers choices scored over several tokens
  EXPECT_EQ(scored.text_delta, request.params.choices[best]);
  EXPECT_EQ(scored.token_delta, prepared.choice_ids[best]);
  EXPECT_EQ(scored.finish_reason, "stop");
  EXPECT_EQ(demo.scheduler->blocks().used_blocks(), 0);
}

TEST(QuestionsDemo, ConcurrentQuestionsOnOneImageComputeItsPrefixOnceAndAnswerAsWithoutTheCache) {
  DemoModelDir dir;
  const std::string image = make_bmp(96, 48, 8);
  const std::vector<std::string> questions{"图中有床吗？", "图中有沙发吗？", "这是室内吗？", "有窗户吗？"};
  std::map<bool, std::vector<std::vector<int32_t>>> answers;
  std::map<bool, SchedulerCounters> counters;
  int64_t prompt_tokens = 0, image_end = 0;
  for (const bool prefix_cache : {false, true}) {
    SchedulerConfig sc;
    sc.prefix_cache = prefix_cache;
    sc.max_step_tokens = 512;  // the 768-row image takes several chunks: waiters follow the owner across steps
    DemoScheduler demo(dir.path(), sc);
    prompt_tokens = 0;
    for (size_t q = 0; q < questions.size(); ++q) {
      PreparedRequest p = prepare_request(int64_t(q), image_question(image, questions[q]), demo.context);
      prompt_tokens += int64_t(p.prompt.size());
      image_end = p.images[0].end();
      demo.scheduler->add(std::move(p));
    }
    while (demo.scheduler->has_work()) demo.scheduler->step();
    for (size_t q = 0; q < questions.size(); ++q) {
      ASSERT_TRUE(demo.finals.at(int64_t(q)).error.empty()) << demo.finals.at(int64_t(q)).error;
      answers[prefix_cache].push_back(demo.tokens.at(int64_t(q)));
    }
    counters[prefix_cache] = demo.scheduler->counters();
    EXPECT_EQ(demo.scheduler->blocks().used_blocks(), 0);
  }
  EXPECT_EQ(answers[true], answers[false]);
  EXPECT_EQ(counters[false].prefill_tokens, prompt_tokens);
  // The image and the text before it were computed once; each other question computed at most its own
  // text plus the block the image ends in.
  const int64_t questions_after_first = int64_t(questions.size()) - 1;
  EXPECT_LE(counters[true].prefill_tokens, prompt_tokens - questions_after_first * (image_end - 16));
  EXPECT_EQ(counters[true].inflight_prefix_waits, questions_after_first);
  EXPECT_EQ(counters[true].prefill_tokens + counters[true].prefix_cache_hit_tokens, prompt_tokens);
}

TEST(QuestionsDemo, FurtherQuestionsAboutAnImageReuseItsPreparedTiles) {
  DemoModelDir dir;
  DemoScheduler demo(dir.path());
  RecentImages recent(4);
  demo.context.recent = &recent;
  const std::string image = make_bmp(96, 48, 9);
  const PreparedRequest first = prepare_request(1, image_question(image, "图中有床吗？"), demo.context);
  const PreparedRequest second = prepare_request(2, image_question(image, "有窗户吗？"), demo.context);
  const PreparedRequest other = prepare_request(3, image_question(make_bmp(96, 48, 10), "有窗户吗？"), demo.context);
  EXPECT_EQ(recent.hits(), 1);
  EXPECT_EQ(second.images[0].key, first.images[0].key);
  EXPECT_EQ(second.images[0].tiles, first.images[0].tiles);
  EXPECT_EQ(second.images[0].pixels.data, first.images[0].pixels.data);  // shared, not decoded again
  EXPECT_NE(other.images[0].pixels.data, first.images[0].pixels.data);
  // The shared tiles are read-only: after the first request ran through the runner they still equal a fresh decode.
  EXPECT_TRUE(demo.run(PreparedRequest(first)).error.empty());
  demo.context.recent = nullptr;
  const PreparedRequest decoded = prepare_request(5, image_question(image, "有窗户吗？"), demo.context);
  ASSERT_EQ(decoded.images[0].pixels.nbytes(), second.images[0].pixels.nbytes());
  EXPECT_EQ(std::memcmp(decoded.images[0].pixels.data, second.images[0].pixels.data, decoded.images[0].pixels.nbytes()), 0);
  EXPECT_EQ(decoded.prompt, second.prompt);
}

// Through the Engine (its threads, preparation pool and window), as the server and `fovea run` use it: concurrent
// requests about one image share its prefix and answer as with the prefix cache off; choices come back scored.
TEST(QuestionsDemo, EngineSharesConcurrentQuestionsAndScoresChoices) {
  DemoModelDir dir;
  const std::string image = make_bmp(96, 48, 11);
  const std::vector<std::string> questions{"图中有床吗？", "图中有沙发吗？", "这是室内吗？", "有窗户吗？", "有人吗？"};
  std::map<bool, std::vector<std::vector<int32_t>>> answers;
  EngineStats cached_stats;
  for (const bool prefix_cache : {false, true}) {
    EngineConfig config;
    config.model_dir = dir.path();
    config.backend = "cpu";
    config.kv_blocks = 256;
    config.preprocess_threads = 2;
    config.prefix_cache = prefix_cache;
    Engine engine(config);
    Collector collector;
    for (size_t q = 0; q < questions.size(); ++q)
      engine.submit(image_question(image, questions[q]), collector.callback_for("q" + std::to_string(q)));
    Request choose = image_question(image, "图中有床吗？");
    choose.params.choices = {"是", "否", "not visible"};
    engine.submit(choose, collector.callback_for("choose"));
    engine.drain();
    for (size_t q = 0; q < questions.size(); ++q) {
      const Collected c = collector.get("q" + std::to_string(q));
      ASSERT_TRUE(c.last.error.empty()) << c.last.error;
      answers[prefix_cache].push_back(c.tokens);
    }
    const Collected c = collector.get("choose");
    ASSERT_TRUE(c.last.error.empty()) << c.last.error;
    ASSERT_EQ(c.last.choice_logprobs.size(), 3u);
    const size_t best = size_t(std::max_element(c.last.choice_logprobs.begin(), c.last.choice_logprobs.end()) -
                               c.last.choice_logprobs.begin());
    EXPECT_EQ(c.text, choose.params.choices[best]);
    EXPECT_EQ(engine.stats().kv_blocks_used, 0);
    if (prefix_cache) cached_stats = engine.stats();
  }
  EXPECT_EQ(answers[true], answers[false]);
  // Six requests (and the choice request's extra scoring sequence) over one 768-row image: it was computed once.
  EXPECT_LT(cached_stats.prefill_tokens, cached_stats.prompt_tokens - 5 * 768);
  EXPECT_EQ(cached_stats.prefill_tokens + cached_stats.prefix_cache_hit_tokens, cached_stats.prompt_tokens);
}
