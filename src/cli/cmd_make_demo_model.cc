// fovea make-demo-model --out DIR [--seed N]: writes the tiny random-weight demo checkpoint (model/demo_model.h).
#include <cstdio>

#include "cli/command.h"
#include "core/error.h"
#include "model/demo_model.h"

namespace fovea {
namespace {

int make_demo_model_main(const std::vector<std::string>& argv) {
  const Args args(argv);
  args.allow_only({"--out", "--seed"});
  FOVEA_CHECK(args.positional().empty(), "unexpected argument '", args.positional().empty() ? "" : args.positional()[0],
              "' (usage: fovea make-demo-model --out DIR [--seed N])");
  const std::string out = args.get("--out");
  FOVEA_CHECK(!out.empty(), "--out DIR is required (usage: fovea make-demo-model --out DIR [--seed N])");
  const int seed = args.get_int("--seed", 0);
  FOVEA_CHECK(seed >= 0, "--seed must be >= 0");
  write_demo_model(out, uint64_t(seed));
  std::printf("wrote demo model (random weights) to %s\n", out.c_str());
  return 0;
}

const CommandRegistration registration{"make-demo-model", "write a tiny random-weight InternVL2 checkpoint",
                                       make_demo_model_main};

}  // namespace
}  // namespace fovea
