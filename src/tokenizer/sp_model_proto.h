// The parts of SentencePiece's ModelProto (sentencepiece_model.proto, proto2) that encoding needs, read and written
// with a hand-written protobuf wire codec: pieces (text, score, type), the trainer's model type and byte fallback,
// and the normalizer switches. Unknown fields are skipped, so newer files load too.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace fovea {

enum class SpPieceType : int { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };
enum class SpModelType : int { Unigram = 1, Bpe = 2, Word = 3, Char = 4 };

struct SpPiece {
  std::string text;  // may hold any bytes, NUL included (InternLM2 has such a piece)
  float score = 0.0f;
  SpPieceType type = SpPieceType::Normal;
};

struct SpNormalizerSpec {
  std::string name;
  std::string precompiled_charsmap;
  bool add_dummy_prefix = true;  // proto defaults
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

struct SpModelProto {
  std::vector<SpPiece> pieces;
  SpModelType model_type = SpModelType::Unigram;
  int vocab_size = 0;
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;
  int unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;
  SpNormalizerSpec normalizer;
};

// Throws fovea::Error on a truncated or malformed message.
SpModelProto parse_sp_model(const std::string& bytes);
std::string serialize_sp_model(const SpModelProto& model);

}  // namespace fovea
