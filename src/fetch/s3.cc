#include "fetch/s3.h"

#include <cctype>
#include <cstdlib>
#include <map>
#include <sstream>

#include "core/local_file.h"
#include "fetch/fetch.h"

namespace fovea {
namespace {

using IniSection = std::map<std::string, std::string>;

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The `name` section of an AWS-style INI file ({} when the file is missing); read by the one local-file reader,
// so a FIFO or device named by AWS_SHARED_CREDENTIALS_FILE fails the fetch instead of hanging it.
IniSection read_ini_section(const std::string& path, const std::string& name) {
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

std::string env_or(const EnvLookup& env, const char* name, const std::string& fallback = "") {
  const char* v = env(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

bool valid_bucket(const std::string& b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char c : b)
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' ||
          c == '.' || c == '_'))
      return false;
  return true;
}

}  // namespace

// Comments start with '#' or ';'; nested (indented) sub-settings such as `s3 =` blocks are skipped.
std::map<std::string, std::string> parse_ini_section(const std::string& text, const std::string& name) {
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

S3Config resolve_s3_config(const std::string& endpoint_override, const EnvLookup& env_in) {
  const EnvLookup env = env_in ? env_in : EnvLookup([](const char* n) -> const char* { return std::getenv(n); });
  const std::string home = env_or(env, "HOME");
  const std::string profile = env_or(env, "AWS_PROFILE", "default");
  const std::string credentials_file =
      env_or(env, "AWS_SHARED_CREDENTIALS_FILE", home.empty() ? "" : home + "/.aws/credentials");
  const std::string config_file = env_or(env, "AWS_CONFIG_FILE", home.empty() ? "" : home + "/.aws/config");
  // ~/.aws/config names profiles "[profile NAME]", except the default one.
  const IniSection config = read_ini_section(config_file, profile == "default" ? "default" : "profile " + profile);
  const auto from_config = [&](const char* key) {
    const auto it = config.find(key);
    return it == config.end() ? std::string() : it->second;
  };

  S3Config c;
  c.access_key = env_or(env, "AWS_ACCESS_KEY_ID");
  c.secret_key = env_or(env, "AWS_SECRET_ACCESS_KEY");
  c.session_token = env_or(env, "AWS_SESSION_TOKEN");
  if (c.access_key.empty() || c.secret_key.empty()) {
    IniSection creds = read_ini_section(credentials_file, profile);
    c.access_key = creds["aws_access_key_id"];
    c.secret_key = creds["aws_secret_access_key"];
    c.session_token = creds["aws_session_token"];
    if (c.access_key.empty() || c.secret_key.empty()) {  // the config file may hold keys too
      c.access_key = from_config("aws_access_key_id");
      c.secret_key = from_config("aws_secret_access_key");
      c.session_token = from_config("aws_session_token");
    }
  }
  c.region = env_or(env, "AWS_REGION", env_or(env, "AWS_DEFAULT_REGION", from_config("region")));
  if (c.region.empty()) c.region = "us-east-1";
  c.endpoint = endpoint_override;
  if (c.endpoint.empty()) c.endpoint = env_or(env, "AWS_ENDPOINT_URL_S3", env_or(env, "AWS_ENDPOINT_URL"));
  if (c.endpoint.empty()) c.endpoint = from_config("endpoint_url");
  while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
  return c;
}

std::string s3_encode_key(const std::string& key) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += char(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string s3_object_url(const S3Location& loc, const S3Config& config) {
  const std::string key = s3_encode_key(loc.key);
  if (!config.endpoint.empty()) return config.endpoint + "/" + loc.bucket + "/" + key;  // path-style
  // Bucket names with dots do not match AWS's wildcard certificate as a host name: address them path-style.
  if (loc.bucket.find('.') != std::string::npos)
    return "https://s3." + config.region + ".amazonaws.com/" + loc.bucket + "/" + key;
  return "https://" + loc.bucket + ".s3." + config.region + ".amazonaws.com/" + key;
}

}  // namespace fovea
