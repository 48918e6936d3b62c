#include "fetch/aws_config.h"

#include <cctype>
#include <cstdlib>
#include <sstream>

#include "core/local_file.h"
#include "fetch/fetch.h"

namespace fovea {
namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The `name` section of an AWS-style INI file ({} when the path is empty or the file missing); read by the one
// local-file reader, so a FIFO or device named by AWS_SHARED_CREDENTIALS_FILE fails the fetch instead of hanging it.
IniSection read_ini_section(const std::string& path, const std::string& name) {
  if (path.empty()) return {};
  LocalFileLimits limits;
  limits.max_bytes = 1 << 20;
  limits.allow_empty = true;
  try {
    return parse_ini_section(read_local_file(path, limits, "AWS config file"), name);
  } catch (const LocalFileError& e) {
    if (e.reason() == LocalFileError::Reason::NotFound) return {};
    throw FetchError(e.what(), false);
  }
}

}  // namespace

// Comments start with '#' or ';'; nested (indented) sub-settings such as `s3 =` blocks are skipped.
IniSection parse_ini_section(const std::string& text, const std::string& name) {
  IniSection out;
  std::istringstream in(text);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    const bool indented = !line.empty() && (line[0] == ' ' || line[0] == '\t');
    line = trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      inside = trim(line.substr(1, line.size() - 2)) == name;
      continue;
    }
    const size_t eq = line.find('=');
    if (!inside || indented || eq == std::string::npos) continue;
    out[trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
  }
  return out;
}

EnvLookup env_or_process(const EnvLookup& env) {
  if (env) return env;
  return [](const char* name) -> const char* { return std::getenv(name); };
}

std::string env_value(const EnvLookup& env, const char* name, const std::string& fallback) {
  const char* v = env(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

bool env_flag(const EnvLookup& env, const char* name) {
  std::string v = env_value(env, name);
  for (char& c : v) c = char(std::tolower(static_cast<unsigned char>(c)));
  return v == "true" || v == "1" || v == "yes";
}

std::string AwsProfile::config_value(const std::string& key) const {
  const auto it = config.find(key);
  return it == config.end() ? std::string() : it->second;
}

AwsProfile load_aws_profile(const EnvLookup& env) {
  const std::string home = env_value(env, "HOME");
  AwsProfile p;
  p.name = env_value(env, "AWS_PROFILE", "default");
  p.credentials = read_ini_section(
      env_value(env, "AWS_SHARED_CREDENTIALS_FILE", home.empty() ? "" : home + "/.aws/credentials"), p.name);
  p.config = read_ini_section(env_value(env, "AWS_CONFIG_FILE", home.empty() ? "" : home + "/.aws/config"),
                              p.name == "default" ? "default" : "profile " + p.name);
  return p;
}

std::string aws_region(const EnvLookup& env, const AwsProfile& profile) {
  return env_value(env, "AWS_REGION", env_value(env, "AWS_DEFAULT_REGION", profile.config_value("region")));
}

}  // namespace fovea
