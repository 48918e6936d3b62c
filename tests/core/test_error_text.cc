#include <gtest/gtest.h>

#include "core/error.h"

using namespace fovea;

TEST(ClientErrorText, DropsSourceLocationsWhereverTheyAre) {
  EXPECT_EQ(client_error_text("request_prep.cc:83: prompt too long"),
            "prompt too long");
  EXPECT_EQ(client_error_text("image #1 (a.jpg): decode.cc:120: not a JPEG"),
            "image #1 (a.jpg): not a JPEG");
  EXPECT_EQ(client_error_text("engine failed: attention.cu:7: CUDA error"),
            "engine failed: CUDA error");
  EXPECT_EQ(client_error_text("x.h:1: y.cpp:22: z"), "z");
  // Not locations: a time, a port, a file name the user wrote without a line
  // number.
  EXPECT_EQ(client_error_text("at 10:30: done"), "at 10:30: done");
  EXPECT_EQ(client_error_text("cannot fetch http://host:8080/a.png: 404"),
            "cannot fetch http://host:8080/a.png: 404");
  EXPECT_EQ(client_error_text("notes.cc: missing"), "notes.cc: missing");
}

TEST(ClientErrorText, BoundsTheLengthOnACharacterBoundary) {
  const std::string huge =
      "choice '" + std::string(1 << 20, 'x') + "' is too long";
  const std::string text = client_error_text(huge);
  EXPECT_LE(text.size(), 1100u);
  EXPECT_NE(text.find("1048597 bytes"), std::string::npos)
      << text.substr(text.size() - 60);
  std::string cjk;
  for (int i = 0; i < 2000; ++i)
    cjk += "沙"; // 3 bytes each
  const std::string cut = client_error_text(cjk);
  EXPECT_LE(cut.size(), 1100u);
  const size_t dots = cut.find("…");
  ASSERT_NE(dots, std::string::npos);
  EXPECT_EQ(dots % 3, 0u); // no half character before the ellipsis
}

TEST(Excerpt, ShortTextUnchangedLongTextCutWithItsSize) {
  EXPECT_EQ(excerpt("short"), "short");
  const std::string cut = excerpt(std::string(5000, 'a'), 10);
  EXPECT_EQ(cut, "aaaaaaaaaa… (5000 bytes)");
}
