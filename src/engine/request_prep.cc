#include "engine/request_prep.h"

#include <algorithm>
#include <exception>

#include "core/error.h"
#include "model/chat_template.h"

namespace fovea {

PreprocessOptions preprocess_options(const Request& request, const PrepContext& context) {
  const ModelDesc& desc = *context.desc;
  PreprocessOptions options;
  options.min_tiles = desc.min_dynamic_tiles;
  options.max_tiles =
      request.max_tiles > 0 ? std::min(request.max_tiles, desc.max_dynamic_tiles) : desc.max_dynamic_tiles;
  options.use_thumbnail = desc.use_thumbnail;
  options.compact = request.tiling == TilingPolicy::Compact;
  options.tile_size = desc.vision.image_size;
  options.limits = context.limits;
  // Not part of image_key: the tiles, and so the embeddings, are the same either way.
  options.with_pixel_values = !context.gpu_normalize;
  return options;
}

Hash128 image_key(const std::string& bytes, const PreprocessOptions& options) {
  HashBuilder builder;
  builder.add(murmur3_128(bytes.data(), bytes.size(), 0));
  builder.add_i32(options.min_tiles).add_i32(options.max_tiles).add_i32(options.tile_size);
  builder.add_i32(options.use_thumbnail).add_i32(options.compact).add_i32(options.exif_transpose);
  return builder.finish();
}

bool RecentImages::find(const Hash128& key, int* tiles, Tensor* pixels) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = lru_.begin(); it != lru_.end(); ++it)
    if (it->key == key) {
      *tiles = it->tiles;
      *pixels = it->pixels;
      lru_.splice(lru_.begin(), lru_, it);
      ++hits_;
      return true;
    }
  return false;
}

void RecentImages::insert(const Hash128& key, int tiles, const Tensor& pixels) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Entry& e : lru_)
    if (e.key == key) return;
  lru_.push_front(Entry{key, tiles, pixels});
  if (lru_.size() > capacity_) lru_.pop_back();
}

int64_t RecentImages::hits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hits_;
}

std::string context_length_error(int64_t prompt_tokens, int max_position, bool at_least) {
  return str("prompt of ", at_least ? "at least " : "", prompt_tokens,
             " tokens exceeds the model's context length of ", max_position, " (max_position_embeddings)");
}

int longest_token_bytes(const Tokenizer& tokenizer) {
  size_t longest = 0;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id)
    longest = std::max(longest, tokenizer.decode_bytes({id}).size());
  return int(longest);
}

namespace {

// Cheap checks before the costly work: the text's bytes bound its tokens from below (the factor 2 and the 4
// bytes cover normalisation and a dropped leading space), then the text is tokenized with one tile per image,
// the fewest an image can take. Either over the context fails the request before any image is decoded.
void check_context_early(const Request& request, const PrepContext& context) {
  const int max_position = context.desc->llm.max_position;
  if (context.max_token_bytes > 0) {
    const int64_t text_bytes = int64_t(request.prompt.size() + request.system.size());
    const int64_t fewest_tokens = text_bytes / (2 * (int64_t(context.max_token_bytes) + 4));
    if (fewest_tokens > max_position)
      FOVEA_REQUEST_FAIL(ErrorKind::ContextLength, context_length_error(fewest_tokens, max_position, true));
  }
  if (request.images.empty()) return;  // the scheduler checks the exact count
  const PromptIds fewest = build_chat_prompt(*context.desc, *context.tokenizer, request.system, request.prompt,
                                             std::vector<int>(request.images.size(), 1));
  if (int64_t(fewest.ids.size()) > max_position)
    FOVEA_REQUEST_FAIL(ErrorKind::ContextLength, context_length_error(int64_t(fewest.ids.size()), max_position, true));
}

}  // namespace

PreparedRequest prepare_request(int64_t id, const Request& request, const PrepContext& context) {
  const ModelDesc& desc = *context.desc;
  const Tokenizer& tokenizer = *context.tokenizer;
  FOVEA_CHECK(request.max_tiles >= 0, "max_tiles must be >= 0, got ", request.max_tiles);
  const PreprocessOptions options = preprocess_options(request, context);
  check_context_early(request, context);

  PreparedRequest prepared;
  prepared.id = id;
  prepared.params = request.params;
  std::vector<int> tiles;
  for (size_t i = 0; i < request.images.size(); ++i) {
    const ImageInput& input = request.images[i];
    ImageSlot slot;
    slot.key = image_key(input.bytes, options);
    if (!context.recent || !context.recent->find(slot.key, &slot.tiles, &slot.pixels)) {
      try {
        PreprocessedImage image = preprocess_image(input.bytes, options);
        slot.tiles = image.num_tiles();
        slot.pixels = context.gpu_normalize ? std::move(image.tiles_u8) : std::move(image.pixel_values);
      } catch (const std::exception& e) {
        FOVEA_REQUEST_FAIL(ErrorKind::InvalidImage, "image #", i + 1,
                           input.label.empty() ? "" : " (" + excerpt(input.label, 200) + ")",
                           ": ", e.what());
      }
      if (context.recent) context.recent->insert(slot.key, slot.tiles, slot.pixels);
    }
    tiles.push_back(slot.tiles);
    prepared.images.push_back(std::move(slot));
  }

  PromptIds prompt = build_chat_prompt(desc, tokenizer, request.system, request.prompt, tiles);
  FOVEA_CHECK(prompt.image_spans.size() == prepared.images.size(), "chat template placed ", prompt.image_spans.size(),
              " images, the request has ", prepared.images.size());
  const int tokens_per_tile = desc.vision.tokens_per_tile();
  for (size_t i = 0; i < prepared.images.size(); ++i) {
    ImageSlot& slot = prepared.images[i];
    slot.begin = prompt.image_spans[i].first;
    slot.rows = prompt.image_spans[i].second;
    FOVEA_CHECK(slot.rows == slot.tiles * tokens_per_tile, "image #", i + 1, " spans ", slot.rows, " tokens for ",
                slot.tiles, " tiles");
  }
  prepared.prompt = std::move(prompt.ids);

  FOVEA_CHECK(int(request.params.answers.size()) <= kMaxAnswers, request.params.answers.size(),
              " answers given; at most ", kMaxAnswers, " are allowed");
  for (const std::string& answer : request.params.answers) {
    const std::vector<int32_t> ids = tokenizer.encode(answer);
    FOVEA_CHECK(!ids.empty(), "answer '", excerpt(answer), "' encodes to no tokens");
    prepared.answer_ids.push_back(ids.front());
  }
  FOVEA_CHECK(int(request.params.choices.size()) <= kMaxAnswers, request.params.choices.size(),
              " choices given; at most ", kMaxAnswers, " are allowed");
  FOVEA_CHECK(request.params.choices.empty() || request.params.answers.empty(),
              "\"choices\" and \"answers\" cannot be combined");
  for (const std::string& choice : request.params.choices) {
    std::vector<int32_t> ids = tokenizer.encode(choice);  // as the assistant's reply right after the prompt
    FOVEA_CHECK(!ids.empty(), "choice '", excerpt(choice), "' encodes to no tokens");
    FOVEA_CHECK(int(ids.size()) <= kMaxChoiceTokens, "choice '", excerpt(choice), "' is ", ids.size(), " tokens; at most ",
                kMaxChoiceTokens, " are allowed");
    prepared.choice_ids.push_back(std::move(ids));
  }
  return prepared;
}

}  // namespace fovea
