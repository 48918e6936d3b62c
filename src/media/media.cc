#include "media/media.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <cstdlib>

#include "core/local_file.h"
#include "fetch/fetch.h"

namespace fovea {
namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

std::string percent_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const std::string hex = s.substr(i + 1, 2);
      char* end = nullptr;
      const long v = std::strtol(hex.c_str(), &end, 16);
      if (end == hex.c_str() + 2) {
        out += char(v);
        i += 2;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

bool starts_with_ci(const std::string& s, const std::string& prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

std::string load_data_url(const std::string& url, int64_t max_bytes) {
  const size_t comma = url.find(',');
  if (comma == std::string::npos) throw MediaError("malformed data: URL (no comma)");
  const std::string meta = url.substr(5, comma - 5);
  const bool is_base64 = meta.size() >= 7 && meta.compare(meta.size() - 7, 7, ";base64") == 0;
  // The encoded size bounds the decoded size, so a huge payload is refused before decoding it.
  if (int64_t(url.size() - comma) > max_bytes * 4 / 3 + 8)
    throw MediaError(str("image in data: URL is larger than the limit of ", max_bytes, " bytes"));
  std::string bytes = is_base64 ? base64_decode(url.substr(comma + 1)) : percent_decode(url.substr(comma + 1));
  if (bytes.empty()) throw MediaError("empty image in data: URL");
  if (int64_t(bytes.size()) > max_bytes)
    throw MediaError(str("image in data: URL is larger than the limit of ", max_bytes, " bytes"));
  return bytes;
}

// Local media: inside the allowed directory after resolving links, read by the one local-file reader
// (core/local_file.h: regular files only, never blocking on a FIFO, size checked before reading, a deadline).
// A path outside the directory and a missing path get the same message, so a client cannot probe which files
// exist elsewhere. The path that was opened, not the one resolved before, must lie inside the directory (a link
// swapped in between is caught).
std::string read_local_file(const std::string& path, const MediaOptions& options) {
  if (options.allowed_media_dir.empty())
    throw MediaError("local image paths are not allowed (start the server with --allowed-media-dir DIR)");
  // With "/" (a batch file's or Python's own paths) there is no directory to name.
  const std::string unavailable = options.allowed_media_dir == "/"
                                      ? str("image file not found: ", excerpt(path, 256))
                                      : str("image file not found in the allowed media directory: ", excerpt(path, 256));
  try {
    check_local_path(path, "image file");
    // Relative paths are taken relative to the allowed directory.
    const std::string full = path[0] == '/' ? path : options.allowed_media_dir + "/" + path;
    const std::string inside = path_inside(full, options.allowed_media_dir);
    if (inside.empty()) throw MediaError(unavailable);
    LocalFileLimits limits;
    limits.max_bytes = options.max_bytes;
    limits.timeout_ms = options.local_timeout_ms;
    LocalFile file(inside, limits, "image file", path);
    if (path_inside(str("/proc/self/fd/", file.fd()), options.allowed_media_dir).empty()) throw MediaError(unavailable);
    return file.read_all();
  } catch (const LocalFileError& e) {
    if (e.reason() == LocalFileError::Reason::NotFound) throw MediaError(unavailable);
    throw MediaError(e.what());
  }
}

// http(s):// with --allow-remote-media; s3:// only with --allow-s3-media too, since it reads with the server's
// own credentials. Fetches are shared by every handler thread through one limiter.
std::string load_remote(const std::string& url, const MediaOptions& options) {
  if (!options.allow_remote)
    throw MediaError("remote image URLs are not allowed (start the server with --allow-remote-media)");
  if (starts_with_ci(url, "s3://") && !options.allow_s3)
    throw MediaError("s3:// image URLs are not allowed (start the server with --allow-s3-media)");
  static FetchLimiter limiter(16);
  FetchOptions fetch;
  fetch.max_bytes = options.max_bytes;
  fetch.timeout_ms = options.remote_timeout_ms;
  fetch.connect_timeout_ms = std::min(options.remote_timeout_ms, 10000);
  fetch.retries = options.remote_retries;
  fetch.ca_file = options.ca_file;
  fetch.s3_endpoint = options.s3_endpoint;
  try {
    std::string bytes = limiter.fetch(url, fetch);
    if (bytes.empty()) throw MediaError(str("empty image at ", redact_url(url)));
    return bytes;
  } catch (const FetchError& e) {
    throw MediaError(e.what());
  }
}

}  // namespace

std::string base64_decode(const std::string& text) {
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  size_t padding = 0;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    const int v = base64_value(c);
    if (v < 0 || padding > 0) throw MediaError("invalid base64 in data: URL");
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xff);
    }
  }
  if (padding > 2 || bits >= 6) throw MediaError("invalid base64 length in data: URL");
  return out;
}

std::string base64_encode(const std::string& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t n = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8 | uint8_t(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(n >> shift) & 63];
  }
  if (i < bytes.size()) {
    uint32_t n = uint32_t(uint8_t(bytes[i])) << 16;
    if (i + 1 < bytes.size()) n |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string path_inside(const std::string& path, const std::string& dir) {
  char resolved_path[PATH_MAX];
  char resolved_dir[PATH_MAX];
  if (::realpath(path.c_str(), resolved_path) == nullptr || ::realpath(dir.c_str(), resolved_dir) == nullptr)
    return "";
  std::string base = resolved_dir;
  if (base.empty() || base.back() != '/') base += '/';
  const std::string p = resolved_path;
  return p.rfind(base, 0) == 0 ? p : "";
}

std::string load_image_url(const std::string& url, const MediaOptions& options) {
  if (url.empty()) throw MediaError("empty image_url");
  if (starts_with_ci(url, "data:")) return load_data_url(url, options.max_bytes);
  if (starts_with_ci(url, "file://")) {
    std::string rest = url.substr(7);
    if (rest.rfind("localhost/", 0) == 0) rest = rest.substr(9);
    return read_local_file(percent_decode(rest), options);
  }
  if (is_fetch_url(url)) return load_remote(url, options);
  const size_t colon = url.find(':');
  const size_t slash = url.find('/');
  if (colon != std::string::npos && (slash == std::string::npos || colon < slash) && colon > 1)
    throw MediaError(str("unsupported image URL scheme: ", url.substr(0, colon)));
  return read_local_file(url, options);
}

}  // namespace fovea
