// Test helpers for the scheduler against the recording fake runner: prompt builder, a harness that collects
// every request's events, and the reference output of a request served alone with every cache off.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "fake_runner.h"

namespace fovea::test {

constexpr int kTokensPerTile = 4;  // the fake's 56-pixel tiles

// Prompt builder: text ids and images (by signature) in order.
struct PromptSpec {
  std::vector<int32_t> head;                  // text before the image(s)
  std::vector<std::pair<float, int>> images;  // (signature, tiles), placed back to back after head
  std::vector<int32_t> tail;
};

inline PreparedRequest make_request(int64_t id, const PromptSpec& spec, int max_tokens = 1) {
  PreparedRequest r;
  r.id = id;
  r.prompt = spec.head;
  for (const auto& [signature, tiles] : spec.images) {
    ImageSlot slot;
    slot.key = murmur3_128(&signature, sizeof signature, 0);
    slot.tiles = tiles;
    slot.begin = int32_t(r.prompt.size());
    slot.rows = tiles * kTokensPerTile;
    slot.pixels = fovea::test::fake_pixels(tiles, signature, 56);
    r.prompt.insert(r.prompt.end(), size_t(slot.rows), FakeRunner::kImageToken);
    r.images.push_back(std::move(slot));
  }
  r.prompt.insert(r.prompt.end(), spec.tail.begin(), spec.tail.end());
  r.params.max_tokens = max_tokens;
  return r;
}

inline std::vector<int32_t> text(int n, int first = 10) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(first + (i * 7) % 300);
  return ids;
}

struct Harness {
  explicit Harness(FakeRunnerConfig rc = {}, SchedulerConfig sc = {}, const Tokenizer* tok = nullptr)
      : runner(rc), scheduler(runner, tok, sc, [this](int64_t id, const RequestEvent& e) { on_event(id, e); }) {}

  void on_event(int64_t id, const RequestEvent& e) {
    EXPECT_FALSE(finals.count(id)) << "event after the final one for request " << id;
    for (int32_t t : e.token_delta) tokens[id].push_back(t);
    for (const TokenLogprob& lp : e.logprob_delta) logprobs[id].push_back(lp);
    text_out[id] += e.text_delta;
    if (e.finished) finals[id] = e;
  }
  void run(int max_steps = 10000) {
    for (int i = 0; i < max_steps && scheduler.has_work(); ++i) scheduler.step();
    ASSERT_FALSE(scheduler.has_work()) << "scheduler did not finish";
  }
  // Steps in which request `id`'s chunk appears, identified by its first token position.
  FakeRunner runner;
  Scheduler scheduler;
  std::map<int64_t, std::vector<int32_t>> tokens;
  std::map<int64_t, std::vector<TokenLogprob>> logprobs;
  std::map<int64_t, std::string> text_out;
  std::map<int64_t, RequestEvent> finals;
};

// Output of one request served alone with every cache off: the reference the batched runs must match.
inline std::vector<int32_t> alone(const PromptSpec& spec, int max_tokens) {
  SchedulerConfig sc;
  sc.prefix_cache = false;
  sc.vision_cache_tiles = 0;
  Harness h({}, sc);
  h.scheduler.add(make_request(1, spec, max_tokens));
  h.run();
  return h.tokens[1];
}


}  // namespace fovea::test
