// Encoding speed of our tokenizers on one thread: bench_tokenizer TOKENIZER_PATH TEXT_FILE [REPEATS]
// Prints one JSON line: load time, tokens, and the median time to encode the whole file as one text, the file
// line by line, and an 81-token prompt (the reference workload's size).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

template <typename F>
double median_seconds(int repeats, F run) {
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    run();
    times.push_back(seconds_since(start));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_tokenizer TOKENIZER_PATH TEXT_FILE [REPEATS]\n");
    return 2;
  }
  const int repeats = argc > 3 ? std::max(1, std::atoi(argv[3])) : 10;
  std::ifstream file(argv[2], std::ios::binary);
  std::ostringstream text_stream;
  text_stream << file.rdbuf();
  const std::string text = text_stream.str();
  try {
    const auto load_start = Clock::now();
    const auto tokenizer = fovea::load_tokenizer(argv[1]);
    const double load_s = seconds_since(load_start);
    size_t tokens = 0;
    const double text_s = median_seconds(repeats, [&] { tokens = tokenizer->encode(text).size(); });
    // The reference workload's question: 81 tokens or so with the template around it.
    const std::string prompt =
        "你是由上海人工智能实验室联合商汤科技开发的书生多模态大模型，英文名叫InternVL, 是一个有用无害的人工智能助手。"
        "图中有3张以上的床，或者是有双层床，请直接给出是或者否，然后给出详细的解释。注意1张双层床有2张床. "
        "Is there a bunk bed in this room? Answer yes or no, then explain why in one short sentence.";
    // The same text cut into lines, each encoded on its own: prompt-sized inputs.
    std::vector<std::string> lines;
    for (size_t start = 0; start < text.size();) {
      const size_t end = std::min(text.find('\n', start), text.size());
      lines.push_back(text.substr(start, end + 1 - start));
      start = end + 1;
    }
    const double lines_s = median_seconds(repeats, [&] {
      for (const std::string& line : lines) tokenizer->encode(line);
    });
    size_t prompt_tokens = 0;
    const double prompt_s = median_seconds(repeats * 100, [&] { prompt_tokens = tokenizer->encode(prompt).size(); });
    std::printf(
        "{\"load_s\": %.4f, \"bytes\": %zu, \"tokens\": %zu, \"encode_s\": %.6f, \"mb_per_s\": %.2f, "
        "\"lines\": %zu, \"lines_s\": %.6f, \"prompt_tokens\": %zu, \"prompt_us\": %.2f}\n",
        load_s, text.size(), tokens, text_s, text.size() / text_s / 1e6, lines.size(), lines_s, prompt_tokens,
        prompt_s * 1e6);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
    return 1;
  }
  return 0;
}
