#include "fetch/aws_credentials.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/local_file.h"
#include "fetch/aws_http.h"
#include "fetch/fetch.h"

namespace fovea {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
constexpr int64_t kAskImdsAgainSeconds = 300;  // after it gave nothing (not on EC2, no role)

// Through the one local-file reader: a FIFO or /dev/zero named as a token file fails instead of hanging or
// filling memory, and the size is checked before reading.
std::string read_small_file(const std::string& path, const std::string& what) {
  LocalFileLimits limits;
  limits.max_bytes = 64 * 1024;
  std::string s;
  try {
    s = read_local_file(path, limits, what + " file");
  } catch (const LocalFileError& e) {
    if (e.reason() == LocalFileError::Reason::NotFound) throw FetchError(what + ": cannot read " + path, false);
    throw FetchError(e.what(), false);
  }
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  if (s.empty()) throw FetchError(what + ": " + path + " is empty", false);
  return s;
}

// The text between <tag> and </tag> after `from` ("" when absent).
std::string xml_value(const std::string& body, const std::string& tag, size_t from = 0) {
  const size_t b = body.find("<" + tag + ">", from);
  if (b == std::string::npos) return "";
  const size_t start = b + tag.size() + 2;
  const size_t e = body.find("</" + tag + ">", start);
  return e == std::string::npos ? "" : body.substr(start, e - start);
}

// A non-2xx answer as the end of a message: "HTTP 403 InvalidIdentityToken". Never the body itself.
std::string http_failure(const HttpReply& reply) {
  const std::string code = aws_error_code(reply.body);
  return str("HTTP ", reply.status, code.empty() ? "" : " " + code);
}

bool retryable_status(long status) { return status >= 500 || status == 429 || status == 408; }

// {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}: what the container agent and IMDS answer.
AwsCredentials from_json(const std::string& body, const std::string& source, const std::string& what) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  const auto text = [&](const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  };
  AwsCredentials c;
  c.source = source;
  c.access_key = text("AccessKeyId");
  c.secret_key = text("SecretAccessKey");
  c.session_token = text("Token");
  if (c.empty()) throw FetchError(what + ": the answer holds no AccessKeyId and SecretAccessKey", false);
  const std::string expiration = text("Expiration");
  if (!expiration.empty()) {
    c.expires_at = parse_aws_time(expiration);
    if (c.expires_at < 0) throw FetchError(what + ": the answer's Expiration is not a time", false);
  }
  return c;
}

AwsCredentials from_environment(const EnvLookup& env) {
  AwsCredentials c;
  c.access_key = env_value(env, "AWS_ACCESS_KEY_ID");
  c.secret_key = env_value(env, "AWS_SECRET_ACCESS_KEY");
  c.session_token = env_value(env, "AWS_SESSION_TOKEN");
  c.source = "environment";
  return c;
}

AwsCredentials from_profile(const AwsProfile& profile) {
  for (const IniSection* section : {&profile.credentials, &profile.config}) {
    const auto value = [&](const char* key) {
      const auto it = section->find(key);
      return it == section->end() ? std::string() : it->second;
    };
    AwsCredentials c;
    c.access_key = value("aws_access_key_id");
    c.secret_key = value("aws_secret_access_key");
    c.session_token = value("aws_session_token");
    c.source = "profile " + profile.name;
    if (!c.empty()) return c;
  }
  return {};
}

// STS's endpoint: the SDKs' endpoint variables, else the region's own (the global one without a region).
std::string sts_endpoint(const EnvLookup& env, const AwsProfile& profile) {
  std::string url = env_value(env, "AWS_ENDPOINT_URL_STS", env_value(env, "AWS_ENDPOINT_URL"));
  if (url.empty()) {
    const std::string region = aws_region(env, profile);
    if (region.empty()) return "https://sts.amazonaws.com/";
    url = "https://sts." + region + (region.rfind("cn-", 0) == 0 ? ".amazonaws.com.cn" : ".amazonaws.com");
  }
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url + "/";
}

AwsCredentials assume_role_with_web_identity(const EnvLookup& env, const std::string& endpoint,
                                             const AwsCredentialChain::Clock& now) {
  const std::string role = env_value(env, "AWS_ROLE_ARN");
  const std::string what = "S3 credentials from web identity (role " + role + ")";
  const std::string token = read_small_file(env_value(env, "AWS_WEB_IDENTITY_TOKEN_FILE"), what);
  const std::string session = env_value(env, "AWS_ROLE_SESSION_NAME", str("fovea-", now()));
  HttpCall call;
  call.method = "POST";
  call.url = endpoint;
  call.headers = {"Content-Type: application/x-www-form-urlencoded", "Accept: application/xml"};
  call.body = "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=" + percent_encode(role, false) +
              "&RoleSessionName=" + percent_encode(session, false) +
              "&WebIdentityToken=" + percent_encode(token, false);
  call.timeout_ms = 10000;
  const std::string at = what + " at " + redact_url(call.url);
  const HttpReply reply = http_call(call, at);
  if (reply.status != 200) throw FetchError(at + ": " + http_failure(reply), retryable_status(reply.status));
  const size_t credentials = reply.body.find("<Credentials>");
  AwsCredentials c;
  c.source = "web identity";
  if (credentials != std::string::npos) {
    c.access_key = xml_value(reply.body, "AccessKeyId", credentials);
    c.secret_key = xml_value(reply.body, "SecretAccessKey", credentials);
    c.session_token = xml_value(reply.body, "SessionToken", credentials);
    c.expires_at = parse_aws_time(xml_value(reply.body, "Expiration", credentials));
  }
  if (c.empty() || c.session_token.empty() || c.expires_at < 0)
    throw FetchError(at + ": the answer holds no complete Credentials", false);
  return c;
}

// http://<agent> + RELATIVE_URI (the agent: 169.254.170.2), or FULL_URI where the SDKs allow it (https, or http
// to the agent's addresses or a loopback one). RELATIVE_URI first, as botocore and the Rust SDK look.
std::string container_url(const EnvLookup& env, const std::string& agent) {
  const std::string relative = env_value(env, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  if (!relative.empty()) return "http://" + agent + (relative[0] == '/' ? relative : "/" + relative);
  const std::string full = env_value(env, "AWS_CONTAINER_CREDENTIALS_FULL_URI");
  if (full.rfind("https://", 0) == 0) return full;
  if (full.rfind("http://", 0) == 0) {
    const size_t host_end = full.find_first_of(":/", 7);
    const std::string host = full.substr(7, host_end == std::string::npos ? std::string::npos : host_end - 7);
    const std::string bracketed = full.rfind("http://[", 0) == 0 ? full.substr(7, full.find(']') - 6) : "";
    for (const char* allowed : {"localhost", "169.254.170.2", "169.254.170.23"})
      if (host == allowed) return full;
    if (host.rfind("127.", 0) == 0 || bracketed == "[::1]" || bracketed == "[fd00:ec2::23]") return full;
  }
  throw FetchError("S3 credentials from the container: AWS_CONTAINER_CREDENTIALS_FULL_URI " + redact_url(full) +
                       " must be https, or http to a loopback address or the ECS / EKS agent's",
                   false);
}

AwsCredentials container_credentials(const EnvLookup& env, const std::string& agent) {
  HttpCall call;
  call.url = container_url(env, agent);
  call.timeout_ms = 2000;
  const std::string what = "S3 credentials from the container endpoint " + redact_url(call.url);
  const std::string token_file = env_value(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  const std::string token =
      token_file.empty() ? env_value(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN") : read_small_file(token_file, what);
  if (token.find_first_of("\r\n") != std::string::npos)
    throw FetchError(what + ": the authorization token holds a line break", false);
  if (!token.empty()) call.headers.push_back("Authorization: " + token);
  const HttpReply reply = http_call(call, what);
  if (reply.status != 200) throw FetchError(what + ": HTTP " + std::to_string(reply.status), retryable_status(reply.status));
  return from_json(reply.body, "container", what);
}

std::string imds_endpoint(const EnvLookup& env) {
  std::string url = env_value(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://169.254.169.254");
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

// IMDSv2. Returns empty credentials, with the reason, when the service is not there or the instance has no role.
AwsCredentials instance_metadata_credentials(const EnvLookup& env) {
  const std::string base = imds_endpoint(env);
  const std::string what = "S3 credentials from instance metadata at " + redact_url(base);
  const std::string timeout = env_value(env, "AWS_METADATA_SERVICE_TIMEOUT", "1");
  HttpCall call;
  call.timeout_ms = int(std::max(0.1, std::min(60.0, std::atof(timeout.c_str()))) * 1000);
  AwsCredentials none;
  try {
    call.method = "PUT";
    call.url = base + "/latest/api/token";
    call.headers = {"X-aws-ec2-metadata-token-ttl-seconds: 21600"};
    const HttpReply token = http_call(call, what);
    if (token.status != 200 || token.body.empty()) {
      none.why_none = what + ": no session token (HTTP " + std::to_string(token.status) + ")";
      return none;
    }
    call.method = "GET";
    call.headers = {"X-aws-ec2-metadata-token: " + token.body};
    call.url = base + "/latest/meta-data/iam/security-credentials/";
    const HttpReply roles = http_call(call, what);
    const std::string role = roles.body.substr(0, roles.body.find_first_of("\r\n"));
    if (roles.status != 200 || role.empty()) {
      none.why_none = what + ": the instance has no IAM role (HTTP " + std::to_string(roles.status) + ")";
      return none;
    }
    call.url += percent_encode(role, false);
    const HttpReply credentials = http_call(call, what);
    if (credentials.status != 200)
      throw FetchError(what + ": HTTP " + std::to_string(credentials.status) + " for role " + role,
                       retryable_status(credentials.status));
    return from_json(credentials.body, "instance metadata", what + " (role " + role + ")");
  } catch (const FetchError& e) {
    if (e.retryable()) {  // unreachable or timed out: not on EC2 (or its metadata is blocked)
      none.why_none = e.what();
      return none;
    }
    throw;
  }
}

}  // namespace

int64_t parse_aws_time(const std::string& text) {
  std::tm tm{};
  char sep = 0;
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &sep,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 7 ||
      (sep != 'T' && sep != 't' && sep != ' '))
    return -1;
  std::string rest = text.substr(size_t(consumed));
  if (!rest.empty() && rest[0] == '.') {
    const size_t digits = rest.find_first_not_of("0123456789", 1);
    rest = digits == std::string::npos ? "" : rest.substr(digits);
  }
  if (rest != "Z" && rest != "z" && rest != "+00:00" && rest != "") return -1;
  if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
      tm.tm_sec > 60)
    return -1;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return int64_t(::timegm(&tm));
}

// Temporary credentials of one source, fetched again kRefreshBeforeExpirySeconds before they expire.
struct Refreshing {
  std::mutex state_mutex;  // guards the fields below
  bool have = false;
  AwsCredentials credentials;
  int64_t refresh_at = 0;
  std::mutex refresh_mutex;  // held by the one thread that fetches

  bool valid_at(int64_t t) const { return have && (credentials.expires_at == 0 || t < credentials.expires_at); }

  AwsCredentials get(const AwsCredentialChain::Clock& now, const std::function<AwsCredentials()>& fetch) {
    {
      std::lock_guard<std::mutex> lock(state_mutex);
      if (have && now() < refresh_at) return credentials;
    }
    std::unique_lock<std::mutex> refreshing(refresh_mutex, std::try_to_lock);
    if (!refreshing.owns_lock()) {
      {
        std::lock_guard<std::mutex> lock(state_mutex);
        if (valid_at(now())) return credentials;  // another thread is fetching; these still work
      }
      refreshing.lock();
    }
    {
      std::lock_guard<std::mutex> lock(state_mutex);
      if (have && now() < refresh_at) return credentials;  // fetched by the thread that held the lock before
    }
    try {
      AwsCredentials fresh = fetch();
      std::lock_guard<std::mutex> lock(state_mutex);
      have = true;
      credentials = fresh;
      const int64_t t = now();
      if (fresh.empty()) refresh_at = t + kAskImdsAgainSeconds;
      else if (fresh.expires_at == 0) refresh_at = kNever;
      else  // credentials that live less than 10 minutes are used for half their life, not fetched per call
        refresh_at = std::max(fresh.expires_at - kRefreshBeforeExpirySeconds, t + (fresh.expires_at - t) / 2);
      return fresh;
    } catch (const FetchError&) {
      std::lock_guard<std::mutex> lock(state_mutex);
      if (valid_at(now()) && !credentials.empty()) return credentials;  // STS hiccup: the old ones still work
      throw;
    }
  }
};

struct AwsCredentialChain::State {
  EnvLookup env;
  Clock now;
  std::string container_agent;
  std::mutex mutex;  // guards `cached`
  // One entry per source and the settings it was fetched with, so changed variables fetch anew.
  std::map<std::string, std::unique_ptr<Refreshing>> cached;

  Refreshing& entry(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex);
    std::unique_ptr<Refreshing>& slot = cached[key];
    if (!slot) slot = std::make_unique<Refreshing>();
    return *slot;
  }
};

AwsCredentialChain::AwsCredentialChain(EnvLookup env, Clock now, std::string container_agent)
    : state_(std::make_unique<State>()) {
  state_->env = env_or_process(env);
  state_->container_agent = std::move(container_agent);
  state_->now = now ? std::move(now) : Clock([] {
    return int64_t(std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count());
  });
}

AwsCredentialChain::~AwsCredentialChain() = default;

AwsCredentialChain& AwsCredentialChain::process() {
  static AwsCredentialChain chain;
  return chain;
}

AwsCredentials AwsCredentialChain::get() {
  const EnvLookup& env = state_->env;
  const Clock& now = state_->now;
  AwsCredentials c = from_environment(env);
  if (!c.empty()) return c;

  const AwsProfile profile = load_aws_profile(env);
  const std::string token_file = env_value(env, "AWS_WEB_IDENTITY_TOKEN_FILE");
  const std::string role = env_value(env, "AWS_ROLE_ARN");
  if (!token_file.empty() && !role.empty()) {
    const std::string endpoint = sts_endpoint(env, profile);
    const std::string key = str("web identity\n", token_file, "\n", role, "\n",
                                env_value(env, "AWS_ROLE_SESSION_NAME"), "\n", endpoint);
    return state_->entry(key).get(now, [&] { return assume_role_with_web_identity(env, endpoint, now); });
  }

  c = from_profile(profile);
  if (!c.empty()) return c;

  const std::string relative = env_value(env, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  const std::string full = env_value(env, "AWS_CONTAINER_CREDENTIALS_FULL_URI");
  if (!relative.empty() || !full.empty()) {
    const std::string key = str("container\n", relative, "\n", full, "\n",
                                env_value(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"), "\n",
                                env_value(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN").size());
    return state_->entry(key).get(now, [&] { return container_credentials(env, state_->container_agent); });
  }

  if (env_flag(env, "AWS_EC2_METADATA_DISABLED")) {
    c = {};
    c.why_none = "no AWS credentials in the environment, web identity, profile or container settings "
                 "(instance metadata disabled by AWS_EC2_METADATA_DISABLED)";
    return c;
  }
  return state_->entry("instance metadata\n" + imds_endpoint(env))
      .get(now, [&] { return instance_metadata_credentials(env); });
}

}  // namespace fovea
