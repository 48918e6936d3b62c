#include "support/temp_dir.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <utility>

namespace fovea::test {

namespace fs = std::filesystem;

TempDir::TempDir(std::string_view label) {
  std::string name(label);
  for (char& c : name)
    if (c == '/') c = '_';  // a label from a test parameter must not reach into another folder
  std::string pattern = (fs::temp_directory_path() / ("fovea_" + name + "_XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("mkdtemp " + pattern + ": " + std::strerror(errno));
  path_ = pattern;
}

TempDir::TempDir(TempDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ignored;  // a destructor must not throw; a folder left behind is the worst outcome
  fs::remove_all(path_, ignored);
}

std::string TempDir::write(const fs::path& name, std::string_view bytes) const {
  const fs::path file = path_ / name;
  fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("cannot write " + file.string());
  return file.string();
}

}  // namespace fovea::test
