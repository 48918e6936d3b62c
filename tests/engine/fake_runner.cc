#include "fake_runner.h"

#include "core/error.h"

namespace fovea::test {
namespace {

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return x;
}

}  // namespace

int RecordedStep::total_tokens() const {
  int n = 0;
  for (const auto& c : chunks) n += int(c.tokens.size());
  return n;
}

FakeRunner::FakeRunner(const FakeRunnerConfig& config) : config_(config) {
  if (config.desc) {
    desc_ = *config.desc;
    config_.vocab = desc_.llm.vocab;
    config_.max_position = desc_.llm.max_position;
  } else {
    desc_.llm.vocab = config.vocab;
    desc_.llm.max_position = config.max_position;
    desc_.image_token_id = kImageToken;
    desc_.eos_ids = {kEos};
  }
  desc_.vision.image_size = 56;  // 4x4 patches -> 2x2 = 4 tokens per tile
  desc_.vision.patch_size = 14;
  kv_.assign(size_t(config.num_kv_blocks * config.block_size), 0);
  kv_written_.assign(kv_.size(), false);
}

std::vector<int64_t> FakeRunner::encode_images(const std::vector<Tensor>& pixel_values) {
  RecordedEncode record;
  int tiles = 0;
  for (const Tensor& t : pixel_values) {
    FOVEA_CHECK(t.rank() == 4 && t.dim(1) == 3 && t.dim(2) == desc_.vision.image_size, "fake: bad pixels ",
                shape_str(t.shape));
    FOVEA_CHECK(t.ptr<float>()[0] != kPoisonPixel, "fake: poisoned image");
    if (t.ptr<float>()[0] == kDeviceLostPixel) throw DeviceError("fake: device lost");
    tiles += int(t.dim(0));
  }
  FOVEA_CHECK(tiles <= config_.max_step_tiles, "fake: ", tiles, " tiles in one call");
  FOVEA_CHECK(tiles <= free_vision_tiles(), "fake: vision pool full");
  std::vector<int64_t> handles;
  for (const Tensor& t : pixel_values) {
    Image image;
    image.tiles = int(t.dim(0));
    image.signature = uint64_t(int64_t(t.ptr<float>()[0] * 1000.0f));
    images_[next_handle_] = image;
    handles.push_back(next_handle_++);
    ++record.images;
    record.tiles += image.tiles;
  }
  encodes.push_back(record);
  return handles;
}

void FakeRunner::release_image(int64_t handle) {
  FOVEA_CHECK(images_.erase(handle) == 1, "fake: release of unknown image ", handle);
}

int FakeRunner::free_vision_tiles() const {
  int used = 0;
  for (const auto& [h, image] : images_) used += image.tiles;
  return config_.vision_pool_tiles - used;
}

uint64_t FakeRunner::image_row_value(const VisionRef& ref, int row) const {
  const auto it = images_.find(ref.handle);
  FOVEA_CHECK(it != images_.end(), "fake: VisionRef to unknown image ", ref.handle);
  const int rows = it->second.tiles * desc_.vision.tokens_per_tile();
  FOVEA_CHECK(ref.row_begin >= 0 && ref.row_begin + ref.rows <= rows, "fake: rows out of the image");
  return mix(it->second.signature, uint64_t(ref.row_begin + row));
}

std::vector<SeqResult> FakeRunner::step(const std::vector<SeqChunk>& chunks) {
  if (config_.before_step) config_.before_step();
  steps.push_back(RecordedStep{chunks});
  int total = 0;
  for (const SeqChunk& c : chunks) total += int(c.tokens.size());
  FOVEA_CHECK(total <= config_.max_step_tokens, "fake: ", total, " tokens in one step");
  std::vector<SeqResult> results;
  const int bs = config_.block_size;
  for (const SeqChunk& c : chunks) {
    const int n = int(c.tokens.size());
    FOVEA_CHECK(n > 0, "fake: empty chunk");
    FOVEA_CHECK(int(c.block_table.size()) * bs >= c.start_pos + n, "fake: block table too short");
    std::vector<uint64_t> inputs(static_cast<size_t>(n));
    std::vector<bool> from_image(static_cast<size_t>(n), false);
    for (int j = 0; j < n; ++j) {
      FOVEA_CHECK(c.tokens[size_t(j)] != config_.poison_token, "fake: poisoned token");
      inputs[size_t(j)] = uint64_t(c.tokens[size_t(j)]);
    }
    for (const VisionRef& ref : c.vision) {
      FOVEA_CHECK(ref.chunk_offset >= 0 && ref.chunk_offset + ref.rows <= n, "fake: VisionRef outside chunk");
      for (int r = 0; r < ref.rows; ++r) {
        const int j = ref.chunk_offset + r;
        FOVEA_CHECK(c.tokens[size_t(j)] == desc_.image_token_id, "fake: VisionRef on a text token");
        inputs[size_t(j)] = image_row_value(ref, r);
        from_image[size_t(j)] = true;
      }
    }
    uint64_t last = 0;
    for (int j = 0; j < n; ++j) {
      FOVEA_CHECK(c.tokens[size_t(j)] != desc_.image_token_id || from_image[size_t(j)],
                  "fake: image token without embedding");
      const int pos = c.start_pos + j;
      uint64_t prev = 0x1234;
      if (pos > 0) {
        const size_t prev_slot = size_t(c.block_table[size_t((pos - 1) / bs)] * bs + (pos - 1) % bs);
        FOVEA_CHECK(kv_written_[prev_slot], "fake: reading KV row never written (position ", pos - 1, ")");
        prev = kv_[prev_slot];
      }
      const size_t slot = size_t(c.block_table[size_t(pos / bs)] * bs + pos % bs);
      kv_[slot] = last = mix(prev, mix(inputs[size_t(j)], uint64_t(pos)));
      kv_written_[slot] = true;
    }
    SeqResult result;
    if (c.sample) {
      result.argmax = int32_t(10 + last % uint64_t(config_.vocab - 10));  // never EOS on its own
      for (const int32_t id : c.answer_ids) result.answer_logprobs.push_back(-0.5f - float(id % 7));
      if (c.want_logits) {
        result.logits.resize(size_t(config_.vocab));
        for (int i = 0; i < config_.vocab; ++i)
          result.logits[size_t(i)] = float(mix(last, uint64_t(i)) % 1000) / 100.0f;
      }
    }
    results.push_back(std::move(result));
  }
  return results;
}

Tensor fake_pixels(int tiles, float signature, int image_size) {
  Tensor t = Tensor::host(DType::F32, {tiles, 3, image_size, image_size});
  t.ptr<float>()[0] = signature;
  return t;
}

}  // namespace fovea::test
