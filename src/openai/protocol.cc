#include "openai/protocol.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "requests/json_fields.h"
#include "requests/json_limits.h"

namespace fovea::openai {
namespace {

ApiError bad(const std::string& message, const std::string& param = "") {
  ApiError e;
  e.status = 400;
  e.message = message;
  e.param = param;
  return e;
}

// Reads an optional integer field; false (with error) when present but not an integer in [lo, hi].
bool read_int(const Json& body, const char* name, int64_t lo, int64_t hi, int64_t* out, bool* present,
              ApiError* error) {
  *present = false;
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_number_integer() && !(it->is_number_float() && std::floor(it->get<double>()) == it->get<double>())) {
    *error = bad(str(name, " must be an integer"), name);
    return false;
  }
  const int64_t v = it->is_number_float() ? int64_t(it->get<double>()) : it->get<int64_t>();
  if (v < lo || v > hi) {
    *error = bad(str(name, " must be between ", lo, " and ", hi, ", got ", v), name);
    return false;
  }
  *out = v;
  *present = true;
  return true;
}

bool read_number(const Json& body, const char* name, double lo, double hi, double* out, ApiError* error) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_number()) {
    *error = bad(str(name, " must be a number"), name);
    return false;
  }
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) {
    *error = bad(str(name, " must be between ", lo, " and ", hi), name);
    return false;
  }
  *out = v;
  return true;
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

bool read_stop(const Json& body, GenerationParams* params, ApiError* error) {
  const auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return true;
  if (it->is_string()) {
    params->stop.push_back(it->get<std::string>());
    return true;
  }
  if (!it->is_array() || it->size() > 4) {
    *error = bad("stop must be a string or an array of at most 4 strings", "stop");
    return false;
  }
  for (const auto& s : *it) {
    if (!s.is_string() || s.get<std::string>().empty()) {
      *error = bad("stop must hold non-empty strings", "stop");
      return false;
    }
    params->stop.push_back(s.get<std::string>());
  }
  return true;
}

// Fovea's extension in the spirit of vLLM's guided choice: "guided_choice" (or "choices") lists the answers
// allowed; the reply is the one with the highest total log-prob, and every choice's total comes back.
bool read_choices(const Json& body, GenerationParams* params, ApiError* error) {
  const char* key = body.contains("guided_choice") ? "guided_choice" : "choices";
  if (body.contains("guided_choice") && body.contains("choices")) {
    *error = bad("give guided_choice or choices, not both", "choices");
    return false;
  }
  const auto it = body.find(key);
  if (it == body.end()) return true;
  std::string why;
  if (read_choice_list(*it, key, &params->choices, &why)) return true;
  *error = bad(why, key);
  return false;
}

// OpenAI's presence/frequency penalties and vLLM's extra sampling fields (top_k, min_p, repetition_penalty,
// stop_token_ids, ignore_eos), with vLLM's ranges; the engine applies them as vLLM does (engine/sampler.h).
bool read_sampling(const Json& body, GenerationParams* p, ApiError* error) {
  struct Field {
    const char* name;
    double lo, hi;
    float* value;
  };
  const Field fields[] = {{"min_p", 0.0, 1.0, &p->min_p},
                          {"repetition_penalty", 1e-6, 1e6, &p->repetition_penalty},
                          {"presence_penalty", -2.0, 2.0, &p->presence_penalty},
                          {"frequency_penalty", -2.0, 2.0, &p->frequency_penalty}};
  for (const Field& f : fields) {
    double number = *f.value;
    if (!read_number(body, f.name, f.lo, f.hi, &number, error)) return false;
    *f.value = float(number);
  }
  bool present = false;
  int64_t v = 0;
  if (!read_int(body, "top_k", -1, INT32_MAX, &v, &present, error)) return false;
  if (present) p->top_k = int(v);
  if (!read_bool(body, "ignore_eos", &p->ignore_eos, error)) return false;
  const auto ids = body.find("stop_token_ids");
  if (ids == body.end() || ids->is_null()) return true;
  if (!ids->is_array() || ids->size() > 64) {
    *error = bad("stop_token_ids must be an array of at most 64 token ids", "stop_token_ids");
    return false;
  }
  for (const auto& id : *ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      *error = bad("stop_token_ids must hold non-negative integers", "stop_token_ids");
      return false;
    }
    p->stop_token_ids.push_back(int32_t(id.get<int64_t>()));
  }
  return true;
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
  if (!read_int(body, "seed", INT64_MIN, INT64_MAX, &v, &present, error)) return false;
  if (present) p.seed = uint64_t(v);
  double number = p.temperature;
  if (!read_number(body, "temperature", 0.0, 2.0, &number, error)) return false;
  p.temperature = float(number);
  number = p.top_p;
  if (!read_number(body, "top_p", 0.0, 1.0, &number, error)) return false;
  p.top_p = float(number);
  if (!read_stop(body, &p, error)) return false;
  if (!read_sampling(body, &p, error)) return false;
  if (!read_choices(body, &p, error)) return false;
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
  if (!read_messages(body, out, &image_urls, error)) return false;
  if (!read_generation(body, options, out, error)) return false;
  if (int(image_urls.size()) > options.max_images) {
    *error = bad(str("too many images: ", image_urls.size(), " (the limit is ", options.max_images, ")"), "messages");
    return false;
  }
  out->request.tiling = options.tiling;
  out->request.max_tiles = options.max_tiles;
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
