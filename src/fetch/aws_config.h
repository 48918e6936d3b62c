// The AWS settings every S3 request starts from, read the way the AWS SDKs read them: the environment (through
// an EnvLookup, so tests pass their own) and the profile's sections of the shared credentials and config files.
#pragma once
#include <functional>
#include <map>
#include <string>

namespace fovea {

// name -> value or nullptr; ::getenv in the product, a map in tests.
using EnvLookup = std::function<const char*(const char*)>;

// `env` itself, or ::getenv when it is empty.
EnvLookup env_or_process(const EnvLookup& env);

// The variable's value, or `fallback` when it is unset or empty.
std::string env_value(const EnvLookup& env, const char* name, const std::string& fallback = "");

// True for "true"/"1"/"yes" in any case (AWS_EC2_METADATA_DISABLED and friends).
bool env_flag(const EnvLookup& env, const char* name);

using IniSection = std::map<std::string, std::string>;

// The `name` section ("default", "profile dev") of an AWS-style INI text: key -> value, trimmed.
IniSection parse_ini_section(const std::string& text, const std::string& name);

// The profile AWS_PROFILE (default "default") from AWS_SHARED_CREDENTIALS_FILE (default ~/.aws/credentials) and
// AWS_CONFIG_FILE (default ~/.aws/config, where it is "[profile NAME]" except for the default one).
struct AwsProfile {
  std::string name;
  IniSection credentials;
  IniSection config;
  std::string config_value(const std::string& key) const;  // "" when absent
};
AwsProfile load_aws_profile(const EnvLookup& env);

// AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`, else "" (callers choose their default).
std::string aws_region(const EnvLookup& env, const AwsProfile& profile);

}  // namespace fovea
