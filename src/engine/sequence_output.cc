// Scheduler output side: choosing the next token, text and stop handling, final events, freeing resources.
#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "engine/scheduler.h"

namespace fovea {
namespace {

// The runner's argmax when nothing changes the logits; else the penalised logits, greedy or sampled.
int32_t choose_token(Sequence& seq, const SeqResult& result) {
  const GenerationParams& p = seq.params;
  if (p.temperature <= 0.0f && !seq.penalties.active()) return result.argmax;
  const SamplingParams sampling = sampling_of(p);
  if (!seq.penalties.active()) return sample_token(result.logits, sampling, seq.rng);
  std::vector<float> logits = result.logits;
  seq.penalties.apply(logits);
  return sample_token(logits, sampling, seq.rng);
}

}  // namespace

void Scheduler::on_sampled(Sequence& seq, const SeqChunk& chunk, const SeqResult& result) {
  const int vocab = runner_.desc().llm.vocab;
  if (seq.choice_group) {  // a scoring sequence: the log-probs of the tokens that may follow are all it wants
    FOVEA_CHECK(result.answer_logprobs.size() == chunk.answer_ids.size(), "runner returned ",
                result.answer_logprobs.size(), " choice log-probs for ", chunk.answer_ids.size(), " tokens");
    seq.choice_logprobs = result.answer_logprobs;
    finish(seq, "stop", "", ErrorKind::None, {});
    return;
  }
  RequestEvent event;
  if (!chunk.answer_ids.empty()) {
    FOVEA_CHECK(result.answer_logprobs.size() == chunk.answer_ids.size(), "runner returned ",
                result.answer_logprobs.size(), " answer log-probs for ", chunk.answer_ids.size(), " answers");
    for (size_t k = 0; k < seq.params.answers.size(); ++k)
      seq.answer_logprobs[seq.params.answers[k]] = result.answer_logprobs[k];
  }
  if (chunk.want_logits)
    FOVEA_CHECK(int(result.logits.size()) == vocab, "runner returned ", result.logits.size(), " logits, vocab is ",
                vocab);
  if (seq.generated == 0 && seq.params.return_first_logits) seq.first_logits = result.logits;
  const int32_t token = choose_token(seq, result);
  FOVEA_CHECK(token >= 0 && token < vocab, "sampled token ", token, " outside the vocabulary of ", vocab);
  if (seq.params.top_logprobs > 0)
    event.logprob_delta.push_back(
        TokenLogprob{token, token_logprob(result.logits, token), top_logprobs(result.logits, seq.params.top_logprobs)});

  seq.tokens.push_back(token);
  seq.penalties.add_output(token);
  ++seq.generated;
  ++counters_.completion_tokens;
  event.token_delta.push_back(token);

  std::string reason;
  if (std::find(seq.stop_ids.begin(), seq.stop_ids.end(), token) != seq.stop_ids.end()) {
    reason = "stop";  // the stop token's text is not part of the output
  } else if (seq.decoder) {
    event.text_delta = seq.stop_matcher->push(seq.decoder->push(token));
    if (seq.stop_matcher->stopped()) reason = "stop";
  }
  if (reason.empty() && seq.generated >= seq.max_tokens) reason = "length";
  if (reason.empty()) {
    sink_(seq.id, event);
    return;
  }
  if (seq.decoder && !seq.stop_matcher->stopped()) {
    event.text_delta += seq.stop_matcher->push(seq.decoder->flush());
    if (seq.stop_matcher->stopped()) reason = "stop";
    event.text_delta += seq.stop_matcher->flush();
  }
  finish(seq, reason, "", ErrorKind::None, std::move(event));
}

void Scheduler::finish(Sequence& seq, const std::string& reason, const std::string& error, ErrorKind error_kind,
                       RequestEvent event) {
  release_resources(seq);
  seq.finished = true;
  if (seq.choice_group) {
    on_choice_scored(seq, reason, error, error_kind);
    return;
  }
  event.finished = true;
  event.finish_reason = reason;
  event.error = error;
  event.error_kind = reason == "error" ? error_kind : ErrorKind::None;
  event.answer_logprobs = seq.answer_logprobs;
  event.first_logits = std::move(seq.first_logits);
  event.prompt_tokens = seq.prompt_len;
  if (seq.params.return_prompt_token_ids)
    event.prompt_token_ids.assign(seq.tokens.begin(), seq.tokens.begin() + seq.prompt_len);
  event.completion_tokens = seq.generated;
  event.ms = std::chrono::duration<double, std::milli>(Clock::now() - seq.submitted).count();
  sink_(seq.id, event);
}

void Scheduler::fail_sequence(Sequence* seq, const std::string& error, ErrorKind kind) {
  if (seq->finished) return;
  finish(*seq, "error", error, kind, {});
}

void Scheduler::release_resources(Sequence& seq) {
  blocks_.release(seq.blocks);
  seq.blocks.clear();
  for (ImageSlot& slot : seq.images) {
    if (slot.handle >= 0) vision_cache_.unpin(slot.key);
    slot.handle = -1;
    slot.pixels = Tensor();
  }
}

void Scheduler::emit_final_without_sequence(const PreparedRequest& request, const std::string& reason,
                                            const std::string& error, ErrorKind kind) {
  RequestEvent event;
  event.finished = true;
  event.finish_reason = reason;
  event.error = error;
  event.error_kind = reason == "error" ? kind : ErrorKind::None;
  event.prompt_tokens = int(request.prompt.size());
  if (request.params.return_prompt_token_ids) event.prompt_token_ids = request.prompt;
  event.ms = std::chrono::duration<double, std::milli>(Clock::now() - request.submitted).count();
  sink_(request.id, event);
}

}  // namespace fovea
