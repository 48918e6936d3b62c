#include "batch.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>

namespace nb = nanobind;

namespace fovea::py {
namespace {

// Generated text may end inside a UTF-8 sequence (one byte-fallback token): replace, never raise.
nb::str utf8(const std::string& s) {
  return nb::steal<nb::str>(PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "replace"));
}

}  // namespace

Batch::Batch(std::shared_ptr<InferenceService> service, std::vector<Job> jobs, const BatchOptions& options)
    : service_(service), stream_(std::make_unique<JobStream>(std::move(service), std::move(jobs), options)) {}

Batch::~Batch() {
  nb::gil_scoped_release release;  // in-flight requests finish on engine threads, which never need the GIL
  stream_.reset();
}

nb::object Batch::next() {
  std::vector<StreamItem> got;
  bool done = false;  // once the stream said so, every later call returns None at once
  while (got.empty() && !done) {
    {
      nb::gil_scoped_release release;
      done = stream_->wait(std::chrono::milliseconds(100), &got);
    }
    if (got.empty() && !done && PyErr_CheckSignals() != 0) throw nb::python_error();
  }
  if (got.empty()) return nb::none();
  nb::list out;
  for (const StreamItem& item : got) std::visit([&](const auto& x) { out.append(convert(x)); }, item);
  return out;
}

nb::list Batch::convert(const std::vector<TokenLogprob>& logprobs) const {
  nb::list out;
  for (const TokenLogprob& lp : logprobs) {
    nb::list top;
    for (const auto& [token, value] : lp.top)
      top.append(nb::make_tuple(token, utf8(service_->token_text(token)), value));
    out.append(nb::make_tuple(lp.token, utf8(service_->token_text(lp.token)), lp.logprob, top));
  }
  return out;
}

nb::tuple Batch::convert(const StreamDelta& d) const {
  if (d.restart) return nb::make_tuple("restart", d.index);
  nb::list tokens;
  for (int32_t t : d.tokens) tokens.append(t);
  return nb::make_tuple("delta", d.index, utf8(d.text), tokens, convert(d.logprobs));
}

nb::tuple Batch::convert(const FinishedRequest& f) const {
  const RequestEvent& ev = f.final;
  nb::list tokens, prompt_ids, choices;
  for (int32_t t : f.tokens) tokens.append(t);
  for (int32_t t : ev.prompt_token_ids) prompt_ids.append(t);
  for (float value : ev.choice_logprobs) choices.append(value);
  nb::dict answers;
  for (const auto& [answer, value] : ev.answer_logprobs) answers[utf8(answer)] = value;
  std::string error = ev.error;
  if (error.empty() && (ev.finish_reason == "error" || ev.finish_reason == "cancelled")) error = ev.finish_reason;
  // A failure without a kind (cancelled by the caller, lost by the pump) counts as ours.
  const ErrorKind kind = error.empty()                     ? ErrorKind::None
                         : ev.error_kind == ErrorKind::None ? ErrorKind::Internal
                                                            : ev.error_kind;
  const nb::object kind_name = kind == ErrorKind::None ? nb::none() : nb::object(nb::str(error_kind_name(kind)));
  return nb::make_tuple(f.index, utf8(f.text), tokens, convert(f.logprobs), answers, ev.finish_reason,
                        error.empty() ? nb::none() : nb::object(utf8(error)), ev.prompt_tokens, ev.completion_tokens,
                        ev.ms, choices, kind_name, prompt_ids);
}

}  // namespace fovea::py
