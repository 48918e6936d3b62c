// fovea._fovea, the native half of the Python package (nanobind): an engine handle over InferenceService, the
// request model (GenerationParams, jobs built from Python's Requests), a Batch per generate()/stream() call
// (batch.h) and the model's tokenizer. Everything else (argument checking, images, SamplingParams, vLLM-style
// outputs, progress, asyncio) lives in python/fovea/*.py.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <filesystem>
#include <memory>
#include <mutex>

#include "batch.h"
#include "core/local_file.h"
#include "engine/service.h"
#include "engine/stats_fields.h"
#include "engine/stats_json.h"
#include "jobs/chat_messages.h"
#include "model/model_desc.h"
#include "media/media.h"
#include "openai/protocol.h"
#include "model/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace nb = nanobind;

namespace fovea::py {
namespace {

TilingPolicy parse_tiling(const std::string& name) {
  if (name == "official") return TilingPolicy::Official;
  if (name == "compact") return TilingPolicy::Compact;
  throw nb::value_error("tiling must be 'official' or 'compact'");
}

// OpenAI-style chat messages through the server's own parser, so `messages` mean here what they mean to
// `fovea serve`. The caller runs this process: local paths are read at once; http(s):// and s3:// images are
// left to the Batch, which downloads them ahead of the engine like Request(image=URL).
void apply_messages(const std::string& messages_json, int64_t max_image_bytes, Job* job) {
  MediaOptions media;
  media.allowed_media_dir = "/";
  media.max_bytes = max_image_bytes;
  std::vector<std::string> urls;  // per image, in order: the URL when the Batch fetches it
  const auto loader = [&](const std::string& url) {
    urls.push_back(is_fetch_url(url) ? url : "");
    if (is_fetch_url(url)) return std::string();
    // A plain relative path is the caller's, relative to its working directory (as Request(image=path)).
    const bool relative = !url.empty() && url[0] != '/' && url.find(':') == std::string::npos;
    return load_image_url(relative ? std::filesystem::absolute(url).string() : url, media);
  };
  openai::ApiError error;
  if (!read_chat_messages(messages_json, loader, &job->request, &error)) {
    job->error = error.message;
    if (error.code == error_kind_name(ErrorKind::InvalidImage)) job->error_kind = ErrorKind::InvalidImage;
    return;
  }
  job->urls.insert(job->urls.end(), urls.begin(), urls.end());
}

Job make_job(const std::vector<nb::bytes>& images, const std::vector<std::string>& labels, const std::string& prompt,
             const std::string& system, const std::string& messages_json, const GenerationParams& params,
             const std::string& tiling, int max_tiles, int64_t max_image_bytes, const std::string& error,
             const std::string& error_kind) {
  Job job;
  job.error = error;
  if (error_kind == error_kind_name(ErrorKind::InvalidImage)) job.error_kind = ErrorKind::InvalidImage;
  for (size_t i = 0; i < images.size(); ++i) {
    const std::string label = i < labels.size() ? labels[i] : "";
    const bool url = images[i].size() == 0 && is_fetch_url(label);
    job.request.images.push_back({std::string(images[i].c_str(), images[i].size()), url ? redact_url(label) : label});
    job.urls.push_back(url ? label : "");
  }
  job.request.prompt = prompt;
  job.request.system = system;
  if (!messages_json.empty() && job.error.empty()) apply_messages(messages_json, max_image_bytes, &job);
  job.request.params = params;
  job.request.tiling = parse_tiling(tiling);
  job.request.max_tiles = max_tiles;
  return job;
}

// A local image file through the one reader every door uses (core/local_file.h): a FIFO, device or directory
// is refused at once instead of blocking the caller, the size is checked before reading. OSError on refusal,
// so a Request's Result carries it like any unreadable file.
nb::bytes read_image_file(const std::string& path, int64_t max_bytes) {
  std::string bytes;
  {
    nb::gil_scoped_release release;
    try {
      LocalFileLimits limits;
      limits.max_bytes = max_bytes;
      bytes = read_local_file(path, limits, "image file");
    } catch (const LocalFileError& e) {
      nb::gil_scoped_acquire acquire;
      PyErr_SetString(PyExc_OSError, e.what());
      throw nb::python_error();
    }
  }
  return nb::bytes(bytes.data(), bytes.size());
}

// The model's tokenizer and chat template, loaded from the model directory on first use (Engine.tokenizer).
class TokenizerHandle {
 public:
  explicit TokenizerHandle(const std::string& model_dir) {
    nb::gil_scoped_release release;
    desc_ = load_model_desc(model_dir);
    tokenizer_ = load_tokenizer(model_dir);
  }
  std::vector<int32_t> encode(const std::string& text, bool allow_special) const {
    return tokenizer_->encode(text, allow_special);
  }
  nb::str decode(const std::vector<int32_t>& ids, bool skip_special) const {
    const std::string text = tokenizer_->decode(ids, skip_special);
    return nb::steal<nb::str>(PyUnicode_DecodeUTF8(text.data(), Py_ssize_t(text.size()), "replace"));
  }
  // The prompt the engine builds for a text-only turn (system "" -> the template's default).
  std::vector<int32_t> chat_ids(const std::string& system, const std::string& user) const {
    return build_chat_prompt(desc_, *tokenizer_, system, user, {}).ids;
  }
  int32_t token_id(const std::string& piece) const { return tokenizer_->token_id(piece); }
  int vocab_size() const { return tokenizer_->vocab_size(); }
  int32_t bos_id() const { return desc_.bos_id; }
  std::vector<int32_t> eos_ids() const { return std::vector<int32_t>(desc_.eos_ids.begin(), desc_.eos_ids.end()); }

 private:
  ModelDesc desc_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

// (system, user text, image count) of OpenAI-style messages as the engine reads them; images are not loaded.
std::tuple<std::string, std::string, int> chat_parts(const std::string& messages_json) {
  openai::ChatRequest chat;
  openai::ApiError error;
  const auto no_load = [](const std::string&) { return std::string(); };
  if (!openai::parse_chat_request("{\"messages\": " + messages_json + "}", openai::ParseOptions{}, no_load, &chat,
                                  &error))
    throw nb::value_error(error.message.c_str());
  return {chat.request.system, chat.request.prompt, int(chat.request.images.size())};
}

class EngineHandle {
 public:
  // fail_engine / fail_after_steps: the test-only fault hook (engine/service.h); 0 steps, the default, injects nothing.
  explicit EngineHandle(const EngineConfig& config, size_t fail_engine = 0, int fail_after_steps = 0) {
    nb::gil_scoped_release release;  // loading takes seconds: let other Python threads run
    service_ = make_engine_service_with_failure(config, InjectedFailure{fail_engine, fail_after_steps});
  }
  Batch* submit(std::vector<Job> jobs, const BatchOptions& options) {
    return new Batch(live(), std::move(jobs), options);
  }
  std::string model_name() { return live()->model_name(); }
  std::string token_text(int32_t token) { return live()->token_text(token); }
  // Every EngineStats field as JSON text (engine/stats_json.h); fovea.Engine.stats() parses it.
  std::string stats_json_text() { return stats_json(live()->stats()).dump(); }
  // Finishes what is in flight and frees the model; Batches still alive keep the engine until they end.
  void close() {
    std::shared_ptr<InferenceService> service = std::move(service_);
    if (!service) return;
    nb::gil_scoped_release release;
    service->drain();
    service.reset();
  }

 private:
  std::shared_ptr<InferenceService> live() {
    if (!service_) throw nb::value_error("the engine is closed");
    return service_;
  }
  std::shared_ptr<InferenceService> service_;
};

// (name, kind, help) of every EngineStats field that Engine.stats() returns (engine/stats_fields.h).
std::vector<std::tuple<std::string, std::string, std::string>> stats_fields() {
  static const char* kKinds[] = {"counter", "gauge", "health", "label"};
  std::vector<std::tuple<std::string, std::string, std::string>> out;
  for (const StatField& field : engine_stats_fields()) out.emplace_back(field.name, kKinds[int(field.kind)], field.help);
  return out;
}

}  // namespace
}  // namespace fovea::py

NB_MODULE(_fovea, m) {
  using namespace fovea;
  using namespace fovea::py;
  m.doc() = "Native core of the fovea package (use fovea.Engine, not this module).";
  nb::class_<EngineConfig>(m, "EngineConfig")
      .def(nb::init<>())
      .def_rw("model_dir", &EngineConfig::model_dir)
      .def_rw("backend", &EngineConfig::backend)
      .def_rw("gpus", &EngineConfig::gpus)
      .def_rw("replicas", &EngineConfig::replicas)
      .def_rw("kv_blocks", &EngineConfig::kv_blocks)
      .def_rw("block_size", &EngineConfig::block_size)
      .def_rw("max_step_tokens", &EngineConfig::max_step_tokens)
      .def_rw("max_batch_seqs", &EngineConfig::max_batch_seqs)
      .def_rw("preprocess_threads", &EngineConfig::preprocess_threads)
      .def_rw("prefix_cache", &EngineConfig::prefix_cache)
      .def_rw("vision_cache_tiles", &EngineConfig::vision_cache_tiles)
      .def_rw("max_queue", &EngineConfig::max_queue)
      .def_rw("engine_failure_retries", &EngineConfig::engine_failure_retries)
      .def_rw("max_image_pixels", &EngineConfig::max_image_pixels)
      .def_rw("cuda_graphs", &EngineConfig::cuda_graphs)
      .def_rw("vit_graphs", &EngineConfig::vit_graphs)
      .def_rw("batch_invariant", &EngineConfig::batch_invariant)
      .def_rw("gpu_normalize", &EngineConfig::gpu_normalize)
      .def_rw("quantization", &EngineConfig::quantization)
      .def_rw("memory_limit_bytes", &EngineConfig::memory_limit_bytes)
      .def_rw("load_format", &EngineConfig::load_format)
      .def_rw("w4", &EngineConfig::w4);

  nb::class_<GenerationParams>(m, "GenerationParams")
      .def(nb::init<>())
      .def_rw("max_tokens", &GenerationParams::max_tokens)
      .def_rw("temperature", &GenerationParams::temperature)
      .def_rw("top_p", &GenerationParams::top_p)
      .def_rw("top_k", &GenerationParams::top_k)
      .def_rw("min_p", &GenerationParams::min_p)
      .def_rw("repetition_penalty", &GenerationParams::repetition_penalty)
      .def_rw("presence_penalty", &GenerationParams::presence_penalty)
      .def_rw("frequency_penalty", &GenerationParams::frequency_penalty)
      .def_rw("seed", &GenerationParams::seed)
      .def_rw("stop", &GenerationParams::stop)
      .def_rw("stop_token_ids", &GenerationParams::stop_token_ids)
      .def_rw("answers", &GenerationParams::answers)
      .def_rw("choices", &GenerationParams::choices)
      .def_rw("top_logprobs", &GenerationParams::top_logprobs)
      .def_rw("ignore_eos", &GenerationParams::ignore_eos)
      .def_rw("return_prompt_token_ids", &GenerationParams::return_prompt_token_ids);

  nb::class_<BatchOptions>(m, "BatchOptions")
      .def(nb::init<>())
      .def_rw("concurrency", &BatchOptions::concurrency)
      .def_rw("deltas", &BatchOptions::deltas)
      .def_rw("ca_file", &BatchOptions::ca_file)
      .def_rw("s3_endpoint", &BatchOptions::s3_endpoint)
      .def_rw("fetch_timeout", &BatchOptions::fetch_timeout)
      .def_rw("fetch_retries", &BatchOptions::fetch_retries)
      .def_rw("fetch_parallel", &BatchOptions::fetch_parallel)
      .def_rw("prefetch", &BatchOptions::prefetch)
      .def_rw("max_image_bytes", &BatchOptions::max_image_bytes);

  nb::class_<Job>(m, "Job");
  m.def("make_job", &make_job, nb::kw_only(), nb::arg("images"), nb::arg("labels"), nb::arg("prompt"),
        nb::arg("system"), nb::arg("messages_json"), nb::arg("params"), nb::arg("tiling"), nb::arg("max_tiles"),
        nb::arg("max_image_bytes"), nb::arg("error"), nb::arg("error_kind") = "invalid_request");
  m.def("chat_parts", &chat_parts, nb::arg("messages_json"));
  m.def("stats_fields", &stats_fields);
  m.def("read_image_file", &read_image_file, nb::arg("path"), nb::arg("max_bytes"));

  nb::class_<Batch>(m, "Batch")
      .def("next", &Batch::next)
      .def("cancel", &Batch::cancel)
      .def("__len__", &Batch::size);

  nb::class_<TokenizerHandle>(m, "TokenizerHandle")
      .def(nb::init<const std::string&>())
      .def("encode", &TokenizerHandle::encode, nb::arg("text"), nb::arg("allow_special"))
      .def("decode", &TokenizerHandle::decode, nb::arg("ids"), nb::arg("skip_special"))
      .def("chat_ids", &TokenizerHandle::chat_ids, nb::arg("system"), nb::arg("user"))
      .def("token_id", &TokenizerHandle::token_id)
      .def("vocab_size", &TokenizerHandle::vocab_size)
      .def("bos_id", &TokenizerHandle::bos_id)
      .def("eos_ids", &TokenizerHandle::eos_ids);

  nb::class_<EngineHandle>(m, "EngineHandle")
      .def(nb::init<const EngineConfig&, size_t, int>(), nb::arg("config"), nb::arg("_fail_engine") = 0,
           nb::arg("_fail_after_steps") = 0)
      .def("submit", &EngineHandle::submit, nb::arg("jobs"), nb::arg("options"), nb::rv_policy::take_ownership)
      .def("model_name", &EngineHandle::model_name)
      .def("token_text", &EngineHandle::token_text)
      .def("stats_json", &EngineHandle::stats_json_text)
      .def("close", &EngineHandle::close);
}
