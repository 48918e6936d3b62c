// The AWS credential chain against fake endpoints on loopback (our own http::Server): STS for web identity, the
// container agent (FULL_URI, and RELATIVE_URI on the agent address the chain is given) and IMDSv2, each with
// refresh before expiry on a fake clock; the order of the sources; errors that name the source and hold no
// secret; one refresh for many threads.
#include <gtest/gtest.h>

#include <atomic>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "fetch/aws_credentials.h"
#include "fetch/fetch.h"
#include "fetch/s3.h"
#include "server/http_server.h"
#include "support/temp_dir.h"

namespace fovea {
namespace {
namespace fs = std::filesystem;

constexpr int64_t kStart = 1796562000;  // 2026-12-06T13:00:00Z

std::string iso_time(int64_t t) {
  const std::time_t tt = std::time_t(t);
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string form_value(const std::string& body, const std::string& name) {  // percent-decoded
  const size_t at = ("&" + body).find("&" + name + "=");
  if (at == std::string::npos) return "";
  const size_t start = at + name.size() + 1, end = body.find('&', start);
  const std::string raw = body.substr(start, end == std::string::npos ? std::string::npos : end - start);
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '%' && i + 2 < raw.size()) {
      out += char(std::stoi(raw.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += raw[i] == '+' ? ' ' : raw[i];
    }
  }
  return out;
}

// The message of the FetchError `get` throws ("" when it returns).
template <typename Get>
std::string fetch_error(Get get, bool* retryable = nullptr) {
  try {
    get();
  } catch (const FetchError& e) {
    if (retryable != nullptr) *retryable = e.retryable();
    return e.what();
  }
  return "";
}

class CredentialEndpoints : public ::testing::Test {
 protected:
  void SetUp() override {
    http::ServerOptions options;
    options.port = 0;
    options.handler_threads = 4;
    server_ = std::make_unique<http::Server>(options, [this](http::Exchange& ex) { handle(ex); });
    server_->start();
    base_ = "http://127.0.0.1:" + std::to_string(server_->port());
    env_["HOME"] = dir_.string();  // no ~/.aws of the machine's user
    env_["AWS_EC2_METADATA_DISABLED"] = "true";  // a test that wants IMDS points it at the fake
  }
  void TearDown() override { server_->stop(); }

  // The container agent that RELATIVE_URI paths are on: this fake (ECS's is 169.254.170.2).
  std::unique_ptr<AwsCredentialChain> chain() {
    return std::make_unique<AwsCredentialChain>(
        [this](const char* name) -> const char* {
          const auto it = env_.find(name);
          return it == env_.end() ? nullptr : it->second.c_str();
        },
        [this] { return now_.load(); }, "127.0.0.1:" + std::to_string(server_->port()));
  }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  int hits(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    return hits_[what];
  }
  std::string seen(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    return seen_[what];
  }

  void handle(http::Exchange& ex) {
    const http::Request& r = ex.request();
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t expires = now_.load() + 3600;
    if (r.method == "POST" && r.path == "/sts/") {
      const int n = ++hits_["sts"];
      seen_["web token"] = form_value(r.body, "WebIdentityToken");
      seen_["session"] = form_value(r.body, "RoleSessionName");
      if (form_value(r.body, "Action") != "AssumeRoleWithWebIdentity" ||
          form_value(r.body, "RoleArn") != "arn:aws:iam::123456789012:role/reader" || sts_refuses_) {
        lock.unlock();
        ex.respond(403, "text/xml",
                   "<ErrorResponse><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code><Message>token " +
                       form_value(r.body, "WebIdentityToken") + " is bad</Message></Error></ErrorResponse>");
        return;
      }
      lock.unlock();
      ex.respond(200, "text/xml",
                 str("<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>"
                     "<AccessKeyId>ASIASTS",
                     n, "</AccessKeyId><SecretAccessKey>sts-secret</SecretAccessKey><SessionToken>sts-token/", n,
                     "+=</SessionToken><Expiration>", iso_time(expires),
                     "</Expiration></Credentials></AssumeRoleWithWebIdentityResult>"
                     "</AssumeRoleWithWebIdentityResponse>"));
    } else if (r.path.rfind("/container", 0) == 0) {  // /container, /container/full, ...
      const int n = ++hits_["container"];
      seen_["authorization"] = r.header("authorization");
      seen_["container path"] = r.path;
      lock.unlock();
      ex.respond(200, "application/json",
                 str(R"({"AccessKeyId": "ASIACONTAINER)", n, R"(", "SecretAccessKey": "container-secret", )",
                     R"("Token": "container-token", "Expiration": ")", iso_time(expires), R"("})"));
    } else if (r.method == "PUT" && r.path == "/latest/api/token") {
      ++hits_["imds token"];
      const bool ok = r.header("x-aws-ec2-metadata-token-ttl-seconds") == "21600" && !imds_refuses_;
      lock.unlock();
      if (ok) ex.respond(200, "text/plain", "imds-session");
      else ex.respond(404, "text/plain", "not here");
    } else if (r.path.rfind("/latest/meta-data/iam/security-credentials/", 0) == 0) {
      const bool authorised = r.header("x-aws-ec2-metadata-token") == "imds-session";
      const std::string role = r.path.substr(std::string("/latest/meta-data/iam/security-credentials/").size());
      const int n = role.empty() ? 0 : ++hits_["imds credentials"];
      lock.unlock();
      if (!authorised) ex.respond(401, "text/plain", "");
      else if (role.empty()) ex.respond(200, "text/plain", "reader-role\n");
      else if (role != "reader-role") ex.respond(404, "text/plain", "");
      else
        ex.respond(200, "text/plain",
                   str(R"({"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": "ASIAIMDS)", n,
                       R"(", "SecretAccessKey": "imds-secret", "Token": "imds-token", "Expiration": ")",
                       iso_time(expires), R"("})"));
    } else {
      lock.unlock();
      ex.respond(404, "text/plain", "no");
    }
  }

  void use_web_identity() {
    write("token", "web-token-1\n");
    env_["AWS_WEB_IDENTITY_TOKEN_FILE"] = (dir_ / "token").string();
    env_["AWS_ROLE_ARN"] = "arn:aws:iam::123456789012:role/reader";
    env_["AWS_ENDPOINT_URL_STS"] = base_ + "/sts";
  }
  void use_profile() {
    fs::create_directories(dir_ / ".aws");
    write(".aws/credentials", "[default]\naws_access_key_id = AKPROFILE\naws_secret_access_key = sprofile\n");
  }
  void use_container() { env_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = base_ + "/container"; }
  void use_imds() {
    env_.erase("AWS_EC2_METADATA_DISABLED");
    env_["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = base_ + "/";
  }

  test::TempDir dir_{"awscreds"};
  std::unique_ptr<http::Server> server_;
  std::string base_;
  std::map<std::string, std::string> env_;
  std::atomic<int64_t> now_{kStart};
  std::mutex mutex_;
  std::map<std::string, int> hits_;
  std::map<std::string, std::string> seen_;  // what the last request sent (under mutex_: handlers write it)
  std::atomic<bool> sts_refuses_{false}, imds_refuses_{false};
};

TEST(AwsTime, ParsesTheFormsAwsWrites) {
  EXPECT_EQ(parse_aws_time("2026-12-06T13:00:00Z"), kStart);
  EXPECT_EQ(parse_aws_time("2026-12-06T13:00:00.123Z"), kStart);
  EXPECT_EQ(parse_aws_time("2026-12-06T13:00:00+00:00"), kStart);
  EXPECT_EQ(parse_aws_time("2026-12-06T14:00:00Z"), kStart + 3600);
  EXPECT_EQ(parse_aws_time("tomorrow"), -1);
  EXPECT_EQ(parse_aws_time("2026-13-06T13:00:00Z"), -1);
  EXPECT_EQ(parse_aws_time("2026-12-06T13:00:00+02:00"), -1);
}

TEST_F(CredentialEndpoints, TheSourcesInTheSdksOrder) {
  use_web_identity();
  use_profile();
  use_container();
  use_imds();
  env_["AWS_ACCESS_KEY_ID"] = "AKENV";
  env_["AWS_SECRET_ACCESS_KEY"] = "senv";
  env_["AWS_SESSION_TOKEN"] = "tenv";
  AwsCredentials c = chain()->get();
  EXPECT_EQ(c.source, "environment");
  EXPECT_EQ(c.session_token, "tenv");
  env_.erase("AWS_ACCESS_KEY_ID");
  EXPECT_EQ(chain()->get().source, "web identity");
  env_.erase("AWS_ROLE_ARN");
  EXPECT_EQ(chain()->get().source, "profile default");
  fs::remove(dir_ / ".aws" / "credentials");
  EXPECT_EQ(chain()->get().source, "container");
  env_.erase("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  EXPECT_EQ(chain()->get().source, "instance metadata");
  env_["AWS_EC2_METADATA_DISABLED"] = "TRUE";
  c = chain()->get();
  EXPECT_TRUE(c.empty());
  EXPECT_NE(c.why_none.find("AWS_EC2_METADATA_DISABLED"), std::string::npos) << c.why_none;
  EXPECT_EQ(hits("sts"), 1);
  EXPECT_EQ(hits("container"), 1);
  EXPECT_EQ(hits("imds credentials"), 1);
}

TEST_F(CredentialEndpoints, WebIdentityThroughStsRefreshedBeforeExpiry) {
  use_web_identity();
  env_["AWS_ROLE_SESSION_NAME"] = "pipeline-7";
  const auto c = chain();
  AwsCredentials first = c->get();
  EXPECT_EQ(first.access_key, "ASIASTS1");
  EXPECT_EQ(first.secret_key, "sts-secret");
  EXPECT_EQ(first.session_token, "sts-token/1+=");  // XML text as sent, '/', '+' and '=' kept
  EXPECT_EQ(first.expires_at, kStart + 3600);
  EXPECT_EQ(seen("web token"), "web-token-1");  // the file's text, line break dropped
  EXPECT_EQ(seen("session"), "pipeline-7");
  now_ = kStart + 3600 - kRefreshBeforeExpirySeconds - 1;  // not yet within 5 minutes of expiry: kept
  EXPECT_EQ(c->get().access_key, "ASIASTS1");
  EXPECT_EQ(hits("sts"), 1);
  write("token", "web-token-2");  // EKS rotates the projected token: read again at each refresh
  now_ = kStart + 3600 - kRefreshBeforeExpirySeconds;
  const AwsCredentials second = c->get();
  EXPECT_EQ(second.access_key, "ASIASTS2");
  EXPECT_EQ(second.expires_at, now_ + 3600);
  EXPECT_EQ(seen("web token"), "web-token-2");
  EXPECT_EQ(hits("sts"), 2);
}

TEST_F(CredentialEndpoints, AFailingStsIsNamedWithoutTheToken) {
  use_web_identity();
  sts_refuses_ = true;
  bool retryable = true;
  const std::string m = fetch_error([&] { chain()->get(); }, &retryable);
  EXPECT_NE(m.find("web identity"), std::string::npos) << m;
  EXPECT_NE(m.find("role arn:aws:iam::123456789012:role/reader"), std::string::npos) << m;
  EXPECT_NE(m.find("HTTP 403 InvalidIdentityToken"), std::string::npos) << m;
  EXPECT_EQ(m.find("web-token-1"), std::string::npos) << m;  // STS's message echoed it: not ours
  EXPECT_FALSE(retryable);
  // Credentials still valid survive a failed refresh; expired ones do not.
  sts_refuses_ = false;
  const auto c = chain();
  EXPECT_EQ(c->get().access_key, "ASIASTS2");
  sts_refuses_ = true;
  now_ = kStart + 3600 - 60;
  EXPECT_EQ(c->get().access_key, "ASIASTS2");
  now_ = kStart + 3600;
  EXPECT_THROW(c->get(), FetchError);
  env_["AWS_WEB_IDENTITY_TOKEN_FILE"] = (dir_ / "missing").string();
  const std::string missing = fetch_error([&] { chain()->get(); });
  EXPECT_NE(missing.find("cannot read"), std::string::npos) << missing;
}

TEST_F(CredentialEndpoints, ContainerCredentialsWithTheAuthorizationToken) {
  use_container();
  env_["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "Bearer from-env";
  const auto c = chain();
  AwsCredentials got = c->get();
  EXPECT_EQ(got.access_key, "ASIACONTAINER1");
  EXPECT_EQ(got.session_token, "container-token");
  EXPECT_EQ(got.expires_at, kStart + 3600);
  EXPECT_EQ(seen("authorization"), "Bearer from-env");
  now_ = kStart + 3600 - kRefreshBeforeExpirySeconds + 1;
  EXPECT_EQ(c->get().access_key, "ASIACONTAINER2");
  // The token file wins over the variable (EKS Pod Identity mounts one).
  write("container-token", "from-file\n");
  env_["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"] = (dir_ / "container-token").string();
  EXPECT_EQ(chain()->get().access_key, "ASIACONTAINER3");
  EXPECT_EQ(seen("authorization"), "from-file");
  // Plain http only to a loopback or the agent's address.
  env_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = "http://example.com/creds?secret=1";
  const std::string m = fetch_error([&] { chain()->get(); });
  EXPECT_NE(m.find("must be https"), std::string::npos) << m;
  EXPECT_EQ(m.find("secret=1"), std::string::npos) << m;
  EXPECT_EQ(hits("container"), 3);
}

// RELATIVE_URI is a path on the agent's fixed address (here the fake's): same answer, token header and refresh
// as FULL_URI; with both set RELATIVE_URI wins (botocore's ContainerProvider, the Rust SDK), even beside a
// FULL_URI that would be refused.
TEST_F(CredentialEndpoints, ContainerRelativeUriOnTheAgentsAddress) {
  env_["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"] = "/container/v2/credentials/task-7";
  env_["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "Bearer relative";
  const auto c = chain();
  AwsCredentials got = c->get();
  EXPECT_EQ(got.source, "container");
  EXPECT_EQ(got.access_key, "ASIACONTAINER1");
  EXPECT_EQ(got.session_token, "container-token");
  EXPECT_EQ(got.expires_at, kStart + 3600);
  EXPECT_EQ(seen("container path"), "/container/v2/credentials/task-7");
  EXPECT_EQ(seen("authorization"), "Bearer relative");
  now_ = kStart + 3600 - kRefreshBeforeExpirySeconds - 1;  // not yet within 5 minutes of expiry: kept
  EXPECT_EQ(c->get().access_key, "ASIACONTAINER1");
  now_ = kStart + 3600 - kRefreshBeforeExpirySeconds;
  got = c->get();
  EXPECT_EQ(got.access_key, "ASIACONTAINER2");
  EXPECT_EQ(got.expires_at, now_ + 3600);
  // Without its leading slash it is still a path on the agent; the token file wins over the variable.
  env_["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"] = "container/no-slash";
  write("container-token", "from-file\n");
  env_["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"] = (dir_ / "container-token").string();
  EXPECT_EQ(chain()->get().access_key, "ASIACONTAINER3");
  EXPECT_EQ(seen("container path"), "/container/no-slash");
  EXPECT_EQ(seen("authorization"), "from-file");
  // Both set: RELATIVE_URI, whatever FULL_URI says.
  env_.erase("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  env_.erase("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  env_["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"] = "/container/relative";
  env_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = base_ + "/container/full";
  EXPECT_EQ(chain()->get().access_key, "ASIACONTAINER4");
  EXPECT_EQ(seen("container path"), "/container/relative");
  EXPECT_EQ(seen("authorization"), "");
  env_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = "http://example.com/refused";
  EXPECT_EQ(chain()->get().access_key, "ASIACONTAINER5");
  env_.erase("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  env_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = base_ + "/container/full";
  EXPECT_EQ(chain()->get().access_key, "ASIACONTAINER6");
  EXPECT_EQ(seen("container path"), "/container/full");
  EXPECT_EQ(hits("container"), 6);
}

TEST_F(CredentialEndpoints, InstanceMetadataV2RefreshedBeforeExpiry) {
  use_imds();
  const auto c = chain();
  AwsCredentials got = c->get();
  EXPECT_EQ(got.source, "instance metadata");
  EXPECT_EQ(got.access_key, "ASIAIMDS1");
  EXPECT_EQ(got.session_token, "imds-token");
  EXPECT_EQ(hits("imds token"), 1);
  now_ = kStart + 3600 - kRefreshBeforeExpirySeconds;
  EXPECT_EQ(c->get().access_key, "ASIAIMDS2");
  EXPECT_EQ(hits("imds token"), 2);  // a session token per refresh
}

TEST_F(CredentialEndpoints, NoInstanceMetadataMeansUnsignedAskedAgainLater) {
  use_imds();
  imds_refuses_ = true;
  const auto c = chain();
  AwsCredentials got = c->get();
  EXPECT_TRUE(got.empty());
  EXPECT_NE(got.why_none.find("instance metadata"), std::string::npos) << got.why_none;
  EXPECT_EQ(c->get().access_key, "");
  EXPECT_EQ(hits("imds token"), 1);  // remembered: no second wait per image
  now_ = kStart + 301;
  imds_refuses_ = false;
  EXPECT_EQ(c->get().access_key, "ASIAIMDS1");
  // A closed port (connection refused) is "not on EC2" too.
  const int closed = [] {
    http::ServerOptions options;
    options.port = 0;
    http::Server s(options, [](http::Exchange& ex) { ex.respond(200, "text/plain", ""); });
    s.start();
    const int port = s.port();
    s.stop();
    return port;
  }();
  env_["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = "http://127.0.0.1:" + std::to_string(closed);
  got = chain()->get();
  EXPECT_TRUE(got.empty());
  EXPECT_FALSE(got.why_none.empty());
}

TEST_F(CredentialEndpoints, ManyThreadsOneRefresh) {
  use_web_identity();
  const auto c = chain();
  EXPECT_EQ(c->get().access_key, "ASIASTS1");
  now_ = kStart + 3600 - 10;  // every thread finds them due for refresh; one fetches
  std::vector<std::thread> threads;
  std::atomic<int> old_ones{0}, new_ones{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      const std::string key = c->get().access_key;
      (key == "ASIASTS1" ? old_ones : new_ones)++;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(hits("sts"), 2);
  EXPECT_EQ(old_ones + new_ones, 8);
  EXPECT_EQ(c->get().access_key, "ASIASTS2");
}

TEST_F(CredentialEndpoints, S3ConfigCarriesTheChainsCredentials) {
  use_container();
  const auto c = chain();
  const S3Config config = resolve_s3_config("", nullptr, c.get());
  EXPECT_EQ(config.access_key, "ASIACONTAINER1");
  EXPECT_EQ(config.session_token, "container-token");
  EXPECT_EQ(config.credentials_source, "container");
}

}  // namespace
}  // namespace fovea
