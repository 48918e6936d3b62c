#include "jobs/chat_messages.h"

#include "fetch/fetch.h"
#include "jobs/job_loop.h"
#include "media/media.h"

namespace fovea {

std::string first_remote_image(const nlohmann::json& messages) {
  if (!messages.is_array()) return "";
  for (const auto& message : messages) {
    if (!message.is_object() || !message.contains("content") || !message["content"].is_array()) continue;
    for (const auto& part : message["content"]) {
      if (!part.is_object() || !part.contains("image_url")) continue;
      const nlohmann::json& image = part["image_url"];
      const nlohmann::json url = image.is_object() ? image.value("url", nlohmann::json()) : image;
      if (url.is_string() && is_fetch_url(url.get<std::string>())) return url.get<std::string>();
    }
  }
  return "";
}

bool read_chat_messages(const std::string& messages_json, const openai::MediaLoader& load, Request* request,
                        openai::ApiError* error) {
  openai::ChatRequest chat;
  if (!openai::parse_chat_request("{\"messages\": " + messages_json + "}", openai::ParseOptions{}, load, &chat, error))
    return false;
  request->system = std::move(chat.request.system);
  request->prompt = std::move(chat.request.prompt);
  for (ImageInput& image : chat.request.images) {
    if (is_fetch_url(image.label)) image.label = redact_url(image.label);  // no signature in an error message
    request->images.push_back(std::move(image));
  }
  return true;
}

openai::MediaLoader job_image_loader(const JobContext& context, const std::string& prefetch_url,
                                     std::function<std::string(const std::string&)> resolve_relative) {
  MediaOptions media;
  media.allowed_media_dir = "/";  // the input file is the user's own: local paths anywhere
  media.max_bytes = context.options.max_image_bytes;
  Prefetched* prefetched = context.prefetched;
  const BatchJobOptions& options = context.options;
  return [media, prefetched, &options, prefetch_url, resolve = std::move(resolve_relative)](
             const std::string& url) mutable -> std::string {
    if (is_fetch_url(url)) {
      Prefetched fetched;
      if (prefetched && url == prefetch_url) {
        fetched = std::move(*prefetched);
        prefetched = nullptr;
      } else {
        fetched = fetch_image(url, options);
      }
      if (fetched.error.empty() && fetched.bytes.empty()) fetched.error = "empty image at " + redact_url(url);
      if (!fetched.error.empty()) throw MediaError(fetched.error);
      return std::move(fetched.bytes);
    }
    const bool plain_relative =
        !url.empty() && url[0] != '/' && url.find("://") == std::string::npos && url.rfind("data:", 0) != 0;
    return load_image_url(plain_relative ? resolve(url) : url, media);
  };
}

}  // namespace fovea
