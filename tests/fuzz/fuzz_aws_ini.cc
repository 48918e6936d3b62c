// The ~/.aws config and credentials files (AWS-style INI) behind s3:// URLs: the section parser on any text, and
// resolve_s3_config reading the text as both files through the environment variables that name them. Hostile
// files may only fail as fovea::Error.
#include <cstdint>
#include <cstring>

#include "fetch/s3.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fovea::fuzz::expect_only_fovea_errors([&] {
    for (const char* section : {"default", "profile dev", "dev", ""}) (void)fovea::parse_ini_section(text, section);
    static const std::string path = (fovea::fuzz::scratch_dir() / "aws").string();
    fovea::fuzz::write_scratch("aws", text.data(), text.size());
    const fovea::EnvLookup env = [](const char* name) -> const char* {
      if (std::strcmp(name, "AWS_SHARED_CREDENTIALS_FILE") == 0 || std::strcmp(name, "AWS_CONFIG_FILE") == 0)
        return path.c_str();
      if (std::strcmp(name, "AWS_PROFILE") == 0) return "dev";
      if (std::strcmp(name, "AWS_EC2_METADATA_DISABLED") == 0) return "true";  // no metadata service calls
      return nullptr;
    };
    const fovea::S3Config config = fovea::resolve_s3_config("", env);
    (void)fovea::s3_object_url({"bucket", "a/key.png"}, config);
  });
  return 0;
}
