// AWS credentials for s3:// images, found in the order the AWS SDKs' default chain looks (botocore, the C++
// SDK): the first source that is configured wins.
//   1. environment     AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN)
//   2. web identity    AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (+ AWS_ROLE_SESSION_NAME): the token file (read
//                      again at each refresh: EKS rotates it) is exchanged through STS AssumeRoleWithWebIdentity
//                      at AWS_ENDPOINT_URL_STS, else AWS_ENDPOINT_URL, else the region's STS endpoint
//   3. profile         AWS_PROFILE's keys in the shared credentials file, then in the config file
//   4. container       AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (on http://169.254.170.2), else ..._FULL_URI (https,
//                      or http to a loopback or the ECS / EKS agent's address): RELATIVE_URI wins when both are
//                      set, as in botocore's ContainerProvider and the Rust SDK; with the Authorization header
//                      from AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, else AWS_CONTAINER_AUTHORIZATION_TOKEN
//   5. instance        IMDSv2 at AWS_EC2_METADATA_SERVICE_ENDPOINT (default http://169.254.169.254): a session
//      metadata        token (PUT), the role's name, its credentials; AWS_EC2_METADATA_DISABLED=true skips it,
//                      AWS_METADATA_SERVICE_TIMEOUT (seconds, default 1) bounds each call
// None of them -> no credentials (unsigned requests: public buckets).
//
// Temporary credentials (2, 4, 5) are kept and fetched again 5 minutes before they expire (or after half their
// life when they live less than 10 minutes); while one thread refreshes, the others go on with the old ones if
// those are still valid, and a failed refresh keeps using them until they expire. A configured source that fails
// (2, 4) is an error naming it and why; instance metadata that cannot be reached means "not on EC2" (no
// credentials, asked again after 5 minutes). Messages never hold a secret, a token or a response body.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "fetch/aws_config.h"

namespace fovea {

struct AwsCredentials {
  std::string access_key;
  std::string secret_key;
  std::string session_token;
  int64_t expires_at = 0;  // unix seconds; 0: does not expire
  std::string source;      // "environment", "web identity", "profile NAME", "container", "instance metadata"
  std::string why_none;    // when empty: what the last sources said (e.g. why instance metadata gave nothing)
  bool empty() const { return access_key.empty() || secret_key.empty(); }
};

inline constexpr int64_t kRefreshBeforeExpirySeconds = 300;
inline constexpr const char* kEcsContainerAgent = "169.254.170.2";

class AwsCredentialChain {
 public:
  using Clock = std::function<int64_t()>;  // unix seconds

  // `env` defaults to ::getenv, `now` to the system clock (tests pass fakes of both). `container_agent` is the
  // host[:port] that RELATIVE_URI is a path on: ECS's fixed address, which no SDK lets a variable move, so only
  // tests give another (their loopback fake).
  explicit AwsCredentialChain(EnvLookup env = nullptr, Clock now = nullptr,
                              std::string container_agent = kEcsContainerAgent);
  ~AwsCredentialChain();
  AwsCredentialChain(const AwsCredentialChain&) = delete;
  AwsCredentialChain& operator=(const AwsCredentialChain&) = delete;

  // Thread-safe. Throws FetchError naming the source that failed.
  AwsCredentials get();

  // The process's chain (::getenv, the system clock), shared by every fetch.
  static AwsCredentialChain& process();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Parses "2026-12-06T13:00:00Z" (fractions of a second and a +00:00 offset allowed) into unix seconds; -1 when
// it is not such a time.
int64_t parse_aws_time(const std::string& text);

}  // namespace fovea
