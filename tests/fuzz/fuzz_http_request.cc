// The server's incremental HTTP/1.1 request parser, fed the input in pieces whose sizes the input also chooses
// (so every split point of headers, chunk sizes and bodies is reached), then any pipelined request after it.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>

#include "fuzz_util.h"
#include "server/http_message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  fovea::http::Limits limits;
  limits.max_header_bytes = in.ConsumeIntegralInRange<size_t>(64, 16 * 1024);
  limits.max_body_bytes = in.ConsumeIntegralInRange<size_t>(0, 1 << 20);
  fovea::http::RequestParser parser(limits);
  std::string buffer;
  fovea::fuzz::expect_only_fovea_errors([&] {
    int requests = 0;
    while (in.remaining_bytes() > 0 && requests < 8) {
      buffer += in.ConsumeBytesAsString(in.ConsumeIntegralInRange<size_t>(1, 512));
      const size_t before = buffer.size();
      const auto state = parser.feed(buffer);
      if (buffer.size() > before) std::abort();  // the parser only consumes
      if (state == fovea::http::RequestParser::State::Error) {
        const int status = parser.error_status();
        if (status < 400 || status > 505 || parser.error_message().empty()) std::abort();
        break;
      }
      if (state == fovea::http::RequestParser::State::Done) {
        const auto& r = parser.request();
        if (r.body.size() > limits.max_body_bytes) std::abort();
        (void)r.header("content-type");
        parser.reset();
        ++requests;
      }
    }
  });
  return 0;
}
