#include "runtime/simple_generate.h"

#include <algorithm>

namespace fovea {
namespace {

// (image index, row) of every prompt position, or (-1, -1) for text.
std::vector<std::pair<int, int>> map_image_rows(const std::vector<int32_t>& prompt, const std::vector<Tensor>& images,
                                                const ModelDesc& desc) {
  std::vector<std::pair<int, int>> rows(prompt.size(), {-1, -1});
  const int per_tile = desc.vision.tokens_per_tile();
  size_t image = 0;
  int row = 0;
  for (size_t p = 0; p < prompt.size(); ++p) {
    if (prompt[p] != desc.image_token_id) continue;
    FOVEA_CHECK(image < images.size(), "simple_generate: the prompt has more image tokens than the images give");
    rows[p] = {int(image), row};
    if (++row == int(images[image].dim(0)) * per_tile) {
      ++image;
      row = 0;
    }
  }
  FOVEA_CHECK(image == images.size() && row == 0, "simple_generate: ", images.size(),
              " images but the prompt's image tokens cover ", image, " of them");
  return rows;
}

}  // namespace

std::vector<VisionRef> vision_refs_for_range(const std::vector<std::pair<int, int>>& image_rows,
                                             const std::vector<int64_t>& handles, int begin, int end) {
  std::vector<VisionRef> refs;
  for (int p = begin; p < end; ++p) {
    const auto [image, row] = image_rows[size_t(p)];
    if (image < 0) continue;
    VisionRef* last = refs.empty() ? nullptr : &refs.back();
    const bool extends = last && last->handle == handles[size_t(image)] && last->row_begin + last->rows == row &&
                         last->chunk_offset + last->rows == p - begin;
    if (extends) {
      ++last->rows;
    } else {
      refs.push_back(VisionRef{handles[size_t(image)], row, 1, p - begin});
    }
  }
  return refs;
}

SimpleGenerateResult simple_generate(ModelRunner& runner, const std::vector<int32_t>& prompt,
                                     const std::vector<Tensor>& images, const SimpleGenerateOptions& opts) {
  const ModelDesc& desc = runner.desc();
  FOVEA_CHECK(!prompt.empty() && opts.max_new_tokens > 0, "simple_generate: empty prompt or max_new_tokens 0");
  const auto image_rows = map_image_rows(prompt, images, desc);
  const int total = int(prompt.size()) + opts.max_new_tokens;
  const int blocks = (total + runner.block_size() - 1) / runner.block_size();
  FOVEA_CHECK(blocks <= runner.num_kv_blocks(), "simple_generate: ", total, " positions need ", blocks,
              " KV blocks, the runner has ", runner.num_kv_blocks());
  std::vector<int32_t> block_table(static_cast<size_t>(blocks));
  for (int b = 0; b < blocks; ++b) block_table[size_t(b)] = b;
  const std::vector<int64_t> handles = images.empty() ? std::vector<int64_t>{} : runner.encode_images(images);
  const std::vector<int32_t>& stop = opts.stop_ids.empty() ? desc.eos_ids : opts.stop_ids;

  SimpleGenerateResult result;
  try {
    std::vector<int> starts{0};
    for (int s : opts.prefill_splits) {
      FOVEA_CHECK(s > starts.back() && s < int(prompt.size()), "simple_generate: bad prefill split ", s);
      starts.push_back(s);
    }
    starts.push_back(int(prompt.size()));
    SeqResult last;
    for (size_t c = 0; c + 1 < starts.size(); ++c) {
      SeqChunk chunk;
      chunk.tokens.assign(prompt.begin() + starts[c], prompt.begin() + starts[c + 1]);
      chunk.start_pos = starts[c];
      chunk.block_table = block_table;
      chunk.vision = vision_refs_for_range(image_rows, handles, starts[c], starts[c + 1]);
      chunk.sample = c + 2 == starts.size();
      if (chunk.sample) {
        chunk.answer_ids = opts.answer_ids;
        chunk.want_logits = opts.want_logits;
      }
      last = runner.step({chunk})[0];
    }
    result.answer_logprobs = last.answer_logprobs;
    for (int32_t pos = int32_t(prompt.size());;) {
      result.tokens.push_back(last.argmax);
      if (opts.want_logits) result.logits.push_back(std::move(last.logits));
      const bool stopped = std::find(stop.begin(), stop.end(), last.argmax) != stop.end();
      if (stopped || int(result.tokens.size()) == opts.max_new_tokens) break;
      SeqChunk chunk;
      chunk.tokens = {last.argmax};
      chunk.start_pos = pos++;
      chunk.block_table = block_table;
      chunk.sample = true;
      chunk.want_logits = opts.want_logits;
      last = runner.step({chunk})[0];
    }
  } catch (...) {
    for (int64_t h : handles) runner.release_image(h);
    throw;
  }
  for (int64_t h : handles) runner.release_image(h);
  return result;
}

}  // namespace fovea
