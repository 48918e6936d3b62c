// A program built against the installed Fovea alone (include/fovea + libfovea, through find_package(Fovea)): it
// loads a model, asks one question about one image and streams the answer. scripts/test_install.sh builds and runs
// it to prove that the public API is whole.
//
//   describe_image MODEL_DIR IMAGE [PROMPT] [--backend cpu|cuda|auto] [--max-tokens N]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "fovea/engine.h"
#include "fovea/error.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

int usage() {
  std::fprintf(stderr, "usage: describe_image MODEL_DIR IMAGE [PROMPT] [--backend cpu|cuda|auto] [--max-tokens N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> positional;
  fovea::EngineConfig config;
  int max_tokens = 32;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--backend" || arg == "--max-tokens") && i + 1 < argc) {
      const std::string value = argv[++i];
      if (arg == "--backend") config.backend = value;
      else max_tokens = std::atoi(value.c_str());
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.size() < 2 || positional.size() > 3 || max_tokens < 1) return usage();

  try {
    config.model_dir = positional[0];
    const std::unique_ptr<fovea::InferenceService> service = fovea::make_engine_service(config);

    fovea::Request request;
    request.images.push_back({read_file(positional[1]), positional[1]});
    request.prompt = positional.size() == 3 ? positional[2] : "Describe the image.";
    request.params.max_tokens = max_tokens;

    // The callback runs on an engine thread: it prints what comes and hands the final event to main.
    std::promise<fovea::RequestEvent> final_event;
    service->submit(request, [&final_event](const fovea::RequestEvent& event) {
      std::cout << event.text_delta << std::flush;
      if (event.finished) final_event.set_value(event);
    });
    const fovea::RequestEvent done = final_event.get_future().get();
    std::cout << "\n";
    if (!done.error.empty()) {
      std::cerr << "failed (" << fovea::error_kind_name(done.error_kind) << "): " << done.error << "\n";
      return 1;
    }
    std::cerr << service->model_name() << ": " << done.prompt_tokens << " prompt tokens, " << done.completion_tokens
              << " generated, finish " << done.finish_reason << ", " << done.ms << " ms\n";
    service->drain();
    return done.completion_tokens > 0 ? 0 : 1;
  } catch (const fovea::QueueFullError& e) {
    std::cerr << "busy, try later: " << e.what() << "\n";  // not with one request, but this is how it is told apart
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
  }
  return 1;
}
