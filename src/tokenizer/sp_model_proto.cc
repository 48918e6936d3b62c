#include "tokenizer/sp_model_proto.h"

#include <cstring>
#include <string_view>

#include "core/error.h"

namespace fovea {
namespace {

// Field numbers from sentencepiece_model.proto.
enum : uint32_t {
  kModelPieces = 1,
  kModelTrainerSpec = 2,
  kModelNormalizerSpec = 3,
  kPieceText = 1,
  kPieceScore = 2,
  kPieceType = 3,
  kTrainerModelType = 3,
  kTrainerVocabSize = 4,
  kTrainerWhitespaceSuffix = 24,
  kTrainerByteFallback = 35,
  kTrainerUnkId = 40,
  kTrainerBosId = 41,
  kTrainerEosId = 42,
  kTrainerPadId = 43,
  kNormName = 1,
  kNormCharsmap = 2,
  kNormDummyPrefix = 3,
  kNormRemoveExtraSpaces = 4,
  kNormEscapeSpaces = 5,
};
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}
  bool done() const { return pos_ >= data_.size(); }

  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      FOVEA_CHECK(pos_ < data_.size(), "tokenizer.model: truncated varint");
      const auto byte = static_cast<uint8_t>(data_[pos_++]);
      value |= uint64_t(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    FOVEA_FAIL("tokenizer.model: varint longer than 10 bytes");
  }
  std::string_view bytes() {
    const uint64_t length = varint();
    FOVEA_CHECK(length <= data_.size() - pos_, "tokenizer.model: field of ", length, " bytes runs past the end");
    const std::string_view out = data_.substr(pos_, length);
    pos_ += length;
    return out;
  }
  float fixed32_float() {
    FOVEA_CHECK(data_.size() - pos_ >= 4, "tokenizer.model: truncated float");
    float value;
    std::memcpy(&value, data_.data() + pos_, 4);  // protobuf is little-endian, like every host we build for
    pos_ += 4;
    return value;
  }
  void skip(WireType type) {
    switch (type) {
      case kVarint:
        varint();
        return;
      case kFixed64:
        advance(8);
        return;
      case kLengthDelimited:
        bytes();
        return;
      case kFixed32:
        advance(4);
        return;
      default:
        FOVEA_FAIL("tokenizer.model: unsupported wire type ", int(type));
    }
  }

 private:
  void advance(size_t n) {
    FOVEA_CHECK(data_.size() - pos_ >= n, "tokenizer.model: truncated field");
    pos_ += n;
  }
  std::string_view data_;
  size_t pos_ = 0;
};

// Calls on_field(number, type, reader) for each field of a message; the callback consumes the value or skips it.
template <typename OnField>
void for_each_field(std::string_view message, OnField on_field) {
  WireReader reader(message);
  while (!reader.done()) {
    const uint64_t key = reader.varint();
    on_field(uint32_t(key >> 3), WireType(key & 7), reader);
  }
}

int32_t as_int32(uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

SpPiece parse_piece(std::string_view message) {
  SpPiece piece;
  for_each_field(message, [&](uint32_t field, WireType type, WireReader& r) {
    if (field == kPieceText && type == kLengthDelimited)
      piece.text = std::string(r.bytes());
    else if (field == kPieceScore && type == kFixed32)
      piece.score = r.fixed32_float();
    else if (field == kPieceType && type == kVarint)
      piece.type = SpPieceType(as_int32(r.varint()));
    else
      r.skip(type);
  });
  return piece;
}

void parse_trainer_spec(std::string_view message, SpModelProto& model) {
  for_each_field(message, [&](uint32_t field, WireType type, WireReader& r) {
    if (type != kVarint) return r.skip(type);
    const uint64_t v = r.varint();
    switch (field) {
      case kTrainerModelType:
        model.model_type = SpModelType(as_int32(v));
        break;
      case kTrainerVocabSize:
        model.vocab_size = as_int32(v);
        break;
      case kTrainerWhitespaceSuffix:
        model.treat_whitespace_as_suffix = v != 0;
        break;
      case kTrainerByteFallback:
        model.byte_fallback = v != 0;
        break;
      case kTrainerUnkId:
        model.unk_id = as_int32(v);
        break;
      case kTrainerBosId:
        model.bos_id = as_int32(v);
        break;
      case kTrainerEosId:
        model.eos_id = as_int32(v);
        break;
      case kTrainerPadId:
        model.pad_id = as_int32(v);
        break;
      default:
        break;
    }
  });
}

void parse_normalizer_spec(std::string_view message, SpNormalizerSpec& spec) {
  for_each_field(message, [&](uint32_t field, WireType type, WireReader& r) {
    if (field == kNormName && type == kLengthDelimited)
      spec.name = std::string(r.bytes());
    else if (field == kNormCharsmap && type == kLengthDelimited)
      spec.precompiled_charsmap = std::string(r.bytes());
    else if (field == kNormDummyPrefix && type == kVarint)
      spec.add_dummy_prefix = r.varint() != 0;
    else if (field == kNormRemoveExtraSpaces && type == kVarint)
      spec.remove_extra_whitespaces = r.varint() != 0;
    else if (field == kNormEscapeSpaces && type == kVarint)
      spec.escape_whitespaces = r.varint() != 0;
    else
      r.skip(type);
  });
}

// ---- writer ----

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += char((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += char(v);
}
void put_key(std::string& out, uint32_t field, WireType type) { put_varint(out, (uint64_t(field) << 3) | type); }
void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}
// Negative int32 values are sign-extended to 64 bits on the wire, as protobuf requires.
void put_int(std::string& out, uint32_t field, int64_t v) {
  put_key(out, field, kVarint);
  put_varint(out, static_cast<uint64_t>(v));
}
void put_float(std::string& out, uint32_t field, float v) {
  put_key(out, field, kFixed32);
  char raw[4];
  std::memcpy(raw, &v, 4);
  out.append(raw, 4);
}

}  // namespace

SpModelProto parse_sp_model(const std::string& bytes) {
  SpModelProto model;
  for_each_field(bytes, [&](uint32_t field, WireType type, WireReader& r) {
    if (type != kLengthDelimited) return r.skip(type);
    const std::string_view value = r.bytes();
    if (field == kModelPieces)
      model.pieces.push_back(parse_piece(value));
    else if (field == kModelTrainerSpec)
      parse_trainer_spec(value, model);
    else if (field == kModelNormalizerSpec)
      parse_normalizer_spec(value, model.normalizer);
  });
  return model;
}

std::string serialize_sp_model(const SpModelProto& model) {
  std::string out;
  for (const SpPiece& piece : model.pieces) {
    std::string message;
    put_bytes(message, kPieceText, piece.text);
    put_float(message, kPieceScore, piece.score);
    if (piece.type != SpPieceType::Normal) put_int(message, kPieceType, int(piece.type));
    put_bytes(out, kModelPieces, message);
  }
  std::string trainer;
  put_int(trainer, kTrainerModelType, int(model.model_type));
  put_int(trainer, kTrainerVocabSize, model.vocab_size > 0 ? model.vocab_size : int64_t(model.pieces.size()));
  if (model.treat_whitespace_as_suffix) put_int(trainer, kTrainerWhitespaceSuffix, 1);
  put_int(trainer, kTrainerByteFallback, model.byte_fallback ? 1 : 0);
  put_int(trainer, kTrainerUnkId, model.unk_id);
  put_int(trainer, kTrainerBosId, model.bos_id);
  put_int(trainer, kTrainerEosId, model.eos_id);
  put_int(trainer, kTrainerPadId, model.pad_id);
  put_bytes(out, kModelTrainerSpec, trainer);
  std::string normalizer;
  put_bytes(normalizer, kNormName, model.normalizer.name);
  if (!model.normalizer.precompiled_charsmap.empty())
    put_bytes(normalizer, kNormCharsmap, model.normalizer.precompiled_charsmap);
  put_int(normalizer, kNormDummyPrefix, model.normalizer.add_dummy_prefix ? 1 : 0);
  put_int(normalizer, kNormRemoveExtraSpaces, model.normalizer.remove_extra_whitespaces ? 1 : 0);
  put_int(normalizer, kNormEscapeSpaces, model.normalizer.escape_whitespaces ? 1 : 0);
  put_bytes(out, kModelNormalizerSpec, normalizer);
  return out;
}

}  // namespace fovea
