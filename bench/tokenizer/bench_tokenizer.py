#!/usr/bin/env python3
"""Encoding speed of Fovea's tokenizers vs the Hugging Face `tokenizers` library, one thread, same text.

    python3 bench/tokenizer/bench_tokenizer.py [--build build] [--shared ../shared] [--repeats 10]

Needs the `bench_tokenizer` binary (built with the tests: cmake --build build --target bench_tokenizer),
../shared/data/tokenizers, and `pip install tokenizers` (plus `sentencepiece protobuf` for the InternLM2 row).
Qwen2: HF gets a tokenizer.json built here from vocab.json + merges.txt (Qwen2's NFC + split regex + ByteLevel).
InternLM2: the reference is libsentencepiece (python `sentencepiece`, which needs the model's NUL piece renamed);
HF `tokenizers` has no loader for tokenizer.model.
The text: the test-vector inputs and the committed fuzz inputs, repeated to about 400 kB.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(REPO, 'tests', 'tokenizer'))


def bench_text(shared):
    parts = [os.path.join(shared, 'data', 'tokenizers', 'vectors', 'internlm2.inp'),
             os.path.join(REPO, 'tests', 'tokenizer', 'golden', 'qwen2_fuzz.inp'),
             os.path.join(REPO, 'tests', 'tokenizer', 'golden', 'internlm2_fuzz.inp')]
    text = ''.join(open(p, encoding='utf-8').read() for p in parts)
    return text * max(1, 400_000 // len(text.encode()))


def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fovea_row(binary, tokenizer_path, text_path, repeats):
    out = subprocess.run([binary, tokenizer_path, text_path, str(repeats)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--build', default=os.path.join(REPO, 'build'))
    ap.add_argument('--shared', default=os.path.join(REPO, '..', 'shared'))
    ap.add_argument('--repeats', type=int, default=10)
    args = ap.parse_args()
    os.environ.setdefault('RAYON_NUM_THREADS', '1')  # HF tokenizers: one thread, like ours
    os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false')
    binary = os.path.join(args.build, 'bench_tokenizer')
    text = bench_text(args.shared)
    text_path = os.path.join(args.build, 'bench_tokenizer_text.txt')
    with open(text_path, 'w', encoding='utf-8', newline='') as f:
        f.write(text)
    import gen_fuzz_vectors as ref  # the same reference builders the golden files come from
    ref.SHARED = os.path.join(args.shared, 'data', 'tokenizers')

    lines = text.splitlines(keepends=True)
    rows = []
    qwen2_dir = os.path.join(args.shared, 'data', 'tokenizers', 'qwen2')
    ours = fovea_row(binary, qwen2_dir, text_path, args.repeats)
    start = time.perf_counter()
    hf = ref.qwen2_reference()
    hf_load = time.perf_counter() - start
    hf_s = median_time(lambda: hf.encode(text), args.repeats)
    hf_lines = median_time(lambda: [hf.encode(line) for line in lines], args.repeats)
    rows.append(('qwen2', ours, hf_load, hf_s, hf_lines, 'HF tokenizers', len(hf.encode(text).ids)))
    try:
        start = time.perf_counter()
        sp = ref.internlm2_reference()
        sp_load = time.perf_counter() - start
        sp_s = median_time(lambda: sp.encode(text), args.repeats)
        sp_lines = median_time(lambda: [sp.encode(line) for line in lines], args.repeats)
        ours = fovea_row(binary, os.path.join(args.shared, 'data', 'tokenizers', 'internlm2', 'tokenizer.model'),
                         text_path, args.repeats)
        rows.append(('internlm2', ours, sp_load, sp_s, sp_lines, 'sentencepiece', len(sp.encode(text))))
    except ImportError as e:
        print('internlm2 row skipped:', e, file=sys.stderr)

    nbytes = len(text.encode())
    print('text: %d bytes; one thread; median of %d runs' % (nbytes, args.repeats))
    print('| tokenizer | ref | load s ours / ref | whole text s ours / ref | %d lines s ours / ref | '
          'same token count | prompt µs ours (tokens) |' % len(lines))
    print('|---|---|---|---|---|---|---|')
    for name, o, ref_load, ref_s, ref_lines, ref_name, ref_tokens in rows:
        print('| %s | %s | %.3f / %.3f | %.4f / %.4f | %.4f / %.4f | %s | %.1f (%d) |' % (
            name, ref_name, o['load_s'], ref_load, o['encode_s'], ref_s, o['lines_s'], ref_lines,
            o['tokens'] == ref_tokens, o['prompt_us'], o['prompt_tokens']))

if __name__ == '__main__':
    main()
