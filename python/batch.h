// The native half of one Engine.generate()/stream() call: a JobStream (jobs/job_stream.h: the request pump, the
// prefetcher for URL images, the queue of results and token deltas, cancel, restarts after an engine failure)
// and the conversion of what it hands over into Python tuples.
// Threads: the stream's threads never touch Python objects. next() waits with the GIL released and converts with
// it held.
#pragma once
#include <nanobind/nanobind.h>

#include <memory>
#include <vector>

#include "fovea/engine.h"
#include "jobs/job_stream.h"

namespace fovea::py {

using Job = StreamJob;
using BatchOptions = JobStreamOptions;

class Batch {
 public:
  Batch(std::shared_ptr<InferenceService> service, std::vector<Job> jobs, const BatchOptions& options);
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  // Waits for news and returns it as a list of tuples (see fovea/_fovea.pyi: finished results, and with deltas
  // ("delta", index, text, tokens, logprobs) / ("restart", index)); None once everything was returned.
  // Checks for Ctrl-C every 100 ms.
  nanobind::object next();
  // Requests not yet handed to the engine finish at once as "cancelled"; those in flight run to their end.
  void cancel() { stream_->cancel(); }
  size_t size() const { return stream_->size(); }

 private:
  nanobind::tuple convert(const FinishedRequest& f) const;
  nanobind::tuple convert(const StreamDelta& d) const;
  nanobind::list convert(const std::vector<TokenLogprob>& logprobs) const;

  std::shared_ptr<InferenceService> service_;  // token texts for the log-probs
  std::unique_ptr<JobStream> stream_;
};

}  // namespace fovea::py
