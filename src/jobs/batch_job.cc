#include "jobs/batch_job.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <unordered_map>

#include "core/error.h"
#include "jobs/logits_dump.h"
#include "core/rate_window.h"
#include "fetch/prefetch.h"
#include "jobs/progress.h"
#include "jobs/request_pump.h"
#include "requests/request_images.h"

namespace fovea {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

BatchResult to_result(const BatchTask& task, const FinishedRequest& f) {
  BatchResult r;
  r.id = task.id;
  r.text = f.text;
  r.tokens = f.tokens;
  r.error = f.final.error;
  if (r.error.empty() && f.final.finish_reason == "error") r.error = "failed";
  if (r.error.empty() && f.final.finish_reason == "cancelled") r.error = "cancelled";
  // A failure without a kind (cancelled, lost) counts as ours.
  if (!r.error.empty())
    r.error_kind = error_kind_name(f.final.error_kind == ErrorKind::None ? ErrorKind::Internal : f.final.error_kind);
  r.ms = f.final.ms;
  r.has_answers = !task.answers.empty();
  for (const auto& answer : task.answers) {
    const auto it = f.final.answer_logprobs.find(answer);
    r.answer_logprobs.emplace_back(answer, it == f.final.answer_logprobs.end() ? -INFINITY : it->second);
  }
  for (size_t c = 0; c < task.choices.size() && c < f.final.choice_logprobs.size(); ++c)
    r.choice_logprobs.emplace_back(task.choices[c], f.final.choice_logprobs[c]);
  r.top_logprobs = task.logprobs;
  if (task.logprobs >= 0) r.token_logprobs = f.logprobs;
  return r;
}

// Questions about one image run one after another (in input order), images in the order they first appear: the
// engine then computes each image's prefix once and its other questions reuse it, however the input
// scatters them. Records are written as requests finish, so the output order never followed the input anyway.
void group_by_image(std::vector<const BatchTask*>* todo) {
  std::unordered_map<std::string, size_t> first_seen;
  for (const BatchTask* task : *todo) first_seen.emplace(task->image_path, first_seen.size());
  std::stable_sort(todo->begin(), todo->end(), [&](const BatchTask* a, const BatchTask* b) {
    return first_seen.at(a->image_path) < first_seen.at(b->image_path);
  });
}

}  // namespace

BatchJobSummary run_batch_job(InferenceService& service, const TaskList& list, const std::string& output_path,
                              const BatchJobOptions& options) {
  BatchJobSummary summary;
  const ExistingResults existing = resume_results_file(output_path, options.retry_failed);

  std::vector<const BatchTask*> todo;
  for (const auto& task : list.tasks) {
    if (existing.done.count(task.key)) {
      summary.already_done++;
      summary.earlier_failed += existing.failed.count(task.key);
    } else {
      todo.push_back(&task);
    }
  }
  group_by_image(&todo);
  summary.total = int64_t(list.tasks.size());
  if (summary.already_done > 0)
    std::fprintf(stderr, "resume: %lld of %lld tasks already in %s\n", (long long)summary.already_done,
                 (long long)summary.total, output_path.c_str());

  ResultsWriter writer(output_path);
  std::unique_ptr<LogitsDump> logits_dump;
  if (!options.dump_logits_path.empty()) logits_dump = std::make_unique<LogitsDump>(options.dump_logits_path);
  Progress progress(int64_t(todo.size()), options.progress_terminal, options.progress_interval_s);
  RateWindow rate(60.0);
  const double start = now_seconds();

  // Tasks with URL images are downloaded ahead (in submission order) while earlier tasks run.
  std::vector<std::string> urls(todo.size());
  for (size_t i = 0; i < todo.size(); ++i)
    if (todo[i]->problem.empty() && is_fetch_url(todo[i]->image_path)) urls[i] = todo[i]->image_path;
  FetchOptions fetch = options.fetch;
  fetch.max_bytes = options.max_image_bytes;
  Prefetcher prefetcher(std::move(urls), fetch, options.prefetch_window, options.fetch_parallel);

  // Local files and data: URLs as every door reads them (requests/request_images.h): the tasks file is the
  // user's own, so any path.
  MediaOptions local_media;
  local_media.allowed_media_dir = "/";
  local_media.max_bytes = options.max_image_bytes;
  PumpCallbacks callbacks;
  callbacks.make_request = [&](size_t i, Request* request, std::string* error) {
    const BatchTask& task = *todo[i];
    if (!task.problem.empty()) {
      *error = task.problem;
      return false;
    }
    if (is_fetch_url(task.image_path)) {
      Prefetched fetched = prefetcher.take(i);
      if (fetched.error.empty() && fetched.bytes.empty())
        fetched.error = "empty image at " + redact_url(task.image_path);
      if (!fetched.error.empty()) throw RequestError(ErrorKind::InvalidImage, fetched.error);
      request->images.push_back({std::move(fetched.bytes), redact_url(task.image_path)});
    } else if (!task.image_path.empty()) {  // a path (relative ones resolved when read) or a data: URL
      const bool data_url = task.image_path.rfind("data:", 0) == 0;
      request->images.push_back(load_request_image(
          data_url ? task.image_path : std::filesystem::absolute(task.image_path).string(), local_media));
    }
    request->prompt = task.prompt;
    request->system = task.system;
    request->params = task.sampling;
    request->params.max_tokens = task.max_tokens;
    request->params.answers = task.answers;
    request->params.choices = task.choices;
    request->params.top_logprobs = task.logprobs < 0 ? 0 : std::max(1, task.logprobs);
    request->params.return_first_logits = logits_dump != nullptr;
    request->tiling = task.tiling.value_or(options.tiling);
    request->max_tiles = task.max_tiles > 0 ? task.max_tiles : options.max_tiles;
    return true;
  };
  callbacks.on_finished = [&](std::vector<FinishedRequest>& finished) {
    std::string lines;
    std::vector<LogitsDump::Row> logit_rows;
    for (const auto& f : finished) {
      const BatchResult result = to_result(*todo[f.index], f);
      summary.failed += !result.error.empty();
      lines += result_line(result);
      if (logits_dump && result.error.empty() && !f.final.first_logits.empty())
        logit_rows.push_back({logits_row_key(result.id), &f.final.first_logits});
    }
    if (logits_dump) logits_dump->append(logit_rows);  // before the results: a done task has its row
    writer.append(lines);  // durable before it counts as done
    summary.ran += int64_t(finished.size());
    rate.add(now_seconds(), int64_t(finished.size()));
  };
  callbacks.on_tick = [&] {
    if (options.progress) progress.set_detail(engine_shares(service.stats()));
    if (options.progress) progress.update(summary.ran, summary.failed, rate.per_minute(now_seconds()), now_seconds());
  };
  pump_requests(service, todo.size(), options.concurrency, callbacks);
  summary.elapsed_s = now_seconds() - start;
  if (options.progress) progress.set_detail(engine_shares(service.stats()));
  if (options.progress) progress.finish(summary.ran, summary.failed, summary.elapsed_s);
  return summary;
}

}  // namespace fovea
