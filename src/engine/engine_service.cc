// The production InferenceService: an Engine plus the model's tokenizer (for logprob token texts). Kept in its
// own file so that tests linking fovea_server with a fake service do not pull in the engine.
#include <mutex>

#include "core/error.h"
#include "engine/service.h"
#include "tokenizer/tokenizer.h"

namespace fovea {
namespace {

class EngineService final : public InferenceService {
 public:
  explicit EngineService(const EngineConfig& config) : engine_(config) {
    try {
      tokenizer_ = load_tokenizer(config.model_dir);
    } catch (const std::exception&) {
      tokenizer_.reset();  // logprob token texts become "" rather than failing the whole server
    }
  }
  int64_t submit(Request request, RequestCallback callback) override {
    return engine_.submit(std::move(request), std::move(callback));
  }
  void cancel(int64_t request_id) override { engine_.cancel(request_id); }
  void drain() override { engine_.drain(); }
  EngineStats stats() const override { return engine_.stats(); }
  std::string model_name() const override { return engine_.model_name(); }
  std::string token_text(int32_t token) const override {
    if (!tokenizer_ || token < 0 || token >= tokenizer_->vocab_size()) return "";
    return tokenizer_->decode({token}, false);
  }

 private:
  Engine engine_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

}  // namespace

std::unique_ptr<InferenceService> make_engine_service(const EngineConfig& config) {
  return std::make_unique<EngineService>(config);
}

}  // namespace fovea
