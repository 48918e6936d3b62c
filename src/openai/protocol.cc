#include "openai/protocol.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "requests/json_limits.h"
#include "requests/request_fields.h"

namespace fovea::openai {
namespace {

ApiError bad(const std::string& message, const std::string& param = "") {
  ApiError e;
  e.status = 400;
  e.message = message;
  e.param = param;
  return e;
}

bool read_bool(const Json& body, const char* name, bool* out, ApiError* error) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_boolean()) {
    *error = bad(str(name, " must be a boolean"), name);
    return false;
  }
  *out = it->get<bool>();
  return true;
}

struct MessageParts {
  std::vector<std::string> texts;
  std::vector<std::string> image_urls;
};

// content: a string, or an array of {"type":"text","text"} / {"type":"image_url","image_url":{"url"}} parts.
bool read_content(const Json& content, MessageParts* parts, ApiError* error) {
  if (content.is_string()) {
    parts->texts.push_back(content.get<std::string>());
    return true;
  }
  if (!content.is_array()) {
    *error = bad("message content must be a string or an array of parts", "messages");
    return false;
  }
  for (const auto& part : content) {
    const std::string type = part.is_object() && part.value("type", Json()).is_string() ? part["type"].get<std::string>() : "";
    if (type == "text") {
      if (!part.contains("text") || !part["text"].is_string()) {
        *error = bad("a text part needs a string 'text'", "messages");
        return false;
      }
      parts->texts.push_back(part["text"].get<std::string>());
    } else if (type == "image_url") {
      const Json image = part.value("image_url", Json());
      std::string url;
      if (image.is_string()) url = image.get<std::string>();
      else if (image.is_object() && image.value("url", Json()).is_string()) url = image["url"].get<std::string>();
      if (url.empty()) {
        *error = bad("an image_url part needs image_url.url", "messages");
        return false;
      }
      parts->image_urls.push_back(url);
    } else {
      *error = bad("unsupported content part type '" + excerpt(type) + "' (text and image_url are supported)", "messages");
      return false;
    }
  }
  return true;
}

std::string join(const std::vector<std::string>& texts) {
  std::string out;
  for (size_t i = 0; i < texts.size(); ++i) out += (i ? "\n" : "") + texts[i];
  return out;
}

// Fovea answers single-turn chats: system/developer messages, then user messages (joined). Earlier assistant
// turns would need a multi-turn template, which the engine does not build: refused rather than mis-prompted.
bool read_messages(const Json& body, ChatRequest* out, std::vector<std::string>* image_urls, ApiError* error) {
  const auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty()) {
    *error = bad("messages must be a non-empty array", "messages");
    return false;
  }
  MessageParts system, user;
  for (const auto& message : *it) {
    if (!message.is_object() || !message.value("role", Json()).is_string()) {
      *error = bad("each message needs a string 'role'", "messages");
      return false;
    }
    const std::string role = message["role"].get<std::string>();
    const Json content = message.value("content", Json());
    if (role == "system" || role == "developer") {
      if (!read_content(content, &system, error)) return false;
      if (!system.image_urls.empty()) {
        *error = bad("images are only accepted in user messages", "messages");
        return false;
      }
    } else if (role == "user") {
      if (!read_content(content, &user, error)) return false;
    } else if (role == "assistant" || role == "tool" || role == "function") {
      *error = bad("multi-turn conversations are not supported: send system and user messages only", "messages");
      return false;
    } else {
      *error = bad("unknown message role '" + excerpt(role) + "'", "messages");
      return false;
    }
  }
  if (user.texts.empty() && user.image_urls.empty()) {
    *error = bad("at least one user message is required", "messages");
    return false;
  }
  out->request.system = join(system.texts);
  out->request.prompt = join(user.texts);
  *image_urls = user.image_urls;
  return true;
}

// Reads an optional integer field; false (with error) when present but not an integer in [lo, hi].
bool read_int(const Json& body, const char* name, int64_t lo, int64_t hi, int64_t* out, bool* present,
              ApiError* error) {
  FieldError why;
  if (read_int_field(body, name, lo, hi, out, present, &why)) return true;
  *error = bad(why.message, why.param);
  return false;
}

bool read_generation(const Json& body, const ParseOptions& options, ChatRequest* out, ApiError* error) {
  GenerationParams& p = out->request.params;
  bool present = false;
  int64_t v = 0;
  p.max_tokens = options.default_max_tokens;
  if (!read_int(body, "max_tokens", 1, options.max_tokens_limit, &v, &present, error)) return false;
  if (present) p.max_tokens = int(v);
  if (!read_int(body, "max_completion_tokens", 1, options.max_tokens_limit, &v, &present, error)) return false;
  if (present) p.max_tokens = int(v);
  if (!read_int(body, "n", 1, 1, &v, &present, error)) return false;
  // The sampling fields and Fovea's own (answers, choices, tiling, max_tiles) by the rules every door shares.
  FieldError why;
  if (!read_sampling_fields(body, &p, &why) || !read_fovea_fields(body, &out->request, &why)) {
    *error = bad(why.message, why.param);
    return false;
  }
  if (!read_bool(body, "logprobs", &out->logprobs, error)) return false;
  if (!read_int(body, "top_logprobs", 0, 20, &v, &present, error)) return false;
  if (present) {
    if (!out->logprobs) {
      *error = bad("top_logprobs needs logprobs: true", "top_logprobs");
      return false;
    }
    out->top_logprobs = int(v);
  }
  // The engine's top_logprobs is "how many per token, 0 = none": ask for at least one so the chosen token's
  // logprob comes back; the response trims the list to what the client asked for.
  p.top_logprobs = out->logprobs ? std::max(1, out->top_logprobs) : 0;
  return true;
}

}  // namespace

Json error_json(const ApiError& e) {
  return Json{{"error",
               {{"message", client_error_text(e.message)},
                {"type", e.type},
                {"param", e.param.empty() ? Json() : Json(e.param)},
                {"code", e.code.empty() ? Json() : Json(e.code)}}}};
}

bool parse_chat_request(const std::string& body_text, const ParseOptions& options, const MediaLoader& load_media,
                        ChatRequest* out, ApiError* error) {
  Json body;
  // Depth and size are checked while parsing, so a body of a million tiny values or a deep nest is refused
  // before it becomes a tree many times its size.
  const JsonLimits limits{options.max_json_depth, options.max_json_elements};
  JsonOverLimit over = JsonOverLimit::None;
  try {
    body = parse_json_within(body_text, limits, &over);
  } catch (const std::exception&) {
    *error = bad("the request body is not valid JSON");
    return false;
  }
  if (over != JsonOverLimit::None) {
    *error = bad("the request JSON " + json_limit_text(over, limits));
    return false;
  }
  if (!body.is_object()) {
    *error = bad("the request body must be a JSON object");
    return false;
  }
  *out = ChatRequest{};
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string()) {
      *error = bad("model must be a string", "model");
      return false;
    }
    out->model = body["model"].get<std::string>();
  }
  if (!read_bool(body, "stream", &out->stream, error)) return false;
  const Json stream_options = body.value("stream_options", Json());
  if (stream_options.is_object() && stream_options.value("include_usage", Json()).is_boolean())
    out->include_usage = stream_options["include_usage"].get<bool>();
  std::vector<std::string> image_urls;
  out->request.tiling = options.tiling;  // the door's defaults; the body's tiling / max_tiles override them
  out->request.max_tiles = options.max_tiles;
  if (!read_messages(body, out, &image_urls, error)) return false;
  if (!read_generation(body, options, out, error)) return false;
  if (int(image_urls.size()) > options.max_images) {
    *error = bad(str("too many images: ", image_urls.size(), " (the limit is ", options.max_images, ")"), "messages");
    return false;
  }
  // Media last: the cheap checks above fail fast before any file is read or URL fetched.
  for (size_t i = 0; i < image_urls.size(); ++i) {
    try {
      ImageInput image;
      image.bytes = load_media(image_urls[i]);
      image.label = image_urls[i].rfind("data:", 0) == 0 ? str("data: URL #", i + 1) : image_urls[i];
      out->request.images.push_back(std::move(image));
    } catch (const std::exception& e) {
      *error = bad(str("image #", i + 1, ": ", e.what()), "messages");
      error->code = "invalid_image";
      return false;
    }
  }
  return true;
}

Json logprob_content(const std::vector<TokenLogprob>& logprobs, int top_logprobs, const TokenText& token_text) {
  auto entry = [&](int32_t token, float logprob) {
    const std::string text = token_text(token);
    Json bytes = Json::array();
    for (unsigned char c : text) bytes.push_back(int(c));
    return Json{{"token", text}, {"logprob", logprob}, {"bytes", bytes}};
  };
  Json content = Json::array();
  for (const auto& lp : logprobs) {
    Json item = entry(lp.token, lp.logprob);
    Json top = Json::array();
    for (size_t k = 0; k < lp.top.size() && int(k) < top_logprobs; ++k) top.push_back(entry(lp.top[k].first, lp.top[k].second));
    item["top_logprobs"] = top;
    content.push_back(item);
  }
  return content;
}

std::string finish_reason_for(const std::string& engine_reason) {
  return engine_reason == "length" ? "length" : "stop";
}

Json completion_json(const Completion& c, const std::string& text, const std::string& finish_reason,
                     const Json& logprobs, int prompt_tokens, int completion_tokens) {
  Json choice = {{"index", 0},
                 {"message", {{"role", "assistant"}, {"content", text}, {"refusal", nullptr}}},
                 {"logprobs", logprobs.is_null() ? Json() : Json{{"content", logprobs}}},
                 {"finish_reason", finish_reason}};
  return Json{{"id", c.id},
              {"object", "chat.completion"},
              {"created", c.created},
              {"model", c.model},
              {"choices", Json::array({choice})},
              {"usage",
               {{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion_tokens},
                {"total_tokens", prompt_tokens + completion_tokens}}}};
}

Json chunk_json(const Completion& c, const Json& delta, const std::string& finish_reason, const Json& logprobs) {
  Json choice = {{"index", 0},
                 {"delta", delta},
                 {"logprobs", logprobs.is_null() || logprobs.empty() ? Json() : Json{{"content", logprobs}}},
                 {"finish_reason", finish_reason.empty() ? Json() : Json(finish_reason)}};
  return Json{{"id", c.id},
              {"object", "chat.completion.chunk"},
              {"created", c.created},
              {"model", c.model},
              {"choices", Json::array({choice})}};
}

Json usage_chunk_json(const Completion& c, int prompt_tokens, int completion_tokens) {
  return Json{{"id", c.id},
              {"object", "chat.completion.chunk"},
              {"created", c.created},
              {"model", c.model},
              {"choices", Json::array()},
              {"usage",
               {{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion_tokens},
                {"total_tokens", prompt_tokens + completion_tokens}}}};
}

void add_scores(Json* choice, const std::vector<std::string>& answers, const RequestEvent& final_event) {
  if (!final_event.choice_logprobs.empty()) (*choice)["choice_logprobs"] = final_event.choice_logprobs;
  if (answers.empty()) return;
  Json scores = Json::object();
  for (const std::string& answer : answers) {
    const auto it = final_event.answer_logprobs.find(answer);
    scores[answer] = it == final_event.answer_logprobs.end() || !std::isfinite(it->second) ? Json() : Json(it->second);
  }
  (*choice)["answer_logprobs"] = scores;
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json models_json(const std::string& model_name, int64_t created) {
  return Json{{"object", "list"},
              {"data", Json::array({Json{{"id", model_name}, {"object", "model"}, {"created", created},
                                         {"owned_by", "fovea"}}})}};
}

// A request cancelled by the server's shutdown is 503; a failure whose ErrorKind is the request's own (a bad
// parameter, an image it could not read, a prompt beyond the context or the KV pool) is 400, with the OpenAI
// codes invalid_image and context_length_exceeded; anything else is ours (500).
ApiError engine_error(const RequestEvent& event) {
  ApiError e;
  e.message = event.error;
  if (event.finish_reason == "cancelled") {
    e.status = 503;
    e.message = "the request was cancelled: the server is shutting down";
    e.type = "server_error";
    e.code = "unavailable";
    return e;
  }
  const bool client_fault = is_client_error(event.error_kind);
  e.status = client_fault ? 400 : 500;
  e.type = client_fault ? "invalid_request_error" : "server_error";
  if (event.error_kind == ErrorKind::ContextLength || event.error_kind == ErrorKind::InvalidImage)
    e.code = error_kind_name(event.error_kind);
  return e;
}

}  // namespace fovea::openai
