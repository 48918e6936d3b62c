// s3:// URLs -> endpoint, region and credentials, from a fake environment and temporary AWS files.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "fetch/fetch.h"
#include "fetch/s3.h"
#include "support/temp_dir.h"

namespace fovea {
namespace {
namespace fs = std::filesystem;

TEST(S3Url, ParsesBucketAndKey) {
  const S3Location l = parse_s3_url("s3://my-bucket/dir/a b+c.jpg");
  EXPECT_EQ(l.bucket, "my-bucket");
  EXPECT_EQ(l.key, "dir/a b+c.jpg");
  EXPECT_THROW(parse_s3_url("s3://my-bucket"), FetchError);
  EXPECT_THROW(parse_s3_url("s3://my-bucket/"), FetchError);
  EXPECT_THROW(parse_s3_url("s3://Bad_Bucket!/x"), FetchError);
  EXPECT_THROW(parse_s3_url("http://host/x"), FetchError);
}

TEST(S3Url, EncodesKeysAsS3sCanonicalUri) {
  EXPECT_EQ(s3_encode_key("dir/a b+c~_-.jpg"), "dir/a%20b%2Bc~_-.jpg");
  EXPECT_EQ(s3_encode_key("\xc3\xa9t\xc3\xa9"), "%C3%A9t%C3%A9");
  S3Config aws;
  aws.region = "eu-west-1";
  EXPECT_EQ(s3_object_url({"bkt", "a b.jpg"}, aws), "https://bkt.s3.eu-west-1.amazonaws.com/a%20b.jpg");
  EXPECT_EQ(s3_object_url({"b.with.dots", "k"}, aws), "https://s3.eu-west-1.amazonaws.com/b.with.dots/k");
  S3Config local;
  local.endpoint = "http://127.0.0.1:9000";
  EXPECT_EQ(s3_object_url({"bkt", "x/y.png"}, local), "http://127.0.0.1:9000/bkt/x/y.png");  // path-style
}

class S3Files : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.write(".aws/credentials",
               "[default]\naws_access_key_id = AKDEFAULT\n"
               "aws_secret_access_key = sdefault\n\n"
               "# a comment\n[work]\naws_access_key_id=AKWORK\n"
               "aws_secret_access_key=swork\naws_session_token=tok\n");
    dir_.write(".aws/config",
               "[default]\nregion = eu-central-1\n"
               "[profile work]\nregion=ap-south-1\n"
               "endpoint_url = http://127.0.0.1:9000/\ns3 =\n  addressing_style = path\n");
    env_["HOME"] = dir_.string();
    env_["AWS_EC2_METADATA_DISABLED"] = "true";  // this machine's own metadata service is none of the test's business
  }
  S3Config resolve(const std::string& endpoint = "") {
    return resolve_s3_config(endpoint, [this](const char* name) -> const char* {
      const auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    });
  }
  test::TempDir dir_{"s3cfg"};
  std::map<std::string, std::string> env_;
};

TEST_F(S3Files, DefaultProfileFromTheFiles) {
  const S3Config c = resolve();
  EXPECT_EQ(c.access_key, "AKDEFAULT");
  EXPECT_EQ(c.secret_key, "sdefault");
  EXPECT_EQ(c.session_token, "");
  EXPECT_EQ(c.region, "eu-central-1");
  EXPECT_EQ(c.endpoint, "");
}

TEST_F(S3Files, NamedProfileWithTokenRegionAndEndpoint) {
  env_["AWS_PROFILE"] = "work";
  const S3Config c = resolve();
  EXPECT_EQ(c.access_key, "AKWORK");
  EXPECT_EQ(c.session_token, "tok");
  EXPECT_EQ(c.region, "ap-south-1");
  EXPECT_EQ(c.endpoint, "http://127.0.0.1:9000");  // trailing slash dropped; nested "s3 =" block ignored
}

TEST_F(S3Files, EnvironmentWinsOverFilesAndTheOptionOverBoth) {
  env_["AWS_ACCESS_KEY_ID"] = "AKENV";
  env_["AWS_SECRET_ACCESS_KEY"] = "senv";
  env_["AWS_SESSION_TOKEN"] = "tenv";
  env_["AWS_DEFAULT_REGION"] = "us-west-2";
  env_["AWS_ENDPOINT_URL"] = "http://generic:1";
  S3Config c = resolve();
  EXPECT_EQ(c.access_key, "AKENV");
  EXPECT_EQ(c.secret_key, "senv");
  EXPECT_EQ(c.session_token, "tenv");
  EXPECT_EQ(c.region, "us-west-2");
  EXPECT_EQ(c.endpoint, "http://generic:1");
  env_["AWS_REGION"] = "sa-east-1";
  env_["AWS_ENDPOINT_URL_S3"] = "http://s3only:2";
  c = resolve();
  EXPECT_EQ(c.region, "sa-east-1");
  EXPECT_EQ(c.endpoint, "http://s3only:2");
  EXPECT_EQ(resolve("https://option:3").endpoint, "https://option:3");
}

TEST_F(S3Files, NoCredentialsAnywhereMeansUnsigned) {
  env_["HOME"] = (dir_ / "nowhere").string();
  const S3Config c = resolve();
  EXPECT_TRUE(c.access_key.empty());
  EXPECT_NE(c.why_unsigned.find("AWS_EC2_METADATA_DISABLED"), std::string::npos) << c.why_unsigned;
  EXPECT_EQ(c.region, "us-east-1");
}

// AWS_SHARED_CREDENTIALS_FILE naming a FIFO used to block the fetch forever in open(); now it fails at once with
// what the file is (the one local-file reader, core/local_file.h).
TEST_F(S3Files, ACredentialsFileThatIsAFifoFailsInsteadOfHanging) {
  ASSERT_EQ(::mkfifo((dir_ / "pipe").c_str(), 0600), 0);
  env_["AWS_SHARED_CREDENTIALS_FILE"] = (dir_ / "pipe").string();
  try {
    resolve();
    ADD_FAILURE() << "resolved";
  } catch (const FetchError& e) {
    EXPECT_NE(std::string(e.what()).find("is not a regular file (a FIFO)"), std::string::npos) << e.what();
  }
}

TEST(AwsIni, SectionsCommentsAndNestedBlocks) {
  const std::string text = "[default]\nregion = eu-west-1\n; c\n# c\n[profile dev]\n  nested = no\nregion=x\ns3 =\n"
                           "  endpoint_url = http://nested\n[broken\nkey = v\n";
  EXPECT_EQ(parse_ini_section(text, "default"), (std::map<std::string, std::string>{{"region", "eu-west-1"}}));
  EXPECT_EQ(parse_ini_section(text, "profile dev"),
            (std::map<std::string, std::string>{{"region", "x"}, {"s3", ""}, {"key", "v"}}));
  EXPECT_TRUE(parse_ini_section(text, "none").empty());
}

}  // namespace
}  // namespace fovea
