// A request's image as a door names it -> its bytes, the same way for every door. An image that cannot be had
// (a missing or unreadable file, a refused source, a bad data: URL, a failed download) is the request's fault
// and of kind InvalidImage everywhere: a tasks line, an OpenAI body (served or from a batch file), Python and
// Ray. It says which part of the request to fix, as a corrupt image's error does, and it is what the server
// has always answered (OpenAI's code "invalid_image").
#pragma once
#include <string>

#include "fovea/request.h"
#include "media/media.h"

namespace fovea {

// A local path (relative ones as the caller resolved them), file:// or data: URL, or an http(s):// / s3:// URL
// when `media` allows remote sources. Throws RequestError(InvalidImage) with a message for the client.
ImageInput load_request_image(const std::string& ref, const MediaOptions& media);

}  // namespace fovea
