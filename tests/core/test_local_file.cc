// The one reader for user-named local files: a FIFO, a device, a directory or a NUL in the path is refused at once
// with a message that says so; the size is checked before reading. A regression here hangs (FIFO) rather than
// fails, which ctest's timeout reports.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/local_file.h"
#include "support/temp_dir.h"

namespace fovea {
namespace {
namespace fs = std::filesystem;

class LocalFiles : public ::testing::Test {
 protected:
  // The reason and message of the refusal of `path`.
  static std::pair<LocalFileError::Reason, std::string> refusal(const std::string& path, LocalFileLimits limits = {}) {
    try {
      read_local_file(path, limits, "image file");
    } catch (const LocalFileError& e) {
      return {e.reason(), e.what()};
    }
    ADD_FAILURE() << path << " was read";
    return {};
  }
  static bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
  test::TempDir dir_{"local_file"};
};

TEST_F(LocalFiles, ReadsARegularFileAndOneBehindASymlink) {
  std::ofstream(dir_ / "a.png") << "PNGDATA";
  fs::create_symlink(dir_ / "a.png", dir_ / "link.png");
  EXPECT_EQ(read_local_file((dir_ / "a.png").string(), {}), "PNGDATA");
  EXPECT_EQ(read_local_file((dir_ / "link.png").string(), {}), "PNGDATA");
}

TEST_F(LocalFiles, AFifoOrALinkToOneIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo((dir_ / "pipe.png").c_str(), 0600), 0);
  fs::create_symlink(dir_ / "pipe.png", dir_ / "to_pipe.png");
  for (const char* name : {"pipe.png", "to_pipe.png"}) {
    const auto [reason, message] = refusal((dir_ / name).string());
    EXPECT_EQ(reason, LocalFileError::Reason::NotRegular);
    EXPECT_TRUE(has(message, "is not a regular file (a FIFO)")) << message;
    EXPECT_TRUE(has(message, name)) << message;
  }
}

TEST_F(LocalFiles, DevicesAndDirectoriesSayWhatTheyAre) {
  const auto [dev_reason, dev] = refusal("/dev/zero");
  EXPECT_EQ(dev_reason, LocalFileError::Reason::NotRegular);
  EXPECT_TRUE(has(dev, "/dev/zero is not a regular file (a character device)")) << dev;
  const auto [dir_reason, directory] = refusal(dir_.string());
  EXPECT_EQ(dir_reason, LocalFileError::Reason::Directory);
  EXPECT_TRUE(has(directory, "is a directory")) << directory;
  EXPECT_FALSE(has(directory, "limit")) << directory;
}

TEST_F(LocalFiles, ANulInThePathIsRefusedNotCutShort) {
  std::ofstream(dir_ / "a.png") << "PNGDATA";
  const std::string path = (dir_ / "a.png").string() + std::string(1, '\0') + "/etc/passwd";
  const auto [reason, message] = refusal(path);
  EXPECT_EQ(reason, LocalFileError::Reason::BadPath);
  EXPECT_TRUE(has(message, "NUL")) << message;
}

TEST_F(LocalFiles, SizeIsCheckedBeforeReading) {
  // A sparse 64 GiB file: reading it would take hours, the size check takes nothing.
  { std::ofstream(dir_ / "huge.png") << "x"; }
  fs::resize_file(dir_ / "huge.png", int64_t(1) << 36);
  LocalFileLimits limits;
  limits.max_bytes = 1000;
  const auto [reason, message] = refusal((dir_ / "huge.png").string(), limits);
  EXPECT_EQ(reason, LocalFileError::Reason::TooLarge);
  EXPECT_TRUE(has(message, "larger than the limit of 1000 bytes")) << message;
}

TEST_F(LocalFiles, MissingAndEmptyFiles) {
  EXPECT_EQ(refusal((dir_ / "none.png").string()).first, LocalFileError::Reason::NotFound);
  { std::ofstream(dir_ / "empty.png"); }
  EXPECT_EQ(refusal((dir_ / "empty.png").string()).first, LocalFileError::Reason::Empty);
  EXPECT_EQ(refusal("").first, LocalFileError::Reason::BadPath);
}

TEST_F(LocalFiles, AHugePathIsEchoedAsAnExcerpt) {
  const std::string path = (dir_ / std::string(200, 'a')).string() + "/" + std::string(100000, 'b');
  const auto [reason, message] = refusal(path);
  EXPECT_LT(message.size(), 1000u) << message.size();
}

}  // namespace
}  // namespace fovea
