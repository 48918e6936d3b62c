#include "jobs/job_loop.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/clock.h"
#include "core/error.h"
#include "core/rate_window.h"
#include "jobs/logits_dump.h"
#include "jobs/progress.h"

namespace fovea {
namespace {

// Items of one group run one after another (in input order), groups in the order they first appear: the engine
// then computes each image's prefix once and its other questions reuse it, however the input scatters them.
// Records are written as requests finish, so the output order never followed the input anyway.
void group_items(std::vector<JobItem*>* todo) {
  std::unordered_map<std::string, size_t> first_seen;
  std::vector<std::pair<size_t, JobItem*>> ranked;
  for (size_t i = 0; i < todo->size(); ++i) {
    const std::string group = (*todo)[i]->group();
    // An item without a group is a group of its own, where it stands.
    ranked.emplace_back(group.empty() ? i : first_seen.emplace(group, i).first->second, (*todo)[i]);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < ranked.size(); ++i) (*todo)[i] = ranked[i].second;
}

}  // namespace

BatchJobSummary run_job_items(InferenceService& service, const std::vector<JobItem*>& items,
                              const std::string& output_path, const BatchJobOptions& options) {
  BatchJobSummary summary;
  summary.total = int64_t(items.size());
  // Each format keys its records by its own field: a mixed file resumes both.
  std::map<std::string, ExistingResults> existing;
  bool first = true;
  for (const JobItem* item : items) {
    if (existing.count(item->key_field())) continue;
    // Failed records are dropped (retry) once, by the first read.
    existing[item->key_field()] = resume_results_file(output_path, options.retry_failed && first, item->key_field());
    first = false;
  }
  std::vector<JobItem*> todo;
  for (JobItem* item : items) {
    const ExistingResults& done = existing.at(item->key_field());
    if (done.done.count(item->key())) {
      summary.already_done++;
      summary.earlier_failed += done.failed.count(item->key());
    } else {
      todo.push_back(item);
    }
  }
  group_items(&todo);
  if (summary.already_done > 0)
    std::fprintf(stderr, "resume: %lld of %lld records already in %s\n", (long long)summary.already_done,
                 (long long)summary.total, output_path.c_str());

  ResultsWriter writer(output_path);
  std::unique_ptr<LogitsDump> logits_dump;
  if (!options.dump_logits_path.empty()) logits_dump = std::make_unique<LogitsDump>(options.dump_logits_path);
  Progress progress(int64_t(todo.size()), options.progress_terminal, options.progress_interval_s);
  RateWindow rate(60.0);
  const double start = monotonic_seconds();

  // URL images are downloaded ahead (in submission order) while earlier items run.
  std::vector<std::string> urls(todo.size());
  for (size_t i = 0; i < todo.size(); ++i) urls[i] = todo[i]->prefetch_url();
  FetchOptions fetch = options.fetch;
  fetch.max_bytes = options.max_image_bytes;
  Prefetcher prefetcher(std::move(urls), fetch, options.prefetch_window, options.fetch_parallel);
  std::vector<bool> built(todo.size(), false);

  const JobContext base{options, service, nullptr, logits_dump != nullptr};
  PumpCallbacks callbacks;
  callbacks.make_request = [&](size_t i, Request* request, std::string* error) {
    JobContext context = base;
    Prefetched fetched;
    if (!built[i] && !todo[i]->prefetch_url().empty()) {
      fetched = prefetcher.take(i);
      context.prefetched = &fetched;
    }
    built[i] = true;
    return todo[i]->make_request(context, request, error);
  };
  callbacks.on_finished = [&](std::vector<FinishedRequest>& finished) {
    std::string lines;
    std::vector<LogitsDump::Row> logit_rows;
    for (const auto& f : finished) {
      const JobItem::Record record = todo[f.index]->render(base, f);
      summary.failed += record.failed;
      lines += record.line;
      if (logits_dump && !record.failed && !record.logits_key.empty() && !f.final.first_logits.empty())
        logit_rows.push_back({record.logits_key, &f.final.first_logits});
    }
    if (logits_dump) logits_dump->append(logit_rows);  // before the results: a done item has its row
    writer.append(lines);  // durable before it counts as done
    summary.ran += int64_t(finished.size());
    rate.add(monotonic_seconds(), int64_t(finished.size()));
  };
  callbacks.on_tick = [&] {
    if (!options.progress) return;
    progress.set_detail(engine_shares(service.stats()));
    progress.update(summary.ran, summary.failed, rate.per_minute(monotonic_seconds()), monotonic_seconds());
  };
  pump_requests(service, todo.size(), options.concurrency, callbacks);
  summary.elapsed_s = monotonic_seconds() - start;
  if (options.progress) progress.set_detail(engine_shares(service.stats()));
  if (options.progress) progress.finish(summary.ran, summary.failed, summary.elapsed_s);
  return summary;
}

}  // namespace fovea
