// `fovea run`'s job: tasks in, durable results out, resumable. The command (src/cli/cmd_run.cc) parses
// options and builds the engine; this runs the tasks against any InferenceService.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "fetch/fetch.h"
#include "fetch/prefetch.h"
#include "jobs/batch_tasks.h"
#include "jobs/results_file.h"
#include "fovea/engine.h"

namespace fovea {

struct BatchJobOptions {
  int concurrency = 64;
  TilingPolicy tiling = TilingPolicy::Official;
  int max_tiles = 0;
  int64_t max_image_bytes = 64ll * 1024 * 1024;
  bool progress = true;
  bool progress_terminal = false;  // redraw a bar (stderr is a terminal) instead of printing lines
  double progress_interval_s = 10.0;
  bool retry_failed = false;  // drop earlier error records first, so their tasks run again
  std::string dump_logits_path;  // non-empty: first-token logits to PATH.f32 + PATH.json (jobs/logits_dump.h)
  FetchOptions fetch;         // URL images (max_bytes is set from max_image_bytes)
  int prefetch_window = 32;  // URL images fetched ahead of the task being submitted
  int fetch_parallel = 8;    // downloads at once
};

struct BatchJobSummary {
  int64_t total = 0;           // records the input asks for (after dropping duplicate ids)
  int64_t already_done = 0;    // found in the output from an earlier run
  int64_t earlier_failed = 0;  // of those, records with an error
  int64_t ran = 0;             // finished in this run
  int64_t failed = 0;          // of those, with an error
  double elapsed_s = 0;
  bool any_failed() const { return earlier_failed + failed > 0; }
};

// Runs every task of `tasks` whose id is not yet in `output_path`, appending one record per task (the one job
// loop, jobs/job_loop.h, with the tasks format's plug-in).
BatchJobSummary run_batch_job(InferenceService& service, const TaskList& tasks, const std::string& output_path,
                              const BatchJobOptions& options);

class JobItem;
// The tasks format's plug-in for the job loop: `task` must outlive the item.
std::unique_ptr<JobItem> make_task_item(const BatchTask& task);

// Downloads one image URL with the job's fetch options and image size limit (what the prefetcher does ahead).
Prefetched fetch_image(const std::string& url, const BatchJobOptions& options);

}  // namespace fovea
