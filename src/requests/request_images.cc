#include "requests/request_images.h"

#include "core/error.h"
#include "fetch/fetch.h"

namespace fovea {

ImageInput load_request_image(const std::string& ref, const MediaOptions& media) {
  ImageInput image;
  image.label = ref.rfind("data:", 0) == 0 ? std::string("data: URL") : is_fetch_url(ref) ? redact_url(ref) : ref;
  try {
    image.bytes = load_image_url(ref, media);
  } catch (const std::exception& e) {
    throw RequestError(ErrorKind::InvalidImage, e.what());
  }
  return image;
}

}  // namespace fovea
