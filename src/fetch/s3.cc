#include "fetch/s3.h"

#include <cctype>
#include <memory>

#include "fetch/aws_http.h"
#include "fetch/fetch.h"

namespace fovea {
namespace {

bool valid_bucket(const std::string& b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char c : b)
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' ||
          c == '.' || c == '_'))
      return false;
  return true;
}

}  // namespace

S3Location parse_s3_url(const std::string& url) {
  if (url.size() < 5 || std::tolower(static_cast<unsigned char>(url[0])) != 's' || url[1] != '3' ||
      url.compare(2, 3, "://") != 0)
    throw FetchError(str("not an s3:// URL: ", redact_url(url)), false);
  const std::string rest = url.substr(5);
  const size_t slash = rest.find('/');
  S3Location loc;
  loc.bucket = rest.substr(0, slash);
  if (slash != std::string::npos) loc.key = rest.substr(slash + 1);
  if (!valid_bucket(loc.bucket)) throw FetchError(str("bad bucket name in ", redact_url(url)), false);
  if (loc.key.empty()) throw FetchError(str("no object key in ", redact_url(url)), false);
  return loc;
}

S3Config resolve_s3_config(const std::string& endpoint_override, const EnvLookup& env_in,
                           AwsCredentialChain* chain) {
  const EnvLookup env = env_or_process(env_in);
  const AwsProfile profile = load_aws_profile(env);
  S3Config c;
  std::unique_ptr<AwsCredentialChain> own;
  if (chain == nullptr) {
    if (env_in) own = std::make_unique<AwsCredentialChain>(env);
    chain = own ? own.get() : &AwsCredentialChain::process();
  }
  const AwsCredentials credentials = chain->get();
  c.access_key = credentials.access_key;
  c.secret_key = credentials.secret_key;
  c.session_token = credentials.session_token;
  c.credentials_source = credentials.empty() ? "" : credentials.source;
  c.why_unsigned = credentials.why_none;
  c.region = aws_region(env, profile);
  if (c.region.empty()) c.region = "us-east-1";
  c.endpoint = endpoint_override;
  if (c.endpoint.empty()) c.endpoint = env_value(env, "AWS_ENDPOINT_URL_S3", env_value(env, "AWS_ENDPOINT_URL"));
  if (c.endpoint.empty()) c.endpoint = profile.config_value("endpoint_url");
  while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
  return c;
}

std::string s3_encode_key(const std::string& key) { return percent_encode(key, true); }

std::string s3_object_url(const S3Location& loc, const S3Config& config) {
  const std::string key = s3_encode_key(loc.key);
  if (!config.endpoint.empty()) return config.endpoint + "/" + loc.bucket + "/" + key;  // path-style
  // Bucket names with dots do not match AWS's wildcard certificate as a host name: address them path-style.
  if (loc.bucket.find('.') != std::string::npos)
    return "https://s3." + config.region + ".amazonaws.com/" + loc.bucket + "/" + key;
  return "https://" + loc.bucket + ".s3." + config.region + ".amazonaws.com/" + key;
}

}  // namespace fovea
