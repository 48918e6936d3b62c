#!/usr/bin/env python3
"""Writes golden/{qwen2,internlm2}_fuzz.{inp,out}: random texts (fixed seed) built to hit the edge cases of the
Qwen2 pre-tokenizer regex, NFC and SentencePiece merging, with the ids the reference libraries give.

Run from the repository root with ../shared present:
    pip install tokenizers sentencepiece protobuf
    python3 tests/tokenizer/gen_fuzz_vectors.py
Qwen2 reference: Hugging Face `tokenizers` (a tokenizer.json built here from vocab.json + merges.txt with Qwen2's
normalizer/pre-tokenizer/decoder). InternLM2 reference: `sentencepiece` 0.2.x, which refuses the model's NUL
piece, so the model is loaded with that one piece renamed (same ids); no text here contains a NUL.
"""
import json
import os
import random

from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(ROOT, '..', '..', '..', 'shared', 'data', 'tokenizers')
QWEN2_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
               "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
SEPARATOR = '\n__ggml_vocab_test__\n'

FRAGMENTS = [
    'Hello', 'world', ' the', 'bunk bed', "'s", "'T", "'re", "'LL", "'d", "'ve", "'M", "don't", "ſ", "'ſ",
    ' ', '  ', '   ', '\t', '\n', '\r\n', '\n\n', ' \n ', '\u3000', '\u00a0', '\u2009', '\u200b', '\u2028',
    '1', '42', '2024', '3.14', '½', '٣', '①', '!', '?!', '...', '--', '()', '"', '#', '@', '$', '%', '&', '*',
    '图中有', '双层床', '你好，世界。', '，', '。', '！', '床', 'ｅｆ', 'Ｅ', '——', '……',
    'e\u0301', 'a\u0323\u0307', 'A\u030a', '\u212b', '\u1100\u1161\u11a8', '한국어', 'Ω', 'ﬁ', 'x\u0338',
    'Привет', 'مرحبا', 'नमस्ते', 'ελληνικά', 'café', 'naïve', 'Ünïcödé',
    '😀', '🚀', '👍🏽', '👨‍👩‍👧', '✅', '🇨🇳', '\U0001f600\U0001f680',
    '<|im_start|>', '<img>', '</s>', '<s>', '[UNUSED_TOKEN_3]', '▁', '▁▁',
    'def f(x):', '    return x', '{"a": 1}', 'https://example.com/a?b=c', 'C++', 'e-mail',
]


def random_texts(count, seed):
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        parts = [rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 8))]
        if rng.random() < 0.3:
            parts.append(''.join(chr(rng.randint(0x20, 0x7e)) for _ in range(rng.randint(1, 12))))
        if rng.random() < 0.2:
            parts.append(''.join(chr(rng.choice([rng.randint(0x4e00, 0x9fff), rng.randint(0xac00, 0xd7a3),
                                                 rng.randint(0x300, 0x36f), rng.randint(0x1f300, 0x1f64f)]))
                                 for _ in range(rng.randint(1, 5))))
        texts.append(''.join(parts))
    return texts


def long_pieces(seed):
    """Single pre-tokenizer pieces longer than 64 bytes (the encoder's heap path): letter and symbol runs."""
    rng = random.Random(seed)
    words = ['bunk', 'bed', 'room', 'window', 'Table', 'the', 'ing', 'tion', 'ſ', 'é', 'ß', 'Привет', '床', '图中']
    texts = [''.join(rng.choice(words) for _ in range(rng.randint(20, 80))) for _ in range(6)]
    texts += [''.join(rng.choice('!?.,;:-=+*#@$%^&()[]{}<>/|~') for _ in range(rng.randint(70, 200))) for _ in range(3)]
    texts.append(' ' + 'a' * 300)
    return texts


def qwen2_reference():
    d = os.path.join(SHARED, 'qwen2')
    vocab = json.load(open(os.path.join(d, 'vocab.json'), encoding='utf-8'))
    merges = [l.rstrip('\n') for l in open(os.path.join(d, 'merges.txt'), encoding='utf-8')][1:]
    merges = [m for m in merges if m]
    spec = {
        'version': '1.0', 'truncation': None, 'padding': None, 'added_tokens': [],
        'normalizer': {'type': 'NFC'},
        'pre_tokenizer': {'type': 'Sequence', 'pretokenizers': [
            {'type': 'Split', 'pattern': {'Regex': QWEN2_REGEX}, 'behavior': 'Isolated', 'invert': False},
            {'type': 'ByteLevel', 'add_prefix_space': False, 'trim_offsets': False, 'use_regex': False}]},
        'post_processor': None,
        'decoder': {'type': 'ByteLevel', 'add_prefix_space': False, 'trim_offsets': False, 'use_regex': False},
        'model': {'type': 'BPE', 'dropout': None, 'unk_token': None, 'continuing_subword_prefix': '',
                  'end_of_word_suffix': '', 'fuse_unk': False, 'byte_fallback': False, 'ignore_merges': False,
                  'vocab': vocab, 'merges': merges},
    }
    return Tokenizer.from_str(json.dumps(spec))


def internlm2_reference():
    import sentencepiece as spm  # here, so that other generators can import this file without sentencepiece
    from sentencepiece import sentencepiece_model_pb2 as sp_pb2
    proto = sp_pb2.ModelProto()
    proto.ParseFromString(open(os.path.join(SHARED, 'internlm2', 'tokenizer.model'), 'rb').read())
    for piece in proto.pieces:
        if '\x00' in piece.piece:
            piece.piece = piece.piece.replace('\x00', '\U0010fffd')  # a private-use stand-in, never in our texts
    return spm.SentencePieceProcessor(model_proto=proto.SerializeToString())


def write(name, texts, ids):
    with open(os.path.join(ROOT, 'golden', name + '.inp'), 'w', encoding='utf-8', newline='') as f:
        f.write(SEPARATOR.join(texts) + SEPARATOR)
    with open(os.path.join(ROOT, 'golden', name + '.out'), 'w', encoding='utf-8', newline='') as f:
        for row in ids:
            f.write(''.join(' %d' % i for i in row) + '\n')


def main():
    qwen2 = qwen2_reference()
    texts = random_texts(400, seed=1) + long_pieces(seed=3)
    write('qwen2_fuzz', texts, [qwen2.encode(t).ids for t in texts])
    internlm2 = internlm2_reference()
    texts = random_texts(400, seed=2)
    write('internlm2_fuzz', texts, [internlm2.encode(t) for t in texts])


if __name__ == '__main__':
    main()
