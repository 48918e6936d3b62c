// The one temporary folder of the C++ tests: each TempDir is a fresh folder of its own, removed with everything
// in it when the TempDir goes. mkdtemp picks the name, so tests that ctest runs in parallel, or several in one
// process, never share or remove each other's folder (a fixed or pid-only name does both).
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

namespace fovea::test {

class TempDir {
 public:
  // `label` goes into the folder's name (fovea_<label>_XXXXXX under the system temp dir) to tell whose it is.
  explicit TempDir(std::string_view label = "test");
  ~TempDir();
  TempDir(TempDir&& other) noexcept;
  TempDir& operator=(TempDir&&) = delete;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string string() const { return path_.string(); }
  // A path inside the folder, as with std::filesystem::path: `dir / "a.png"`.
  std::filesystem::path operator/(const std::filesystem::path& name) const { return path_ / name; }
  // The same path as a string (for APIs that take one).
  std::string file(const std::filesystem::path& name) const { return (path_ / name).string(); }
  // Writes `bytes` (exactly, no newline added) to `name` inside the folder, making its parent folders; returns
  // the file's path. Throws std::runtime_error when the file cannot be written.
  std::string write(const std::filesystem::path& name, std::string_view bytes) const;

 private:
  std::filesystem::path path_;  // empty once moved from
};

}  // namespace fovea::test
