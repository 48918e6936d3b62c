// fovea tokenize --tokenizer PATH [--special]   : UTF-8 text on stdin -> ids on one line (no BOS)
// fovea tokenize --tokenizer PATH --decode [--skip-special] : ids on stdin -> text on stdout, exactly
// The stdin text is taken byte for byte (a trailing newline is text too), so `tokenize | tokenize --decode`
// gives the input back. Tools outside the repository call this exact form.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "cli/command.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace fovea {
namespace {

std::string read_stdin() {
  std::ios::sync_with_stdio(false);
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    FOVEA_CHECK(used == word.size() && value >= INT32_MIN && value <= INT32_MAX, "not a token id: '", word, "'");
    ids.push_back(int32_t(value));
  }
  return ids;
}

int tokenize_main(const std::vector<std::string>& argv) {
  const Args args(argv);
  args.allow_only({"--tokenizer", "--special", "--decode", "--skip-special"});
  const std::string path = args.get("--tokenizer");
  FOVEA_CHECK(!path.empty(), "usage: fovea tokenize --tokenizer PATH [--special] [--decode [--skip-special]]");
  const auto tokenizer = load_tokenizer(path);
  const std::string input = read_stdin();
  if (args.has("--decode")) {
    const std::vector<int32_t> ids = parse_ids(input);
    // An id the vocabulary lacks is an error, not a piece of text to drop silently (-1, 2147483647).
    for (const int32_t id : ids)
      if (id < 0 || id >= tokenizer->vocab_size())
        throw Error(str("token id ", id, " is outside the vocabulary (0..", tokenizer->vocab_size() - 1, ")"));
    const std::string text = tokenizer->decode(ids, args.has("--skip-special"));
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  std::string line;
  for (const int32_t id : tokenizer->encode(input, args.has("--special"))) {
    if (!line.empty()) line += ' ';
    line += std::to_string(id);
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stdout);
  return 0;
}

const CommandRegistration registration{"tokenize", "text on stdin -> token ids (or --decode ids -> text)",
                                       tokenize_main};

}  // namespace
}  // namespace fovea
