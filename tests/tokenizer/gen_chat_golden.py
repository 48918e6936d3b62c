#!/usr/bin/env python3
"""Writes golden/chat_hermes2_qwen2.txt: the ids Hugging Face `tokenizers` gives InternVL's Hermes-2 prompt
(InternVL2-1B style: Qwen2 tokenizer + <img>, </img>, <IMG_CONTEXT> added as special tokens 151646-151648), built
the way InternVL's chat() builds it: conversation.py's MPT template around '<image>\\n' + question, then
'<image>' replaced by <img> + <IMG_CONTEXT> x 256*tiles + </img>, and the whole string tokenized at once.

Run from the repository root with ../shared present:  pip install tokenizers && python3 tests/tokenizer/gen_chat_golden.py
"""
import json
import os

from tokenizers import AddedToken

import gen_fuzz_vectors as ref

SYSTEM = '你是由上海人工智能实验室联合商汤科技开发的书生多模态大模型，英文名叫InternVL, 是一个有用无害的人工智能助手。'
CASES = [  # (question, tiles per image)
    ('Is there a bunk bed in this room? Answer yes or no.', [1]),
    ('图中有3张以上的床，或者是有双层床，请直接给出是或者否。', [2]),
    ('  spaces, tabs\tand\nnewlines typed by a user  ', [1, 1]),
    ('No image at all.', []),
]


def prompt(question, tiles):
    q = '<image>\n' * len(tiles) + question  # Fovea's rule for several images; chat()'s for one
    text = '<|im_start|>system\n' + SYSTEM + '<|im_end|>' + '<|im_start|>user\n' + q + '<|im_end|>' + \
        '<|im_start|>assistant\n'
    for n in tiles:
        text = text.replace('<image>', '<img>' + '<IMG_CONTEXT>' * (256 * n) + '</img>', 1)
    return text


def main():
    tok = ref.qwen2_reference()
    specials = ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<img>', '</img>', '<IMG_CONTEXT>']
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in specials])
    assert tok.token_to_id('<|im_start|>') == 151644 and tok.token_to_id('<IMG_CONTEXT>') == 151648
    out = os.path.join(ref.ROOT, 'golden', 'chat_hermes2_qwen2.txt')
    with open(out, 'w', encoding='utf-8') as f:
        f.write('# question (JSON) / tiles / ids — from gen_chat_golden.py\n')
        for question, tiles in CASES:
            ids = tok.encode(prompt(question, tiles)).ids
            f.write(json.dumps(question, ensure_ascii=False) + '\n')
            f.write(' '.join(map(str, tiles)) + '\n')
            f.write(' '.join(map(str, ids)) + '\n')


if __name__ == '__main__':
    main()
