#include <gtest/gtest.h>

#include "media/media.h"
#include "openai/protocol.h"

namespace fovea::openai {
namespace {

MediaLoader fake_loader(std::vector<std::string>* seen) {
  return [seen](const std::string& url) -> std::string {
    seen->push_back(url);
    if (url == "refused") throw MediaError("not allowed");
    return "bytes:" + url;
  };
}

bool parse(const std::string& body, ChatRequest* out, ApiError* error, std::vector<std::string>* seen = nullptr) {
  std::vector<std::string> ignored;
  ParseOptions options;
  options.default_max_tokens = 7;
  options.max_tiles = 2;
  return parse_chat_request(body, options, fake_loader(seen ? seen : &ignored), out, error);
}

TEST(OpenAiParse, TextImageAndParameters) {
  ChatRequest r;
  ApiError e;
  std::vector<std::string> seen;
  ASSERT_TRUE(parse(R"({"model":"m","stream":true,"stream_options":{"include_usage":true},
    "messages":[{"role":"system","content":"be brief"},
                {"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},
                                          {"type":"text","text":"what is it?"}]}],
    "max_tokens":5,"max_completion_tokens":9,"temperature":0.5,"top_p":0.9,"seed":42,"stop":["x","y"],
    "logprobs":true,"top_logprobs":3,"n":1,"unknown_field":{}})",
                    &r, &e, &seen))
      << e.message;
  EXPECT_EQ(r.model, "m");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.request.system, "be brief");
  EXPECT_EQ(r.request.prompt, "what is it?");
  ASSERT_EQ(r.request.images.size(), 1u);
  EXPECT_EQ(r.request.images[0].bytes, "bytes:data:image/png;base64,AAAA");
  EXPECT_EQ(r.request.images[0].label, "data: URL #1");
  EXPECT_EQ(r.request.params.max_tokens, 9);  // max_completion_tokens wins
  EXPECT_FLOAT_EQ(r.request.params.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.request.params.top_p, 0.9f);
  EXPECT_EQ(r.request.params.seed, 42u);
  EXPECT_EQ(r.request.params.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.request.params.top_logprobs, 3);
  EXPECT_EQ(r.request.max_tiles, 2);
}

TEST(OpenAiParse, VllmSamplingFields) {
  ChatRequest r;
  ApiError e;
  ASSERT_TRUE(parse(R"({"messages":[{"role":"user","content":"hi"}],"temperature":0.7,"top_k":20,"min_p":0.05,
                        "repetition_penalty":1.1,"presence_penalty":-0.5,"frequency_penalty":1.5,
                        "stop_token_ids":[7,9],"ignore_eos":true})",
                    &r, &e))
      << e.message;
  const GenerationParams& p = r.request.params;
  EXPECT_EQ(p.top_k, 20);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(p.presence_penalty, -0.5f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, 1.5f);
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{7, 9}));
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_FALSE(p.seed.has_value());  // no seed: the engine draws a fresh one
  for (const char* body : {R"({"messages":[{"role":"user","content":"a"}],"top_k":-2})",
                           R"({"messages":[{"role":"user","content":"a"}],"min_p":1.5})",
                           R"({"messages":[{"role":"user","content":"a"}],"repetition_penalty":0})",
                           R"({"messages":[{"role":"user","content":"a"}],"presence_penalty":3})",
                           R"({"messages":[{"role":"user","content":"a"}],"stop_token_ids":[-1]})",
                           R"({"messages":[{"role":"user","content":"a"}],"stop_token_ids":"7"})",
                           R"({"messages":[{"role":"user","content":"a"}],"ignore_eos":1})"})
    EXPECT_FALSE(parse(body, &r, &e)) << body;
}

TEST(OpenAiParse, DefaultsAndStringContent) {
  ChatRequest r;
  ApiError e;
  ASSERT_TRUE(parse(R"({"messages":[{"role":"user","content":"hi"},{"role":"user","content":"there"}],
                        "stop":"END","logprobs":true})",
                    &r, &e));
  EXPECT_EQ(r.request.prompt, "hi\nthere");
  EXPECT_EQ(r.request.params.max_tokens, 7);
  EXPECT_EQ(r.request.params.temperature, 0.0f);
  EXPECT_EQ(r.request.params.stop, (std::vector<std::string>{"END"}));
  EXPECT_EQ(r.request.params.top_logprobs, 1);  // logprobs without top_logprobs still needs the chosen token's
  EXPECT_EQ(r.top_logprobs, 0);
  EXPECT_FALSE(r.stream);
}

TEST(OpenAiParse, GuidedChoiceOrChoicesBecomeTheEnginesChoices) {
  for (const char* key : {"guided_choice", "choices"}) {
    ChatRequest r;
    ApiError e;
    ASSERT_TRUE(parse(std::string(R"({"messages":[{"role":"user","content":"bed?"}],")") + key +
                          R"(":["是","否","not visible"]})",
                      &r, &e))
        << e.message;
    EXPECT_EQ(r.request.params.choices, (std::vector<std::string>{"是", "否", "not visible"})) << key;
  }
}

// Fovea's own fields, as `fovea serve` and OpenAI batch files take them (requests/request_fields.h): answers,
// per-request tiling and max_tiles over the door's defaults.
TEST(OpenAiParse, FoveaFieldsAnswersTilingAndMaxTiles) {
  ChatRequest r;
  ApiError e;
  ASSERT_TRUE(parse(R"({"messages":[{"role":"user","content":"hi"}],"answers":["yes","no"],"tiling":"compact",
    "max_tiles":4})", &r, &e)) << e.message;
  EXPECT_EQ(r.request.params.answers, (std::vector<std::string>{"yes", "no"}));
  EXPECT_EQ(r.request.tiling, TilingPolicy::Compact);
  EXPECT_EQ(r.request.max_tiles, 4);
  ASSERT_TRUE(parse(R"({"messages":[{"role":"user","content":"hi"}]})", &r, &e));
  EXPECT_EQ(r.request.tiling, TilingPolicy::Official);  // the door's defaults
  EXPECT_EQ(r.request.max_tiles, 2);
  for (const auto& [field, param] : std::vector<std::pair<std::string, std::string>>{
           {R"("tiling":"square")", "tiling"}, {R"("tiling":3)", "tiling"}, {R"("max_tiles":0)", "max_tiles"},
           {R"("max_tiles":1.5)", "max_tiles"}, {R"("answers":"yes")", "answers"}, {R"("answers":["yes",""])", "answers"}}) {
    EXPECT_FALSE(parse(R"({"messages":[{"role":"user","content":"hi"}],)" + field + "}", &r, &e)) << field;
    EXPECT_EQ(e.param, param) << field;
    EXPECT_EQ(e.status, 400);
  }
}

// A seed is any 64-bit integer: OpenAI's signed ones and vLLM's unsigned ones up to 2^64 - 1, never clamped.
TEST(OpenAiParse, SeedsSignedOrUnsigned) {
  ChatRequest r;
  ApiError e;
  ASSERT_TRUE(parse(R"({"messages":[{"role":"user","content":"hi"}],"seed":18446744073709551615})", &r, &e));
  EXPECT_EQ(r.request.params.seed, std::optional<uint64_t>(UINT64_MAX));
  ASSERT_TRUE(parse(R"({"messages":[{"role":"user","content":"hi"}],"seed":-1})", &r, &e));
  EXPECT_EQ(r.request.params.seed, std::optional<uint64_t>(UINT64_MAX));
  ASSERT_TRUE(parse(R"({"messages":[{"role":"user","content":"hi"}],"seed":42})", &r, &e));
  EXPECT_EQ(r.request.params.seed, std::optional<uint64_t>(42));
  EXPECT_FALSE(parse(R"({"messages":[{"role":"user","content":"hi"}],"top_k":18446744073709551615})", &r, &e));
  EXPECT_EQ(e.param, "top_k");
}

// A missing local file, a refused source: invalid_image, as every door says it.
TEST(OpenAiParse, AnImageThatCannotBeHadIsInvalidImage) {
  ChatRequest r;
  ApiError e;
  ASSERT_FALSE(parse(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"refused"}}]}]})",
                     &r, &e));
  EXPECT_EQ(e.code, "invalid_image");
  EXPECT_EQ(e.status, 400);
}

TEST(OpenAiParse, BadRequestsNameTheParameter) {
  struct Case {
    const char* body;
    const char* param;  // "" for none
  } cases[] = {
      {"not json", ""},
      {"[1]", ""},
      {R"({"messages":[]})", "messages"},
      {R"({"messages":[{"role":"user","content":"a"}],"max_tokens":0})", "max_tokens"},
      {R"({"messages":[{"role":"user","content":"a"}],"max_tokens":"5"})", "max_tokens"},
      {R"({"messages":[{"role":"user","content":"a"}],"max_completion_tokens":99999999})", "max_completion_tokens"},
      {R"({"messages":[{"role":"user","content":"a"}],"temperature":3})", "temperature"},
      {R"({"messages":[{"role":"user","content":"a"}],"top_p":-1})", "top_p"},
      {R"({"messages":[{"role":"user","content":"a"}],"n":2})", "n"},
      {R"({"messages":[{"role":"user","content":"a"}],"stop":[1]})", "stop"},
      {R"({"messages":[{"role":"user","content":"a"}],"stop":["a","b","c","d","e"]})", "stop"},
      {R"({"messages":[{"role":"user","content":"a"}],"guided_choice":[]})", "guided_choice"},
      {R"({"messages":[{"role":"user","content":"a"}],"choices":["a",""]})", "choices"},
      {R"({"messages":[{"role":"user","content":"a"}],"choices":["a"],"guided_choice":["b"]})", "choices"},
      {R"({"messages":[{"role":"user","content":"a"}],"top_logprobs":2})", "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"a"}],"logprobs":true,"top_logprobs":21})", "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"a"}],"stream":"yes"})", "stream"},
      {R"({"messages":[{"role":"user","content":"a"}],"model":5})", "model"},
      {R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]})", "messages"},
      {R"({"messages":[{"role":"system","content":"a"}]})", "messages"},
      {R"({"messages":[{"role":"wizard","content":"a"}]})", "messages"},
      {R"({"messages":[{"role":"user","content":[{"type":"audio"}]}]})", "messages"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})", "messages"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"refused"}}]}]})", "messages"},
  };
  for (const auto& c : cases) {
    ChatRequest r;
    ApiError e;
    EXPECT_FALSE(parse(c.body, &r, &e)) << c.body;
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_FALSE(e.message.empty());
  }
}

// Deep nests and bodies of very many small values are refused while parsing, each with the limit named.
TEST(OpenAiParse, JsonDepthAndElementLimits) {
  const std::string messages = R"("messages":[{"role":"user","content":"hi"}])";
  ChatRequest r;
  ApiError e;
  const std::string deep = std::string(40, '[') + std::string(40, ']');
  EXPECT_FALSE(parse("{" + messages + R"(,"x":)" + deep + "}", &r, &e));
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("deeper than 32"), std::string::npos) << e.message;
  std::string many = "[0";
  for (int i = 0; i < 100001; ++i) many += ",0";
  EXPECT_FALSE(parse("{" + messages + R"(,"x":)" + many + "]}", &r, &e));
  EXPECT_NE(e.message.find("more than 100000 elements"), std::string::npos) << e.message;
  const std::string shallow = std::string(20, '[') + std::string(20, ']');
  EXPECT_TRUE(parse("{" + messages + R"(,"x":)" + shallow + "}", &r, &e)) << e.message;
}

TEST(OpenAiParse, ImagesPerRequestLimit) {
  std::string parts;
  for (int i = 0; i < 17; ++i) parts += R"({"type":"image_url","image_url":{"url":"x"}},)";
  ChatRequest r;
  ApiError e;
  std::vector<std::string> seen;
  EXPECT_FALSE(parse(R"({"messages":[{"role":"user","content":[)" + parts + R"({"type":"text","text":"q"}]}]})", &r, &e,
                     &seen));
  EXPECT_NE(e.message.find("too many images: 17 (the limit is 16)"), std::string::npos) << e.message;
  EXPECT_TRUE(seen.empty());  // refused before any image was loaded
}

TEST(OpenAiParse, MediaIsLoadedOnlyAfterCheapChecks) {
  ChatRequest r;
  ApiError e;
  std::vector<std::string> seen;
  EXPECT_FALSE(parse(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":"u1"}]}],
                         "temperature":9})",
                     &r, &e, &seen));
  EXPECT_TRUE(seen.empty());
  EXPECT_EQ(e.param, "temperature");
}

TEST(OpenAiJson, ResponseShapes) {
  const Completion c{"chatcmpl-1", 1700000000, "fovea-demo"};
  const Json body = completion_json(c, "yes", "stop", Json(), 12, 1);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "yes");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(body["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(body["usage"]["total_tokens"], 13);

  const Json chunk = chunk_json(c, Json{{"content", "a"}}, "", Json());
  EXPECT_EQ(chunk["object"], "chat.completion.chunk");
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(chunk["choices"][0]["delta"]["content"], "a");
  EXPECT_EQ(chunk_json(c, Json::object(), "length", Json())["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(usage_chunk_json(c, 3, 4)["choices"].empty());
  EXPECT_EQ(usage_chunk_json(c, 3, 4)["usage"]["completion_tokens"], 4);

  ApiError e;
  e.status = 429;
  e.message = "busy";
  e.type = "rate_limit_error";
  e.code = "rate_limit_exceeded";
  const Json err = error_json(e);
  EXPECT_EQ(err["error"]["message"], "busy");
  EXPECT_TRUE(err["error"]["param"].is_null());
  EXPECT_EQ(err["error"]["code"], "rate_limit_exceeded");

  EXPECT_EQ(models_json("m", 5)["data"][0]["id"], "m");
  EXPECT_EQ(finish_reason_for("length"), "length");
  EXPECT_EQ(finish_reason_for("stop"), "stop");
}

TEST(OpenAiJson, DumpSurvivesInvalidUtf8) {
  TokenLogprob lp;
  lp.token = 1;
  const Json content = logprob_content({lp}, 0, [](int32_t) { return std::string("\xe6", 1); });  // half a character
  EXPECT_THROW(content.dump(), std::exception);
  const std::string text = dump(content);
  EXPECT_NE(text.find("\xef\xbf\xbd"), std::string::npos);  // U+FFFD
  EXPECT_NE(text.find("\"bytes\":[230]"), std::string::npos);  // the raw byte is still there
}

TEST(OpenAiJson, LogprobContentTrimsTopList) {
  TokenLogprob lp;
  lp.token = 7;
  lp.logprob = -0.25f;
  lp.top = {{7, -0.25f}, {8, -2.0f}, {9, -3.0f}};
  const Json content = logprob_content({lp}, 2, [](int32_t t) { return t == 7 ? std::string("是") : "x"; });
  ASSERT_EQ(content.size(), 1u);
  EXPECT_EQ(content[0]["token"], "是");
  EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), -0.25f);
  EXPECT_EQ(content[0]["bytes"].size(), 3u);  // UTF-8 bytes of 是
  EXPECT_EQ(content[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(logprob_content({lp}, 0, [](int32_t) { return std::string(); })[0]["top_logprobs"].size(), 0u);
}

}  // namespace
}  // namespace fovea::openai

namespace fovea {
namespace {

// The status and code come from the failure's kind, not its wording: an image the ViT failed to encode is our
// fault (500) although its message names an image; a context overflow is the client's (400) whatever it says.
// Whatever reaches a client as an error object is bounded and carries no source locations.
TEST(OpenAiJson, ErrorMessagesAreBoundedAndWithoutSourceLocations) {
  using namespace openai;
  ApiError e;
  e.message = "request_prep.cc:151: choice '" + std::string(1 << 20, 'x') + "'";
  const std::string message = error_json(e)["error"]["message"];
  EXPECT_EQ(message.rfind("choice 'xxx", 0), 0u) << message.substr(0, 80);
  EXPECT_LT(message.size(), 1200u);
  ChatRequest r;
  ASSERT_FALSE(parse_chat_request(R"({"messages":[{"role":")" + std::string(100000, 'r') + R"(","content":"hi"}]})",
                                  ParseOptions{}, nullptr, &r, &e));
  EXPECT_LT(e.message.size(), 200u) << e.message.substr(0, 300);
}

TEST(OpenAiJson, EngineErrorsMapTheirKind) {
  const auto error_for = [](ErrorKind kind, const std::string& message) {
    RequestEvent event;
    event.finished = true;
    event.finish_reason = "error";
    event.error = message;
    event.error_kind = kind;
    return openai::engine_error(event);
  };
  const openai::ApiError image = error_for(ErrorKind::InvalidImage, "image #1 (a.jpg): bad JPEG");
  EXPECT_EQ(image.status, 400);
  EXPECT_EQ(image.code, "invalid_image");
  const openai::ApiError context = error_for(ErrorKind::ContextLength, "needs 9000 KV positions");
  EXPECT_EQ(context.status, 400);
  EXPECT_EQ(context.code, "context_length_exceeded");
  EXPECT_EQ(context.type, "invalid_request_error");
  const openai::ApiError param = error_for(ErrorKind::InvalidRequest, "top_p must be in (0, 1]");
  EXPECT_EQ(param.status, 400);
  EXPECT_EQ(param.code, "");
  EXPECT_EQ(error_for(ErrorKind::Internal, "image encoding failed: out of memory").status, 500);
  const openai::ApiError device = error_for(ErrorKind::EngineFailed, "engine failed: CUDA error");
  EXPECT_EQ(device.status, 500);
  EXPECT_EQ(device.type, "server_error");
  RequestEvent cancelled;
  cancelled.finished = true;
  cancelled.finish_reason = "cancelled";
  EXPECT_EQ(openai::engine_error(cancelled).status, 503);
}

}  // namespace
}  // namespace fovea
