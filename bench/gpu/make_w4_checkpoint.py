"""Writes an AWQ-format (AutoAWQ "gemm" packing, 4-bit, zero points) copy of a checkpoint whose LLM layer linears are
bf16: what the device run needs to time Fovea's W4A16 path (`fovea bench --model OUT`, decode shape of run_all.sh)
on the random InternVL2-8B-shaped model make_model.py writes, without a real AWQ checkpoint.

Quantization is round-to-nearest per group (AutoAWQ's zero-point formula without its activation-aware scale
search: the format, not the accuracy, is what the benchmark needs): scale = max(max - min, 1e-5) / 15 rounded to
F16, zero = clamp(round(-min / scale), 0, 15), q = clamp(round(w / scale) + zero, 0, 15). Packing: qweight
[in, out/8] int32 with nibble i of word c holding output column 8c + AWQ_ORDER[i], qzeros [in/group, out/8] the same
way, scales F16 [in/group, out] (AutoAWQ awq/modules/linear/gemm.py, the layout src/model/w4_dequant.h reads).

Which linears: every 2-D `.weight` of the LLM's decoder layers' projections, both naming schemes Fovea reads
(-hf Llama/Qwen2: self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj; original InternLM2: attention.{wqkv,wo},
feed_forward.{w1,w2,w3}); the ViT, projector, embeddings, norms and LM head are copied as they are, as AWQ
InternVL checkpoints have them. quantization_config goes into text_config (-hf) or llm_config (original), where
LMDeploy puts InternVL's. numpy only; one shard in memory at a time.

  python3 bench/gpu/make_w4_checkpoint.py --model WORK/model --out WORK/model_awq [--group 128]
"""
import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path

import numpy as np

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
LINEAR = re.compile(r"layers\.\d+\.(self_attn\.[qkvo]_proj|mlp\.(gate|up|down)_proj|attention\.(wqkv|wo)|"
                    r"feed_forward\.w[123])\.weight$")
DTYPES = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32, "I32": np.int32, "I64": np.int64,
          "U8": np.uint8}


def read_safetensors(path):
    """name -> (dtype name, array view of the file), metadata."""
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    size = int.from_bytes(bytes(raw[:8]), "little")
    header = json.loads(bytes(raw[8:8 + size]))
    meta = header.pop("__metadata__", {})
    data = raw[8 + size:]
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        tensors[name] = (info["dtype"], data[begin:end].view(DTYPES[info["dtype"]]).reshape(info["shape"]))
    return tensors, meta


def write_safetensors(path, tensors, meta):
    header, offset = {}, 0
    if meta:
        header["__metadata__"] = meta
    for name, (dtype, array) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for _, array in tensors.values():
            f.write(np.ascontiguousarray(array).tobytes())


def as_float32(dtype, array):
    if dtype == "BF16":
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array.astype(np.float32)


def quantize_awq(w, group):
    """w [out, in] float32 -> (qweight [in, out/8] int32, qzeros [in/group, out/8] int32, scales [in/group, out] f16)."""
    out, inp = w.shape
    if out % 8 or inp % group:
        raise ValueError(f"a [{out}, {inp}] weight needs out % 8 == 0 and in % {group} == 0")
    g = w.reshape(out, inp // group, group)
    lo, hi = g.min(axis=2), g.max(axis=2)
    scales = (np.maximum(hi - lo, 1e-5) / 15).astype(np.float16)
    s = scales.astype(np.float32)
    zeros = np.clip(np.rint(-lo / s), 0, 15)
    q = np.clip(np.rint(g / s[..., None]) + zeros[..., None], 0, 15).astype(np.uint32).reshape(out, inp)

    def pack_columns(values):  # [rows, out] -> [rows, out/8]: nibble i holds column 8c + AWQ_ORDER[i]
        v = values.reshape(values.shape[0], out // 8, 8)
        word = np.zeros(v.shape[:2], np.uint32)
        for i, column in enumerate(AWQ_ORDER):
            word |= v[..., column] << np.uint32(4 * i)
        return word.view(np.int32)

    return pack_columns(q.T), pack_columns(zeros.astype(np.uint32).T), np.ascontiguousarray(scales.T)


def shard_names(model):
    index = model / "model.safetensors.index.json"
    if index.exists():
        weight_map = json.loads(index.read_text())["weight_map"]
        return sorted(set(weight_map.values())), json.loads(index.read_text())
    return [p.name for p in sorted(model.glob("*.safetensors"))], None


def convert(model, out, group):
    out.mkdir(parents=True, exist_ok=True)
    shards, index = shard_names(model)
    new_map, quantized = {}, 0
    for shard in shards:
        tensors, meta = read_safetensors(model / shard)
        result = {}
        for name, (dtype, array) in tensors.items():
            if not (LINEAR.search(name) and array.ndim == 2 and "language_model" in name):
                result[name] = (dtype, array)
                continue
            qweight, qzeros, scales = quantize_awq(as_float32(dtype, array), group)
            prefix = name[:-len(".weight")]
            result[prefix + ".qweight"] = ("I32", qweight)
            result[prefix + ".qzeros"] = ("I32", qzeros)
            result[prefix + ".scales"] = ("F16", scales)
            quantized += 1
        write_safetensors(out / shard, result, meta)
        new_map.update({name: shard for name in result})
    if index is not None:
        index["weight_map"] = new_map
        (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    for extra in model.iterdir():  # config, tokenizer files, model.json, README...
        if extra.is_file() and extra.suffix != ".safetensors" and extra.name != "model.safetensors.index.json":
            shutil.copy2(extra, out / extra.name)
    config = json.loads((model / "config.json").read_text())
    section = config["text_config"] if "text_config" in config else config["llm_config"]
    section["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": group, "version": "gemm",
                                      "zero_point": True}
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return quantized


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, type=Path, help="checkpoint with bf16 LLM linears")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--group", type=int, default=128)
    args = parser.parse_args()
    start = time.time()
    quantized = convert(args.model, args.out, args.group)
    if quantized == 0:
        sys.exit(f"{args.model}: no LLM layer linear found to quantize")
    print(json.dumps({"out": str(args.out), "linears": quantized, "group": args.group,
                      "seconds": round(time.time() - start, 1)}))


if __name__ == "__main__":
    main()
