#include "jobs/batch_job.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/local_file.h"
#include "jobs/chat_messages.h"
#include "jobs/job_loop.h"
#include "jobs/logits_dump.h"
#include "requests/request_images.h"

namespace fovea {
namespace {

// The tasks format's plug-in: one BatchTask in, one {"id", "text", ...} record out.
class TaskItem final : public JobItem {
 public:
  explicit TaskItem(const BatchTask& task) : task_(task) {}
  const char* key_field() const override { return "id"; }
  const std::string& key() const override { return task_.key; }
  std::string group() const override { return task_.image_path; }
  std::string prefetch_url() const override {
    if (!task_.problem.empty()) return "";
    if (!task_.messages.empty()) return first_remote_image(nlohmann::json::parse(task_.messages));
    return is_fetch_url(task_.image_path) ? task_.image_path : "";
  }

  bool make_request(const JobContext& context, Request* request, std::string* error) override {
    if (!task_.problem.empty()) {
      *error = task_.problem;
      return false;
    }
    if (!task_.messages.empty()) {
      if (!read_messages(context, request, error)) return false;
    } else {
      if (!task_.image_path.empty()) {
        ImageInput image;
        if (!load_image(context, &image, error)) return false;
        request->images.push_back(std::move(image));
      }
      request->prompt = task_.prompt;
      request->system = task_.system;
    }
    request->params = task_.sampling;
    request->params.max_tokens = task_.max_tokens;
    request->params.answers = task_.answers;
    request->params.choices = task_.choices;
    request->params.top_logprobs = task_.logprobs < 0 ? 0 : std::max(1, task_.logprobs);
    request->params.return_first_logits = context.dump_logits;
    request->tiling = task_.tiling.value_or(context.options.tiling);
    request->max_tiles = task_.max_tiles > 0 ? task_.max_tiles : context.options.max_tiles;
    return true;
  }

  Record render(const JobContext&, const FinishedRequest& f) const override {
    BatchResult r;
    r.id = task_.id;
    r.question_index = task_.question_index;
    r.text = f.text;
    r.tokens = f.tokens;
    r.error = f.final.error;
    if (r.error.empty() && f.final.finish_reason == "error") r.error = "failed";
    if (r.error.empty() && f.final.finish_reason == "cancelled") r.error = "cancelled";
    // A failure without a kind (cancelled, lost) counts as ours.
    if (!r.error.empty())
      r.error_kind = error_kind_name(f.final.error_kind == ErrorKind::None ? ErrorKind::Internal : f.final.error_kind);
    r.ms = f.final.ms;
    r.has_answers = !task_.answers.empty();
    for (const auto& answer : task_.answers) {
      const auto it = f.final.answer_logprobs.find(answer);
      r.answer_logprobs.emplace_back(answer, it == f.final.answer_logprobs.end() ? -INFINITY : it->second);
    }
    for (size_t c = 0; c < task_.choices.size() && c < f.final.choice_logprobs.size(); ++c)
      r.choice_logprobs.emplace_back(task_.choices[c], f.final.choice_logprobs[c]);
    r.top_logprobs = task_.logprobs;
    if (task_.logprobs >= 0) r.token_logprobs = f.logprobs;
    return {result_line(r), !r.error.empty(), logits_row_key(r.id)};
  }

 private:
  // An image that cannot be had is the task's fault and, as in every door, of kind InvalidImage
  // (requests/request_images.h): thrown as a RequestError, which the pump reports with its kind.
  bool load_image(const JobContext& context, ImageInput* image, std::string*) const {
    if (task_.image_path.rfind("data:", 0) == 0) {
      MediaOptions media;
      media.max_bytes = context.options.max_image_bytes;
      *image = load_request_image(task_.image_path, media);
      return true;
    }
    image->label = task_.image_path;
    if (!is_fetch_url(task_.image_path)) {
      try {
        LocalFileLimits limits;
        limits.max_bytes = context.options.max_image_bytes;
        image->bytes = read_local_file(task_.image_path, limits, "image file");
        return true;
      } catch (const LocalFileError& e) {
        throw RequestError(ErrorKind::InvalidImage, e.what());
      }
    }
    image->label = redact_url(task_.image_path);
    Prefetched fetched = context.prefetched ? std::move(*context.prefetched)
                                            : fetch_image(task_.image_path, context.options);
    if (fetched.error.empty() && fetched.bytes.empty()) fetched.error = "empty image at " + image->label;
    if (!fetched.error.empty()) throw RequestError(ErrorKind::InvalidImage, fetched.error);
    image->bytes = std::move(fetched.bytes);
    return true;
  }

  // "messages": the OpenAI parser's system, prompt and images; relative image paths as "image" resolves them.
  bool read_messages(const JobContext& context, Request* request, std::string* error) const {
    const auto beside_tasks = [this](const std::string& path) { return resolve_task_image(path, task_.base_dir); };
    openai::ApiError refused;
    if (read_chat_messages(task_.messages, job_image_loader(context, prefetch_url(), beside_tasks), request, &refused))
      return true;
    if (refused.code == error_kind_name(ErrorKind::InvalidImage))
      throw RequestError(ErrorKind::InvalidImage, refused.message);
    *error = refused.message;
    return false;
  }

  const BatchTask& task_;
};

}  // namespace

Prefetched fetch_image(const std::string& url, const BatchJobOptions& options) {
  FetchOptions fetch = options.fetch;
  fetch.max_bytes = options.max_image_bytes;
  Prefetched out;
  try {
    out.bytes = fetch_bytes(url, fetch);
  } catch (const FetchError& e) {
    out.error = e.what();
  }
  return out;
}

BatchJobSummary run_batch_job(InferenceService& service, const TaskList& list, const std::string& output_path,
                              const BatchJobOptions& options) {
  std::vector<std::unique_ptr<JobItem>> owned;
  std::vector<JobItem*> items;
  for (const auto& task : list.tasks) {
    owned.push_back(std::make_unique<TaskItem>(task));
    items.push_back(owned.back().get());
  }
  return run_job_items(service, items, output_path, options);
}

std::unique_ptr<JobItem> make_task_item(const BatchTask& task) { return std::make_unique<TaskItem>(task); }

}  // namespace fovea
