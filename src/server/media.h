// Where the images of a chat request come from: `data:` URLs (base64), local files (file:// or a plain path)
// only inside --allowed-media-dir, http:// URLs only with --allow-remote-media (with a timeout and a size
// limit). Everything else is refused with a clear message (MediaError -> HTTP 400).
#pragma once
#include <cstdint>
#include <string>

#include "core/error.h"

namespace fovea {

struct MediaOptions {
  std::string allowed_media_dir;  // empty: no local files
  bool allow_remote = false;
  int64_t max_bytes = 20ll * 1024 * 1024;
  int remote_timeout_ms = 10000;
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
