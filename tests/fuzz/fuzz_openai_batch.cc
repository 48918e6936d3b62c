// The input file of `fovea run` with OpenAI batch lines (and tasks lines beside them): read_job_input recognises
// each line by its fields, then each OpenAI line's body goes through the server's parser as the job would run it
// (images: a data: URL hands back its payload, anything else is refused). A bad line must be skipped with a
// reason or become a record with its own error; nothing may escape but fovea::Error, and no depth may crash.
#include <cstdint>

#include "fuzz_util.h"
#include "jobs/job_input.h"
#include "openai/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fovea::fuzz::write_scratch("batch.jsonl", reinterpret_cast<const char*>(data), size);
  fovea::TaskDefaults defaults;
  defaults.prompt = "Describe the image.";
  const fovea::openai::MediaLoader loader = [](const std::string& url) -> std::string {
    const size_t comma = url.find(',');
    if (url.rfind("data:", 0) != 0 || comma == std::string::npos) throw fovea::Error("refused");
    return url.substr(comma + 1);
  };
  fovea::fuzz::expect_only_fovea_errors([&] {
    for (const auto format : {fovea::InputFormat::Auto, fovea::InputFormat::OpenAI}) {
      const fovea::JobInput input = fovea::read_job_input(path, format, defaults);
      for (const auto& why : input.skipped_lines)
        if (why.empty()) std::abort();
      for (const auto& line : input.openai) {
        if (line.key.empty()) std::abort();
        if (!line.problem.empty()) continue;
        fovea::openai::ChatRequest request;
        fovea::openai::ApiError error;
        if (!fovea::openai::parse_chat_request(line.body, {}, loader, &request, &error) && error.message.empty())
          std::abort();
      }
      for (const auto& task : input.tasks.tasks)
        if (task.key.empty()) std::abort();
    }
  });
  return 0;
}
