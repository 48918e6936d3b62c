// fovea make-demo-images --out DIR: writes the quick start's synthetic photos (JPEG and PNG, listing sizes).
#include <cstdio>
#include <filesystem>

#include "cli/command.h"
#include "image/demo_images.h"
#include "image/encode.h"

namespace fovea {
namespace {

int run_make_demo_images(const std::vector<std::string>& argv) {
  const Args args(argv);
  args.allow_only({"--out"});
  const std::string out_dir = args.get("--out");
  FOVEA_CHECK(!out_dir.empty() && args.positional().empty(), "usage: fovea make-demo-images --out DIR");
  std::filesystem::create_directories(out_dir);
  int variant = 0;
  for (const DemoImageSpec& spec : demo_image_specs()) {
    const RgbImage image = make_demo_photo(spec.width, spec.height, variant++);
    const std::string path = (std::filesystem::path(out_dir) / spec.name).string();
    if (spec.name.ends_with(".png")) {
      write_png(path, image);
    } else {
      write_jpeg(path, image, 88);
    }
    std::printf("%s\n", path.c_str());
  }
  return 0;
}

const CommandRegistration registration{"make-demo-images", "write synthetic demo photos (JPEG/PNG) into a folder",
                                       run_make_demo_images};

}  // namespace
}  // namespace fovea
