// The tests' temporary folder: each one is new and its own, write() puts exactly the given bytes, and the folder
// goes with its TempDir (and not with one it was moved out of).
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <sstream>

#include "support/temp_dir.h"

namespace fovea::test {
namespace {
namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

TEST(TempDir, EachIsANewEmptyFolderOfItsOwn) {
  const TempDir a("same"), b("same");
  EXPECT_NE(a.path(), b.path());
  for (const TempDir* dir : {&a, &b}) {
    ASSERT_TRUE(fs::is_directory(dir->path()));
    EXPECT_TRUE(fs::is_empty(dir->path()));
    EXPECT_EQ(dir->path().parent_path(), fs::temp_directory_path());
    EXPECT_EQ(dir->path().filename().string().rfind("fovea_same_", 0), 0u) << dir->path();
  }
  const TempDir slashed("a/b");
  EXPECT_EQ(slashed.path().parent_path(), fs::temp_directory_path());
}

TEST(TempDir, WriteStoresExactBytesAndMakesFolders) {
  const TempDir dir("write");
  const std::string bytes("a\0b\n", 4);
  const std::string path = dir.write("sub/deeper/f.bin", bytes);
  EXPECT_EQ(path, dir.file("sub/deeper/f.bin"));
  EXPECT_EQ(fs::path(path), dir / "sub" / "deeper" / "f.bin");
  EXPECT_EQ(read_file(path), bytes);
  dir.write("sub/deeper/f.bin", "x");  // replaces, not appends
  EXPECT_EQ(read_file(path), "x");
  EXPECT_THROW(dir.write("sub", "a folder is there"), std::runtime_error);
}

TEST(TempDir, RemovedWithEverythingInItAtDestruction) {
  fs::path kept;
  {
    const TempDir dir("gone");
    dir.write("a/b.txt", "x");
    kept = dir.path();
  }
  EXPECT_FALSE(fs::exists(kept));
}

TEST(TempDir, AMovedFolderLivesAsLongAsItsNewOwner) {
  std::optional<TempDir> owner;
  {
    TempDir first("moved");
    first.write("f", "kept");
    owner.emplace(std::move(first));
  }  // the moved-from one goes here
  EXPECT_EQ(read_file(*owner / "f"), "kept");
  const fs::path path = owner->path();
  owner.reset();
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace fovea::test
