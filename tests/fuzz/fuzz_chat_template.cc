// Chat prompts from hostile system and user text and image tile counts, for every template: the ids must stay
// inside the vocabulary and the image spans must point at <IMG_CONTEXT> runs of the right length.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>

#include "fuzz_text_setup.h"
#include "model/chat_template.h"

// The demo checkpoint is written before fuzzing starts, so its cost is not charged to the first input.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)fovea::fuzz::text_setup();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& setup = fovea::fuzz::text_setup();
  FuzzedDataProvider in(data, size);
  const std::string system = in.ConsumeRandomLengthString(4096);
  std::vector<int> tiles(in.ConsumeIntegralInRange<int>(0, 4));
  for (int& t : tiles) t = in.ConsumeIntegralInRange<int>(0, 14);
  const std::string user = in.ConsumeRemainingBytesAsString();
  fovea::ModelDesc desc = setup.desc;
  for (const auto kind : {fovea::ChatTemplateKind::InternLM2Chat, fovea::ChatTemplateKind::InternVL2_5,
                          fovea::ChatTemplateKind::Hermes2}) {
    desc.chat_template = kind;
    fovea::fuzz::expect_only_fovea_errors([&] {
      const fovea::PromptIds p = fovea::build_chat_prompt(desc, *setup.sentencepiece, system, user, tiles);
      for (int32_t id : p.ids)
        if (id < 0 || id >= setup.sentencepiece->vocab_size()) std::abort();
      if (p.image_spans.size() != tiles.size()) std::abort();
      for (const auto& [start, count] : p.image_spans) {
        if (start < 0 || count < 0 || size_t(start) + size_t(count) > p.ids.size()) std::abort();
        for (int32_t i = start; i < start + count; ++i)
          if (p.ids[size_t(i)] != desc.image_token_id) std::abort();
      }
    });
  }
  return 0;
}
