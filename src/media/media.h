// Where the images of a chat request come from: `data:` URLs (base64), local files (file:// or a plain path)
// only inside --allowed-media-dir, http(s):// URLs only with --allow-remote-media and s3:// also with
// --allow-s3-media (src/fetch: timeouts, retries, a size limit). Everything else is refused with a clear
// message (MediaError -> HTTP 400).
#pragma once
#include <cstdint>
#include <string>

#include "core/error.h"

namespace fovea {

struct MediaOptions {
  std::string allowed_media_dir;  // empty: no local files
  bool allow_remote = false;  // http(s):// URLs (fetched through src/fetch)
  bool allow_s3 = false;      // s3:// URLs too (read with the server's AWS credentials)
  int64_t max_bytes = 20ll * 1024 * 1024;
  int remote_timeout_ms = 10000;
  int remote_retries = 2;     // after 5xx / timeouts / connection errors, with backoff
  std::string ca_file;        // TLS roots for https ("" = FOVEA_CA_BUNDLE or the system's)
  std::string s3_endpoint;    // "" = AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL / AWS
  int local_timeout_ms = 10000;  // to read one local file (regular files only)
};

// A request's fault (bad URL, refused source, missing file): the server answers 400 with this message.
class MediaError : public Error {
 public:
  using Error::Error;
};

// Decodes standard or URL-safe base64, ignoring whitespace; padding optional. Throws MediaError on bad input.
std::string base64_decode(const std::string& text);
std::string base64_encode(const std::string& bytes);

// Resolves one image_url to the encoded image bytes.
std::string load_image_url(const std::string& url, const MediaOptions& options);

// The canonical path of `path` if it lies inside `dir` (both resolved, symlinks followed), else "".
std::string path_inside(const std::string& path, const std::string& dir);

}  // namespace fovea
