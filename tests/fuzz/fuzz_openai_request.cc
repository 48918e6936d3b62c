// /v1/chat/completions bodies through parse_chat_request: any JSON shape, image_url parts (a data: URL hands back
// its payload, anything else is refused as a server without local or remote media refuses it), sampling fields.
// Bad requests must come back as false + an error, never a throw.
#include <cstdint>

#include "fuzz_util.h"
#include "openai/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  fovea::openai::ParseOptions options;
  options.max_images = 4;
  const fovea::openai::MediaLoader loader = [](const std::string& url) -> std::string {
    const size_t comma = url.find(',');
    if (url.rfind("data:", 0) != 0 || comma == std::string::npos) throw fovea::Error("refused");
    return url.substr(comma + 1);
  };
  fovea::fuzz::expect_only_fovea_errors([&] {
    fovea::openai::ChatRequest request;
    fovea::openai::ApiError error;
    if (!fovea::openai::parse_chat_request(body, options, loader, &request, &error)) {
      if (error.message.empty() || error.status < 400 || error.status > 599) std::abort();
      (void)fovea::openai::dump(fovea::openai::error_json(error));
    }
  });
  return 0;
}
