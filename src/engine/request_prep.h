// The preprocessing stage (runs on the engine's thread pool): image bytes -> content key + pixel tiles,
// request text -> chat-template token ids with image spans, answers -> their first token ids, choices -> their
// tokens.
#pragma once
#include <cstdint>
#include <list>
#include <mutex>
#include <string>

#include "core/hash.h"
#include "engine/engine.h"
#include "engine/sequence.h"
#include "image/preprocess.h"
#include "model/model_desc.h"
#include "tokenizer/tokenizer.h"

namespace fovea {

// Answers per request whose log-probs the runner computes (the real runner is built with this capacity).
constexpr int kMaxAnswers = 64;
// Tokens per choice (GenerationParams::choices; at most kMaxAnswers choices): each token beyond the first adds
// a short scoring sequence.
constexpr int kMaxChoiceTokens = 64;

// Images preprocessed lately, by image key: further questions about an image (submitted together, as
// `fovea run` and `fovea bench --questions` do) skip decoding and tiling and share its tiles (a Tensor's storage
// is shared, never written after preprocessing). Thread-safe; least recently used entries go first.
class RecentImages {
 public:
  explicit RecentImages(size_t capacity) : capacity_(capacity) {}
  bool find(const Hash128& key, int* tiles, Tensor* pixels);
  void insert(const Hash128& key, int tiles, const Tensor& pixels);
  int64_t hits() const;

 private:
  struct Entry {
    Hash128 key;
    int tiles = 0;
    Tensor pixels;
  };
  size_t capacity_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // most recent first
  int64_t hits_ = 0;
};

struct PrepContext {
  const ModelDesc* desc = nullptr;
  const Tokenizer* tokenizer = nullptr;
  ImageLimits limits;
  bool gpu_normalize = false;  // the runner takes U8 tiles: skip the host's F32 normalisation
  RecentImages* recent = nullptr;  // optional
  int max_token_bytes = 0;     // the longest token's text (longest_token_bytes); 0: no byte bound
};

// The error for a prompt longer than the model's context; the server answers it with 400.
std::string context_length_error(int64_t prompt_tokens, int max_position, bool at_least = false);

// Bytes of the longest token's text: a text of B bytes has at least B / that many tokens, which refuses a
// prompt far beyond the context before it is tokenized.
int longest_token_bytes(const Tokenizer& tokenizer);

// The options preprocess_image gets for this request: the model's tiling with the request's policy and its
// max_tiles (capped by the model's max_dynamic_patch); pixel values only without gpu_normalize.
PreprocessOptions preprocess_options(const Request& request, const PrepContext& context);

// 128-bit key of an image as the KV prefix cache and the vision cache see it: the hash of the file bytes
// folded with every option that changes the tiles. Same bytes and options -> same embeddings.
Hash128 image_key(const std::string& bytes, const PreprocessOptions& options);

// Throws fovea::Error with a one-line message naming the image (#n and its label) or the limit on bad input.
// A prompt longer than the model's context fails before its images are decoded: first on its byte length
// alone, then on its token count with one tile per image.
PreparedRequest prepare_request(int64_t id, const Request& request, const PrepContext& context);

}  // namespace fovea
