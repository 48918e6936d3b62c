// Choices (GenerationParams::choices): the request is scored, not sampled. A choice's total log-prob is the sum
// over its tokens of log p(token | prompt, the choice's earlier tokens). Every distinct *context* (the prompt
// plus a proper prefix of some choice; the prompt alone is one) becomes one scoring sequence whose last row
// gives the log-probs of every token that follows that context in some choice (SeqChunk::answer_ids, the
// runner's log-softmax gather). The scoring sequences share the prompt's KV through the prefix cache, the first
// computing it and the others waiting for it (in-flight sharing), so n single-token choices cost what one
// request costs and a k-token choice adds k - 1 short sequences.
#include <chrono>
#include <limits>
#include <map>

#include "core/error.h"
#include "engine/scheduler.h"

namespace fovea {

void Scheduler::add_choices(PreparedRequest request) {
  auto group = std::make_shared<ChoiceGroup>();
  group->id = request.id;
  group->submitted = request.submitted;
  group->prompt_len = int(request.prompt.size());
  group->return_prompt_token_ids = request.params.return_prompt_token_ids;
  group->texts = request.params.choices;
  group->choice_ids = std::move(request.choice_ids);
  std::string problem;
  ErrorKind kind = ErrorKind::InvalidRequest;
  if (group->texts.size() != group->choice_ids.size())
    problem = str(group->texts.size(), " choices but ", group->choice_ids.size(), " tokenised");
  if (!request.params.answers.empty()) problem = "\"choices\" and \"answers\" cannot be combined";

  std::map<std::vector<int32_t>, int> context_of;
  std::vector<std::vector<int32_t>> contexts;
  for (const std::vector<int32_t>& choice : group->choice_ids) {
    if (choice.empty()) problem = "a choice encodes to no tokens";
    std::vector<std::pair<int, int>> path;
    for (size_t i = 0; i < choice.size(); ++i) {
      const std::vector<int32_t> context(choice.begin(), choice.begin() + std::ptrdiff_t(i));
      const auto [it, inserted] = context_of.emplace(context, int(contexts.size()));
      if (inserted) {
        contexts.push_back(context);
        group->next_ids.emplace_back();
      }
      std::vector<int32_t>& next = group->next_ids[size_t(it->second)];
      int index = 0;
      while (index < int(next.size()) && next[size_t(index)] != choice[i]) ++index;
      if (index == int(next.size())) next.push_back(choice[i]);
      path.emplace_back(it->second, index);
    }
    group->path.push_back(std::move(path));
  }
  // One scoring sequence per context; each is checked like any request (the longest must fit max_position).
  std::vector<PreparedRequest> scoring;
  for (size_t k = 0; k < contexts.size() && problem.empty(); ++k) {
    PreparedRequest part;
    part.id = request.id;
    part.prompt = request.prompt;
    part.prompt.insert(part.prompt.end(), contexts[k].begin(), contexts[k].end());
    part.images = request.images;  // the pixel tensors are shared, not copied
    part.params.max_tokens = 1;
    part.answer_ids = group->next_ids[k];
    part.submitted = request.submitted;
    problem = check_limits(part, &kind);
    scoring.push_back(std::move(part));
  }
  if (!problem.empty()) {
    emit_final_without_sequence(request, "error", problem, kind);
    return;
  }
  group->next_logprobs.resize(contexts.size());
  group->unscored = int(contexts.size());
  for (size_t k = 0; k < scoring.size(); ++k) {
    std::unique_ptr<Sequence> seq = make_sequence(std::move(scoring[k]));
    seq->decoder.reset();  // no text of its own
    seq->stop_matcher.reset();
    seq->choice_group = group;
    seq->choice_context = int(k);
    waiting_.push_back(std::move(seq));
  }
}

// A scoring sequence ended (its resources are already released). When the last one is scored the request's
// final event goes out; when one fails or is cancelled, so does the request, and its other sequences stop.
void Scheduler::on_choice_scored(Sequence& seq, const std::string& reason, const std::string& error,
                                 ErrorKind kind) {
  ChoiceGroup& group = *seq.choice_group;
  if (group.done) return;
  RequestEvent event;
  event.finished = true;
  event.prompt_tokens = group.prompt_len;
  if (group.return_prompt_token_ids)
    event.prompt_token_ids.assign(seq.tokens.begin(), seq.tokens.begin() + group.prompt_len);
  if (reason == "stop" && error.empty()) {
    group.next_logprobs[size_t(seq.choice_context)] = std::move(seq.choice_logprobs);
    if (--group.unscored > 0) return;
    size_t best = 0;
    for (size_t c = 0; c < group.path.size(); ++c) {
      float total = 0.0f;
      for (const auto& [context, index] : group.path[c]) total += group.next_logprobs[size_t(context)][size_t(index)];
      event.choice_logprobs.push_back(total);
      if (total > event.choice_logprobs[best]) best = c;  // ties: the earlier choice
    }
    event.text_delta = group.texts[best];
    event.token_delta = group.choice_ids[best];
    event.completion_tokens = int(group.choice_ids[best].size());
    event.finish_reason = "stop";
  } else {
    const auto stop = [&](std::unique_ptr<Sequence>& other) {
      if (!other || other->choice_group != seq.choice_group || other->finished) return;
      release_resources(*other);
      other->finished = true;  // dropped from its queue by the caller (drop_finished)
    };
    for (auto& other : waiting_) stop(other);
    for (auto& other : running_) stop(other);
    event.finish_reason = reason;
    event.error = error;
    event.error_kind = reason == "error" ? kind : ErrorKind::None;
  }
  group.done = true;
  event.ms = std::chrono::duration<double, std::milli>(Clock::now() - group.submitted).count();
  sink_(group.id, event);
}

}  // namespace fovea
