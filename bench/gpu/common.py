"""Shared pieces of the GPU benchmark: the workload's constants, the reference InternVL tiling (a port of
InternVL's dynamic_preprocess + build_transform), the prompt layout, the FLOP model of PERF.md, JSON helpers and
the report scripts' command line.

Every step of bench/gpu is a separate process (so one failing step leaves the others' numbers); they talk
through JSON files in one work directory.
"""
import argparse
import json
import os
import sys
import time

# The listing-photo workload of ../shared/guide/PERF.md: (width, height, share).
RESOLUTION_MIX = [
    (480, 360, 0.25), (640, 480, 0.15), (800, 600, 0.20), (1024, 768, 0.10),
    (750, 1000, 0.10), (1080, 1440, 0.10), (1920, 1080, 0.05), (612, 464, 0.05),
]
QUESTION = "图中有3张以上的床，或者是有双层床，请直接给出是或者否，然后给出详细的解释。注意1张双层床有2张床"

TILE = 448
MAX_TILES = 12
TOKENS_PER_TILE = 256
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# Chat templates, as InternVL's conversation.py writes them (MPT separator style). The image block sits
# between the two text parts: <img> + <IMG_CONTEXT> x 256*tiles + </img>.
TEMPLATES = {
    # InternVL2-8B (InternLM2 LLM): separator <|im_end|>, BOS <s> added by the tokenizer.
    "internlm2-chat": {
        "system": "你是由上海人工智能实验室联合商汤科技开发的书生多模态大模型，英文名叫InternVL, 是一个有用无害的人工智能助手。",
        "before_image": "<|im_start|>system\n{system}<|im_end|><|im_start|>user\n",
        "after_image": "\n{question}<|im_end|><|im_start|>assistant\n",
    },
    # InternVL2.5 / InternVL3 (the Qwen2.5 LLM of the qwen2 variant): separator <|im_end|>\n, no BOS.
    "internvl2_5": {
        "system": "你是书生·万象，英文名是InternVL，是由上海人工智能实验室、清华大学及多家合作单位联合开发的多模态大语言模型。",
        "before_image": "<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n",
        "after_image": "\n{question}<|im_end|>\n<|im_start|>assistant\n",
    },
}

# Per LLM family: the token ids of the image block and the BOS the tokenizer adds (None: none).
VARIANT_IDS = {
    "internlm2": {"bos": 1, "img_start": 92544, "img_end": 92545, "img_context": 92546, "template": "internlm2-chat"},
    "qwen2": {"bos": None, "img_start": 151665, "img_end": 151666, "img_context": 151667, "template": "internvl2_5"},
}


def log(*parts):
    print(time.strftime("%H:%M:%S"), *parts, flush=True)


def replace_atomically(path, fill):
    """fill(tmp) writes a temporary file that is then renamed over `path`, so a step killed by its timeout or a
    failure never leaves a half or empty file for a reader: `path` holds the old content or the whole new one."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        fill(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_text(path, text):
    def fill(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
    replace_atomically(path, fill)


def copy_file(src, dst):
    import shutil
    replace_atomically(dst, lambda tmp: shutil.copy(src, tmp))


def added_tokens_decoder(added):
    """tokenizer_config.json's added_tokens_decoder for `added` ({text: id}), all special."""
    return {str(i): {"content": t, "special": True, "lstrip": False, "rstrip": False, "normalized": False,
                     "single_word": False} for t, i in sorted(added.items(), key=lambda kv: kv[1])}


def write_json(path, obj):
    write_text(path, json.dumps(obj, ensure_ascii=False, indent=1, default=float))


def read_json(path, default=None):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def write_md_and_json(out_dir, stem, text, data):
    """A report's table and data as OUT_DIR/STEM.md and STEM.json."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, stem + ".md"), "w", encoding="utf-8") as fh:
        fh.write(text)
    write_json(os.path.join(out_dir, stem + ".json"), data)
    return text


# ---- the report scripts' one command line (report.py, family_report.py) ----

def report_arguments(doc, stem, name, work_help, results_dir_help, results_dir=None):
    """The options every report script takes: --work (the step JSONs of a run, on the machine that ran it) or
    --from-json (the STEM.json that came back), --out-dir, --results-dir, --name. A script adds its own."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", help=work_help)
    p.add_argument("--from-json", help=f"a {stem}.json that came back from a run")
    p.add_argument("--out-dir", help=f"writes {stem}.md and {stem}.json here")
    p.add_argument("--results-dir", default=results_dir, help=results_dir_help)
    p.add_argument("--name", default=name)
    return p


def report_input(args, collect):
    """The report's data: collect(WORK) with --work, else the --from-json file (exactly one of them)."""
    if bool(args.work) == bool(args.from_json):
        die("give exactly one of --work and --from-json")
    if args.work:
        return collect(args.work)
    data = read_json(args.from_json)
    if data is None:
        die(f"cannot read {args.from_json}")
    return data


def write_report(data, text, stem, out_dir, results_dir, name):
    """OUT_DIR/STEM.md + .json, RESULTS_DIR/<run's date>-NAME.md + .json (each when given), then the table on
    stdout."""
    if out_dir:
        write_md_and_json(out_dir, stem, text, data)
    if results_dir:
        date = ((data.get("env") or {}).get("date") or "undated")[:10]
        write_md_and_json(results_dir, f"{date}-{name}", text, data)
    print(text, end="")


def tail(path, chars):
    """The last `chars` characters of a log file ("" if it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - chars))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def read_jsonl(path):
    """Records of a JSONL file; a torn last line (a run killed mid-write) is skipped."""
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


# ---- the reference tiling (InternVL's dynamic_preprocess, same rule and the same candidate order) ----

def find_closest_aspect_ratio(aspect_ratio, target_ratios, width, height, image_size):
    best_diff = float("inf")
    best = (1, 1)
    area = width * height
    for ratio in target_ratios:
        diff = abs(aspect_ratio - ratio[0] / ratio[1])
        if diff < best_diff:
            best_diff = diff
            best = ratio
        elif diff == best_diff and area > 0.5 * image_size * image_size * ratio[0] * ratio[1]:
            # On an exact tie a later (larger) grid wins only for an image big enough to fill half of it.
            best = ratio
    return best


def official_grid(width, height, min_num=1, max_num=MAX_TILES, image_size=TILE):
    """(cols, rows) of the official policy. The candidates come from a Python set sorted by area, exactly as the
    reference builds them: the set's iteration order decides among equal products."""
    ratios = set((i, j) for n in range(min_num, max_num + 1) for i in range(1, n + 1) for j in range(1, n + 1)
                 if min_num <= i * j <= max_num)
    ratios = sorted(ratios, key=lambda x: x[0] * x[1])
    return find_closest_aspect_ratio(width / height, ratios, width, height, image_size)


def official_tile_count(width, height):
    cols, rows = official_grid(width, height)
    return cols * rows + (1 if cols * rows > 1 else 0)


def dynamic_preprocess(image, max_num=MAX_TILES, image_size=TILE, use_thumbnail=True):
    """PIL image -> list of PIL tiles (row-major), plus a thumbnail when there is more than one tile."""
    from PIL import Image
    cols, rows = official_grid(image.width, image.height, 1, max_num, image_size)
    resized = image.resize((image_size * cols, image_size * rows), Image.BICUBIC)
    tiles = []
    for i in range(cols * rows):
        x, y = (i % cols) * image_size, (i // cols) * image_size
        tiles.append(resized.crop((x, y, x + image_size, y + image_size)))
    if use_thumbnail and len(tiles) != 1:
        tiles.append(image.resize((image_size, image_size), Image.BICUBIC))
    return tiles


def tiles_to_tensor(tiles):
    """build_transform: ToTensor (/255) then Normalize, in float32 and in torchvision's order of operations.
    (The reference's Resize((448, 448)) is a copy on tiles that are already 448x448.)"""
    import numpy as np
    import torch
    arr = np.stack([np.asarray(t.convert("RGB"), dtype=np.uint8) for t in tiles])  # [T, H, W, 3]
    x = torch.from_numpy(arr).permute(0, 3, 1, 2).to(torch.float32).div(255.0)
    mean = torch.tensor(IMAGENET_MEAN, dtype=torch.float32).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, dtype=torch.float32).view(1, 3, 1, 1)
    return x.sub_(mean).div_(std)


def load_pixel_values(path):
    """The reference's load_image(): open, convert('RGB') (no EXIF transpose), tile, normalise."""
    from PIL import Image
    with Image.open(path) as im:
        image = im.convert("RGB")
    return tiles_to_tensor(dynamic_preprocess(image))


# ---- the FLOP model of PERF.md, with the parameter counts taken from the model's config ----

def _first(value):
    return value[0] if isinstance(value, (list, tuple)) else value


def model_dims(config):
    """The numbers the FLOP model needs, from an InternVLConfig or a config.json dict of either layout: the -hf
    one (text_config) or InternVL's original one (llm_config; InternViT-6B's vision_config too). head_dim as the
    config gives it (Qwen3: heads x head_dim may differ from the hidden size)."""
    cfg = config if isinstance(config, dict) else config.to_dict()
    v, t = cfg["vision_config"], cfg.get("text_config") or cfg["llm_config"]
    c, m, n_vit = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"]
    patch, image = _first(v["patch_size"]), _first(v["image_size"])
    h, f, n_llm = t["hidden_size"], t["intermediate_size"], t["num_hidden_layers"]
    heads, kv = t["num_attention_heads"], t.get("num_key_value_heads") or t["num_attention_heads"]
    head_dim = t.get("head_dim") or h // heads
    vit_tokens = (image // patch) ** 2 + 1
    proj_in = c * 4
    return {
        "vit_params": n_vit * (4 * c * c + 2 * c * m) + 3 * patch * patch * c,
        "vit_layers": n_vit, "vit_hidden": c, "vit_tokens": vit_tokens,
        "proj_params": proj_in * h + h * h,
        "llm_params": n_llm * (h * heads * head_dim * 2 + 2 * h * kv * head_dim + 3 * h * f),
        "llm_layers": n_llm, "llm_hidden": h, "attn_width": heads * head_dim, "vocab": t["vocab_size"],
    }


def request_flop_parts(dims, tiles, text_tokens, output_tokens=1):
    """PERF.md's model split by where the work runs: ViT T x (2 P_vit 1025 + layers x 4 x 1025^2 x width),
    projector 2 P_proj 256 T, the LLM's linears 2 P_llm L and its causal attention layers x 4 x width x L^2 / 2
    over the L = 256 T + text prompt tokens, lm_head once per output token; each output token after the first
    adds one decode step (2 P_llm + layers x 4 x width x its position)."""
    n = dims["vit_tokens"]
    seq = TOKENS_PER_TILE * tiles + text_tokens
    decode = range(1, max(1, output_tokens))
    return {
        "vit": tiles * (2 * dims["vit_params"] * n + dims["vit_layers"] * 4 * n * n * dims["vit_hidden"]),
        "projector": 2 * dims["proj_params"] * TOKENS_PER_TILE * tiles,
        "llm_linear": 2 * dims["llm_params"] * (seq + len(decode)),
        "llm_attention": dims["llm_layers"] * 4 * dims["attn_width"] * (seq * seq / 2 + sum(seq + t for t in decode)),
        "lm_head": 2 * dims["llm_hidden"] * dims["vocab"] * max(1, output_tokens),
    }


def request_flops(dims, tiles, text_tokens, output_tokens=1):
    return sum(request_flop_parts(dims, tiles, text_tokens, output_tokens).values())


def die(msg):
    print("error:", msg, file=sys.stderr, flush=True)
    sys.exit(1)
