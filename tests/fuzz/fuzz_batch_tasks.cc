// The tasks file of `fovea run` (JSONL, one task per line) through read_tasks_jsonl, and each line alone
// through parse_task_line; every task must come out with a key, and an image path unless it is a problem record.
#include <cstdint>

#include "fuzz_util.h"
#include "jobs/batch_tasks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fovea::fuzz::write_scratch("tasks.jsonl", reinterpret_cast<const char*>(data), size);
  fovea::TaskDefaults defaults;
  defaults.prompt = "Describe the image.";
  defaults.max_tokens = 8;
  fovea::fuzz::expect_only_fovea_errors([&] {
    const fovea::TaskList list = fovea::read_tasks_jsonl(path, defaults);
    for (const fovea::BatchTask& t : list.tasks)
      if (t.key.empty()) std::abort();
  });
  return 0;
}
