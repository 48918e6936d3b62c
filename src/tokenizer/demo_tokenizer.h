// A small SentencePiece BPE tokenizer.model in the style of InternLM2's, written by our own code, for the demo
// model (`fovea make-demo-model`) and for tests that must not depend on ../shared: <unk> <s> </s>, byte-fallback
// pieces <0x00>..<0xFF>, a few hundred pieces learned deterministically from an embedded English + Chinese text,
// whitespace as "▁", no dummy prefix; then InternLM2/InternVL special pieces as CONTROL pieces (so user text is
// never parsed into them), with <img>, </img>, <IMG_CONTEXT> the last three ids of the vocabulary.
#pragma once
#include <string>

#include "tokenizer/sp_model_proto.h"

namespace fovea {

struct DemoTokenizerIds {
  int vocab_size = 0;
  int im_start = -1, im_end = -1;
  int img_start = -1, img_end = -1, img_context = -1;
  int bos = 1, eos = 2;
};

// Writes the model to `path` (a file name, normally .../tokenizer.model); throws fovea::Error if it cannot.
DemoTokenizerIds write_demo_sentencepiece_model(const std::string& path);

// The same model in memory, and its ids (for tests).
SpModelProto build_demo_sentencepiece_model(DemoTokenizerIds* ids = nullptr);

}  // namespace fovea
