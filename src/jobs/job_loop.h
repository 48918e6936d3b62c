// The one loop behind `fovea run`, whatever its input format: resume from the results file (--retry-failed),
// run the items grouped by image, download URL images ahead, feed the engine, write each record durably as its
// request finishes, show progress and rate (a request whose engine failed runs again on another engine: the
// data-parallel dispatcher's retry, engine/data_parallel.h).
// A file format plugs in as JobItems: each item builds its Request and renders its finished request as one
// output line (jobs/batch_job.cc: the tasks format; jobs/openai_batch.cc: OpenAI batch lines).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "fetch/prefetch.h"
#include "jobs/batch_job.h"
#include "jobs/request_pump.h"

namespace fovea {

// What an item may use while building its request.
struct JobContext {
  const BatchJobOptions& options;
  InferenceService& service;
  // The item's prefetch_url() as the prefetcher downloaded it; null when it has none.
  Prefetched* prefetched = nullptr;
  bool dump_logits = false;  // --dump-logits: ask for the first token's logits
};

// One record to produce: one line of the input (or one question of a tasks line with "prompts").
class JobItem {
 public:
  virtual ~JobItem() = default;
  // The record field that identifies it ("id" for tasks, "custom_id" for OpenAI batch) and its value as JSON:
  // resume skips an item whose key is already in the output.
  virtual const char* key_field() const = 0;
  virtual const std::string& key() const = 0;
  // Items with the same non-empty group run one after another (a shared image's prefix is then computed once).
  virtual std::string group() const { return ""; }
  // An http(s):// or s3:// image to download ahead of the item ("" none).
  virtual std::string prefetch_url() const { return ""; }
  // Builds the request; false with *error when the item fails before reaching the engine (it then gets an
  // error record from render()).
  virtual bool make_request(const JobContext& context, Request* request, std::string* error) = 0;

  struct Record {
    std::string line;        // the output line, with its '\n'
    bool failed = false;     // an error record
    std::string logits_key;  // --dump-logits row key ("" none)
  };
  virtual Record render(const JobContext& context, const FinishedRequest& finished) const = 0;
};

// Runs every item whose key is not yet in `output_path`. `total` counts the input's items.
BatchJobSummary run_job_items(InferenceService& service, const std::vector<JobItem*>& items,
                              const std::string& output_path, const BatchJobOptions& options);

}  // namespace fovea
