"""A SentencePiece tokenizer.model (a serialized ModelProto, sentencepiece_model.proto) read with a small
protobuf wire-format reader: the pieces (string, score, type) and the trainer/normalizer fields peer_files.py
needs. Why not sentencepiece.SentencePieceProcessor: newer sentencepiece releases refuse to load a model whose
vocabulary holds a piece with a NUL character ("piece must not include null character"), and InternLM2's
tokenizer.model has one (id 354, the piece "\\x00"). Reading the proto needs neither sentencepiece nor protobuf.
"""
import struct

# SentencePiece.Type (sentencepiece_model.proto); a piece without the field is NORMAL.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
# TrainerSpec.ModelType; a spec without the field is UNIGRAM.
UNIGRAM, BPE, WORD, CHAR = 1, 2, 3, 4


class ProtoError(ValueError):
    pass


def _varint(data, pos):
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise ProtoError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ProtoError("varint longer than 10 bytes")


def fields(data):
    """(field number, wire type, value) of one message: an int for varints, bytes for fixed and length-delimited
    fields (fixed32/64 as their raw little-endian bytes)."""
    pos, out = 0, []
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = data[pos:pos + size], pos + size
        elif wire == 2:
            size, pos = _varint(data, pos)
            value, pos = data[pos:pos + size], pos + size
        else:
            raise ProtoError(f"unsupported wire type {wire} (field {number})")
        if pos > len(data):
            raise ProtoError(f"field {number} runs past the end of its message")
        out.append((number, wire, value))
    return out


def _scalars(data, defaults, kinds):
    """The last value of each field in `kinds` ({number: 'bool'|'int'|'str'|'bytes'}), else `defaults`."""
    out = dict(defaults)
    for number, wire, value in fields(data):
        kind = kinds.get(number)
        if kind is None:
            continue
        if (wire == 0) != (kind in ("bool", "int")):
            raise ProtoError(f"field {number}: wire type {wire} where a {kind} belongs")
        out[number] = bool(value) if kind == "bool" else value.decode("utf-8") if kind == "str" else value
    return out


def read_model(path):
    """{'pieces': [(piece, score, type)], 'model_type', 'byte_fallback', 'unk_id', 'add_dummy_prefix',
    'remove_extra_whitespaces', 'normalizer_name', 'precompiled_charsmap'} of a tokenizer.model. Piece strings are
    kept exactly as the vocabulary holds them (a NUL character included)."""
    with open(path, "rb") as f:
        data = f.read()
    pieces, trainer, normalizer = [], b"", b""
    for number, wire, value in fields(data):
        if wire != 2:
            continue
        if number == 1:  # repeated SentencePiece pieces: piece = 1, score = 2 (float), type = 3
            piece, score, kind = "", 0.0, NORMAL
            for n, w, v in fields(value):
                if n == 1 and w == 2:
                    piece = v.decode("utf-8")
                elif n == 2 and w == 5:
                    score = struct.unpack("<f", v)[0]
                elif n == 3 and w == 0:
                    kind = v
            pieces.append((piece, score, kind))
        elif number == 2:
            trainer = value
        elif number == 3:
            normalizer = value
    if not pieces:
        raise ProtoError(f"{path} holds no pieces: not a SentencePiece model")
    t = _scalars(trainer, {3: UNIGRAM, 35: False, 40: 0}, {3: "int", 35: "bool", 40: "int"})
    n = _scalars(normalizer, {1: "", 2: b"", 3: True, 4: True},
                 {1: "str", 2: "bytes", 3: "bool", 4: "bool"})
    return {"pieces": pieces, "model_type": t[3], "byte_fallback": t[35], "unk_id": t[40],
            "normalizer_name": n[1], "precompiled_charsmap": n[2], "add_dummy_prefix": n[3],
            "remove_extra_whitespaces": n[4]}
