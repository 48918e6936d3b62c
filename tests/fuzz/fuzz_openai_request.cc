// /v1/chat/completions bodies through parse_chat_request: any JSON shape, image_url parts (data: URLs go through
// the server's base64 decoder, anything else is refused as a server without local or remote media refuses it),
// sampling fields. Bad requests must come back as false + an error, never a throw.
#include <cstdint>

#include "fuzz_util.h"
#include "server/media.h"
#include "server/openai_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  fovea::ParseOptions options;
  options.max_images = 4;
  const fovea::MediaLoader loader = [](const std::string& url) -> std::string {
    const size_t comma = url.find(',');
    if (url.rfind("data:", 0) != 0 || comma == std::string::npos) throw fovea::MediaError("refused");
    return fovea::base64_decode(url.substr(comma + 1));
  };
  fovea::fuzz::expect_only_fovea_errors([&] {
    fovea::ChatRequest request;
    fovea::ApiError error;
    if (!fovea::parse_chat_request(body, options, loader, &request, &error)) {
      if (error.message.empty() || error.status < 400 || error.status > 599) std::abort();
      (void)fovea::dump(fovea::error_json(error));
    }
  });
  return 0;
}
