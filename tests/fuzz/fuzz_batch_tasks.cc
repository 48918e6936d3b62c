// The tasks file of `fovea run` (JSONL): every line through parse_task_line, as read_tasks_jsonl does (that
// wrapper only adds the file read and duplicate-id counting); a usable line must give a task with a key.
#include <cstdint>

#include "fuzz_util.h"
#include "jobs/batch_tasks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fovea::TaskDefaults defaults;
  defaults.prompt = "Describe the image.";
  defaults.max_tokens = 8;
  fovea::fuzz::expect_only_fovea_errors([&] {
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      fovea::BatchTask task;
      std::string why;
      if (fovea::parse_task_line(text.substr(start, end - start), defaults, "", &task, &why)) {
        if (task.key.empty()) std::abort();
      } else if (why.empty()) {
        std::abort();
      }
      start = end + 1;
    }
  });
  return 0;
}
