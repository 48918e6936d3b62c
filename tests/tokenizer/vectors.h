// Reader for llama.cpp-style tokenizer vectors: NAME.inp holds the cases separated by lines
// "__ggml_vocab_test__" (the file may or may not end with a separator), NAME.out the expected ids of each case,
// one line per case, space-separated.
#pragma once
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fovea::test {

inline std::string shared_dir() { return std::string(FOVEA_SOURCE_DIR) + "/../shared"; }

inline std::string slurp(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

struct VectorCase {
  std::string text;
  std::vector<int32_t> ids;
};

inline std::vector<VectorCase> read_vectors(const std::string& inp_path, const std::string& out_path) {
  const std::string separator = "\n__ggml_vocab_test__\n";
  const std::string inp = slurp(inp_path);
  std::vector<std::string> texts;
  size_t start = 0;
  for (size_t hit; (hit = inp.find(separator, start)) != std::string::npos; start = hit + separator.size())
    texts.push_back(inp.substr(start, hit - start));
  if (start < inp.size()) texts.push_back(inp.substr(start));  // last case without a trailing separator

  std::vector<VectorCase> cases;
  std::istringstream out(slurp(out_path));
  std::string line;
  for (size_t i = 0; std::getline(out, line); ++i) {
    VectorCase c;
    c.text = i < texts.size() ? texts[i] : std::string();
    std::istringstream numbers(line);
    for (int32_t id; numbers >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  if (cases.size() != texts.size()) cases.clear();  // a format mismatch: the caller's size check fails loudly
  return cases;
}

// Ids as " 1 2 3", for readable expectation failures.
inline std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    s += ' ';
    s += std::to_string(id);
  }
  return s;
}

}  // namespace fovea::test
