// fovea make-demo-model --out DIR [--seed N] [--quantize awq|gptq]: writes the tiny random-weight demo checkpoint
// (model/demo_model.h), optionally with its LLM linears packed to 4 bits as AWQ or GPTQ checkpoints store them.
#include <cstdio>

#include "cli/command.h"
#include "core/error.h"
#include "model/demo_model.h"

namespace fovea {
namespace {

constexpr const char* kUsage = "usage: fovea make-demo-model --out DIR [--seed N] [--quantize awq|gptq]";

WeightQuantMethod parse_quantize(const std::string& name) {
  if (name.empty() || name == "none") return WeightQuantMethod::None;
  if (name == "awq") return WeightQuantMethod::Awq;
  if (name == "gptq") return WeightQuantMethod::Gptq;
  FOVEA_FAIL("unknown --quantize '", name, "' (awq, gptq; ", kUsage, ")");
}

int make_demo_model_main(const std::vector<std::string>& argv) {
  const Args args(argv);
  args.allow_only({"--out", "--seed", "--quantize"});
  FOVEA_CHECK(args.positional().empty(), "unexpected argument '", args.positional().empty() ? "" : args.positional()[0],
              "' (", kUsage, ")");
  const std::string out = args.get("--out");
  FOVEA_CHECK(!out.empty(), "--out DIR is required (", kUsage, ")");
  const int seed = args.get_int("--seed", 0);
  FOVEA_CHECK(seed >= 0, "--seed must be >= 0");
  const std::string quantize = args.get("--quantize");
  write_demo_model(out, uint64_t(seed), parse_quantize(quantize));
  std::printf("wrote demo model (random weights%s) to %s\n",
              quantize.empty() || quantize == "none" ? "" : (", LLM linears 4-bit " + quantize).c_str(), out.c_str());
  return 0;
}

const CommandRegistration registration{
    "make-demo-model", "write a tiny random-weight InternVL2 checkpoint (--quantize awq|gptq: 4-bit LLM)",
    make_demo_model_main};

}  // namespace
}  // namespace fovea
