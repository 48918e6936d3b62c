#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "media/media.h"
#include "support/temp_dir.h"

namespace fovea {
namespace {
namespace fs = std::filesystem;

TEST(Base64, RoundTripsEveryLengthAndRejectsGarbage) {
  std::string bytes;
  for (int n = 0; n < 40; ++n) {
    EXPECT_EQ(base64_decode(base64_encode(bytes)), bytes) << n;
    bytes += char(n * 37 + 11);
  }
  EXPECT_EQ(base64_encode("Man"), "TWFu");
  EXPECT_EQ(base64_encode("Ma"), "TWE=");
  EXPECT_EQ(base64_decode("TW\nE="), "Ma");
  EXPECT_EQ(base64_decode("TWE"), "Ma");          // padding optional
  EXPECT_EQ(base64_decode("-_-_"), base64_decode("+/+/"));  // URL-safe alphabet
  EXPECT_THROW(base64_decode("TW!u"), MediaError);
  EXPECT_THROW(base64_decode("TWFu=x"), MediaError);
  EXPECT_THROW(base64_decode("T"), MediaError);
}

class MediaFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    root_.write("allowed/sub/a.png", "PNGDATA");
    root_.write("secret.png", "SECRET");
    fs::create_symlink(root_ / "secret.png", root_ / "allowed" / "escape.png");
    options_.allowed_media_dir = (root_ / "allowed").string();
  }
  test::TempDir root_{"media"};
  MediaOptions options_;
};

TEST_F(MediaFiles, LocalPathsOnlyInsideTheAllowedDirectory) {
  const std::string inside = (root_ / "allowed" / "sub" / "a.png").string();
  EXPECT_EQ(load_image_url(inside, options_), "PNGDATA");
  EXPECT_EQ(load_image_url("file://" + inside, options_), "PNGDATA");
  EXPECT_EQ(load_image_url("sub/a.png", options_), "PNGDATA");  // relative to the allowed directory
  EXPECT_THROW(load_image_url((root_ / "secret.png").string(), options_), MediaError);
  EXPECT_THROW(load_image_url((root_ / "allowed" / ".." / "secret.png").string(), options_), MediaError);
  EXPECT_THROW(load_image_url((root_ / "allowed" / "escape.png").string(), options_), MediaError);  // symlink out
  EXPECT_THROW(load_image_url((root_ / "allowed" / "missing.png").string(), options_), MediaError);
  MediaOptions none;
  EXPECT_THROW(load_image_url(inside, none), MediaError);
  options_.max_bytes = 3;
  EXPECT_THROW(load_image_url(inside, options_), MediaError);
}

// The message for a file outside the directory is the one for a missing file: no probing what exists elsewhere.
TEST_F(MediaFiles, OutsideAndMissingReadTheSame) {
  auto message = [&](const std::string& path) {
    try {
      load_image_url(path, options_);
    } catch (const MediaError& e) {
      const std::string m = e.what();
      return m.substr(0, m.find(": " + path));
    }
    return std::string("loaded");
  };
  const std::string exists = message((root_ / "secret.png").string());
  EXPECT_EQ(exists, message((root_ / "no-such.png").string()));
  EXPECT_EQ(exists, message((root_ / "allowed" / "escape.png").string()));
  EXPECT_EQ(exists, message((root_ / "allowed" / "missing.png").string()));
}

// A FIFO (or a directory, a device) is not an image: refused at once instead of blocking the handler (and with
// it the server's shutdown) on a read that never returns.
TEST_F(MediaFiles, OnlyRegularFilesAreRead) {
  const fs::path fifo = root_ / "allowed" / "pipe.png";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Refused for what it is, not after the read deadline (whose message says "timed out").
  try {
    load_image_url(fifo.string(), options_);
    ADD_FAILURE() << "a FIFO was read";
  } catch (const MediaError& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_image_url((root_ / "allowed" / "sub").string(), options_), MediaError);
  fs::create_symlink("/dev/zero", root_ / "allowed" / "zero.png");  // resolves outside: refused before opening
  EXPECT_THROW(load_image_url((root_ / "allowed" / "zero.png").string(), options_), MediaError);
  std::ofstream(root_ / "allowed" / "empty.png");
  EXPECT_THROW(load_image_url((root_ / "allowed" / "empty.png").string(), options_), MediaError);
}

// A request's path with a NUL inside (JSON's \u0000) is refused, not read as the path before the NUL; a directory
// says it is one (it used to be "larger than the limit").
TEST_F(MediaFiles, NulInPathAndDirectoriesAreNamedForWhatTheyAre) {
  auto message = [&](const std::string& path) {
    try {
      load_image_url(path, options_);
    } catch (const MediaError& e) {
      return std::string(e.what());
    }
    return std::string("loaded");
  };
  const std::string inside = (root_ / "allowed" / "sub" / "a.png").string();
  EXPECT_NE(message(inside + std::string(1, '\0') + "x").find("NUL"), std::string::npos);
  EXPECT_NE(message((root_ / "allowed" / "sub").string()).find("is a directory"), std::string::npos);
}

TEST_F(MediaFiles, DataUrlsAndRefusedSchemes) {
  EXPECT_EQ(load_image_url("data:image/png;base64," + base64_encode("xyz"), options_), "xyz");
  EXPECT_EQ(load_image_url("DATA:image/png;base64," + base64_encode("xyz"), options_), "xyz");
  EXPECT_THROW(load_image_url("data:image/png;base64", options_), MediaError);
  EXPECT_THROW(load_image_url("data:image/png;base64,", options_), MediaError);
  EXPECT_THROW(load_image_url("http://127.0.0.1:1/x.png", options_), MediaError);  // remote not allowed
  EXPECT_THROW(load_image_url("ftp://host/x.png", options_), MediaError);
  EXPECT_THROW(load_image_url("", options_), MediaError);
  EXPECT_THROW(load_image_url("s3://bucket/x.png", options_), MediaError);
  options_.allow_remote = true;
  options_.remote_retries = 0;
  try {  // https is fetched now (tests/fetch); here nothing listens, and the message names the URL, not the query
    load_image_url("https://127.0.0.1:1/x.png?X-Amz-Signature=secret", options_);
    FAIL() << "nothing listens on port 1";
  } catch (const MediaError& e) {
    EXPECT_NE(std::string(e.what()).find("https://127.0.0.1:1/x.png"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos) << e.what();
  }
  try {  // s3:// needs its own flag: it reads with the server's credentials
    load_image_url("s3://bucket/x.png", options_);
    FAIL() << "s3 must be refused without allow_s3";
  } catch (const MediaError& e) {
    EXPECT_NE(std::string(e.what()).find("--allow-s3-media"), std::string::npos) << e.what();
  }
  options_.max_bytes = 4;
  EXPECT_THROW(load_image_url("data:image/png;base64," + base64_encode("too long"), options_), MediaError);
}

}  // namespace
}  // namespace fovea
