// s3://bucket/key -> the HTTP request that reads it: the endpoint, the region and credentials from the usual
// AWS sources. libcurl signs the request (SigV4, CURLOPT_AWS_SIGV4); this decides what it signs with.
//
// Credentials: the AWS SDKs' default chain (fetch/aws_credentials.h: environment, web identity, profile,
// container, instance metadata); none -> unsigned requests (public buckets). Region: AWS_REGION, AWS_DEFAULT_REGION, the profile's `region` in AWS_CONFIG_FILE (default
// ~/.aws/config), else us-east-1. Endpoint: FetchOptions::s3_endpoint, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the
// profile's `endpoint_url`, else AWS (virtual-hosted https://BUCKET.s3.REGION.amazonaws.com). A custom endpoint
// is addressed path-style (ENDPOINT/BUCKET/KEY), which every S3-compatible store understands.
#pragma once
#include <string>

#include "fetch/aws_config.h"
#include "fetch/aws_credentials.h"

namespace fovea {

struct S3Location {
  std::string bucket;
  std::string key;  // as written after the bucket, not percent-encoded
};

struct S3Config {
  std::string access_key;
  std::string secret_key;
  std::string session_token;
  std::string credentials_source;  // which source of the chain gave them ("" when unsigned)
  std::string why_unsigned;        // when unsigned: what the chain's last sources said
  std::string region = "us-east-1";
  std::string endpoint;  // "" = AWS itself
};

// Throws FetchError unless `url` is s3://BUCKET/KEY with a plausible bucket name and a non-empty key.
S3Location parse_s3_url(const std::string& url);

// Reads the environment (through `env`, ::getenv by default) and the AWS files it points to; credentials come
// from `chain` (default: the process's chain, or a chain of its own over `env` when one is given). Throws
// FetchError when a configured credential source fails.
S3Config resolve_s3_config(const std::string& endpoint_override, const EnvLookup& env = nullptr,
                           AwsCredentialChain* chain = nullptr);

// The http(s) URL of the object.
std::string s3_object_url(const S3Location& location, const S3Config& config);

// RFC 3986 percent-encoding of everything but unreserved characters and '/', as S3's canonical URI wants.
std::string s3_encode_key(const std::string& key);

}  // namespace fovea
