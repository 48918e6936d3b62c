#!/usr/bin/env python3
"""The InternVL family table: tests/data/family/family.json -> tiny stand-in configs and the README table.

    python3 tools/family/family_table.py --write      # (re)writes tests/data/family/<model>/ stand-ins
    python3 tools/family/family_table.py --check      # fails when a committed stand-in differs (CI, no torch)
    python3 tools/family/family_table.py --markdown [--fits]   # prints the README's family table
    python3 tools/family/family_table.py --write --fovea build/fovea   # also rewrites tests/data/family/family_table.md
--fits adds the "fits one H200: bf16 / FP8 / 4-bit" column, as committed in tests/data/family/family_table.md (the
table with every other column from family.json); --check fails when that file is stale (with --fovea, the
planner's column recomputed too). The "fits one H200"
column is the memory planner's (`fovea inspect --plan --gpu-memory 143771MiB`, an H200's memory as nvidia-smi
reports it, on each row's config at its real sizes: weights, the smallest KV pool, image pool, workspace and
reserve), not an estimate: a row the loader refuses has none.

A stand-in keeps its checkpoint's config layout (the keys, `architectures` and `model_type` names InternVL's and
transformers' config classes write for that LLM and vision tower) with tiny sizes, plus a tokenizer_config.json
that lists InternVL's special tokens at tiny ids. tests/model/test_family.cc loads each supported one with random
weights (and runs a step) and checks that each refused one is refused with the row's reason. Parameter counts
are computed here from the real sizes (dense rows; MoE rows give the model card's) for the memory columns.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAMILY = os.path.join(ROOT, "tests", "data", "family")

# Tiny sizes: one layer each; 4 heads of 8 in the ViT (both towers), the LLM 4 heads / 2 KV heads of 8 over a
# hidden size of 32 (Qwen3: heads of 16, so heads * head_dim != hidden as in Qwen3-0.6B).
TINY_VISION = dict(hidden=32, layers=1, heads=4, mlp=64)
TINY_LLM = dict(hidden=32, layers=1, heads=4, kv_heads=2, head_dim=8, ffn=48, vocab=320)
# InternVL's added tokens at the top of the tiny vocabulary, as the real tokenizers place them after their own.
SPECIAL = ["<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>", "<quad>", "</quad>", "<ref>", "</ref>",
           "<box>", "</box>"]
QWEN_SPECIAL = ["<|endoftext|>"] + SPECIAL
LLAMA3_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>"] + SPECIAL
# The real ids: InternLM2's tokenizer.model gives <s> 1, </s> 2 and renames pieces 92538-92543 (<|im_end|> 92542,
# <|im_start|> 92543); InternVL adds its tokens after the 92,544 pieces. Qwen2.5 tokenizers end their own added
# tokens at 151664 and InternVL adds its after them; Qwen2's (InternVL2-1B) at 151645, so InternVL's start at 151646
# (vocabulary 151,655); Qwen3's end at 151668 (<think> 151667, </think> 151668), so InternVL3.5's start at 151669.
_INTERNVL_ORDER = ["<img>", "</img>", "<IMG_CONTEXT>", "<quad>", "</quad>", "<ref>", "</ref>", "<box>", "</box>"]
_QWEN_OWN = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}


def _after(first, own):
    return {**own, **{n: first + i for i, n in enumerate(_INTERNVL_ORDER)}}


REAL_IDS = {
    "InternLM2ForCausalLM": lambda l: _after(92544, {"<s>": 1, "</s>": 2, "<|im_end|>": 92542, "<|im_start|>": 92543}),
    "Qwen2ForCausalLM": lambda l: _after(151665 if l["vocab"] >= 151665 + 9 else 151646, _QWEN_OWN),
    "Qwen3ForCausalLM": lambda l: _after(151669, {**_QWEN_OWN, "<think>": 151667, "</think>": 151668}),
}


def vision_params(v):
    c, m = v["hidden"], v["mlp"]
    norm = c if v["norm"] == "rms_norm" else 2 * c
    layer = 2 * norm + 3 * c * c + (3 * c if v["qkv_bias"] else 0) + (2 * c if v["qk_norm"] else 0)
    layer += c * c + c + 2 * c + c * m + m + m * c + c
    return c * 3 * 14 * 14 + c + c + 1025 * c + v["layers"] * layer


def llm_params(l):
    h, d, f = l["hidden"], l["head_dim"], l["ffn"]
    attn = h * (l["heads"] + 2 * l["kv_heads"]) * d + l["heads"] * d * h
    if l["arch"] == "Qwen2ForCausalLM":
        attn += (l["heads"] + 2 * l["kv_heads"]) * d
    if l["arch"] == "Qwen3ForCausalLM":
        attn += 2 * d
    return 2 * l["vocab"] * h + h + l["layers"] * (attn + 3 * h * f + 2 * h)  # untied lm_head


def row_params(doc, row):
    """Total parameters of a dense row from its sizes (vision + projector + LLM); None for MoE rows."""
    v, l = doc["vision_towers"][row["vision"]], doc["llms"][row["llm"]]
    if "experts" in l:
        return None
    c4, h = 4 * v["hidden"], l["hidden"]
    projector = 2 * c4 + c4 * h + h + h * h + h
    return vision_params(v) + projector + llm_params(l)


def vision_config(v, fmt, t=TINY_VISION):
    """The vision tower's section at sizes t (TINY_VISION, or real_vision_sizes(v))."""
    six_b = v["qk_norm"]
    if fmt == "hf":
        return {"attention_bias": v["qkv_bias"], "attention_dropout": 0.0, "hidden_act": "gelu",
                "hidden_dropout_prob": 0.0, "hidden_size": t["hidden"], "image_size": [448, 448],
                "initializer_range": 0.02, "intermediate_size": t["mlp"], "layer_norm_eps": 1e-06,
                "layer_scale_init_value": 0.1, "model_type": "internvl_vision", "norm_type": v["norm"],
                "num_attention_heads": t["heads"], "num_channels": 3, "num_hidden_layers": t["layers"],
                "patch_size": [14, 14], "projection_dropout": 0.0, "use_absolute_position_embeddings": True,
                "use_mask_token": False, "use_mean_pooling": True, "use_qk_norm": six_b}
    return {"architectures": ["InternVisionModel"], "attention_dropout": 0.0, "drop_path_rate": 0.0,
            "dropout": 0.0, "hidden_act": "gelu", "hidden_size": t["hidden"], "image_size": 448,
            "initializer_factor": 0.1 if six_b else 1.0, "initializer_range": 1e-10 if six_b else 0.02,
            "intermediate_size": t["mlp"], "layer_norm_eps": 1e-06, "model_type": "intern_vit_6b",
            "norm_type": v["norm"], "num_attention_heads": t["heads"], "num_channels": 3,
            "num_hidden_layers": t["layers"], "patch_size": 14, "qk_normalization": six_b,
            "qkv_bias": v["qkv_bias"], "torch_dtype": "bfloat16", "use_flash_attn": True}


def special_names(l):
    if l["arch"] == "LlamaForCausalLM" and l["vocab"] > 100000:
        return LLAMA3_SPECIAL
    if l["arch"].startswith("Qwen") or l["arch"] == "GptOssForCausalLM":
        return QWEN_SPECIAL
    return ["<s>", "</s>"] + SPECIAL


def tiny_llm_sizes(l):
    # Qwen3: heads of 16, so heads * head_dim != hidden as in Qwen3-0.6B.
    return dict(TINY_LLM, head_dim=16) if l["arch"].startswith("Qwen3") else dict(TINY_LLM)


def real_llm_sizes(l):
    return {k: l[k] for k in ("hidden", "layers", "heads", "kv_heads", "head_dim", "ffn", "vocab")}


def real_vision_sizes(v):
    return {k: v[k] for k in ("hidden", "layers", "heads", "mlp")}


def real_special_ids(l):
    """The special token ids of the real checkpoints' tokenizers, for the LLM families whose tokenizer files a
    benchmark carries (InternLM2's tokenizer.model, Qwen2's vocab.json + merges.txt, which Qwen3 shares); other
    families get the tiny stand-ins' placement at the top of their real vocabulary (enough for the memory planner,
    which reads no token)."""
    if l["arch"] in REAL_IDS:
        return REAL_IDS[l["arch"]](l)
    names = special_names(l)
    first = l["vocab"] - len(names) - 4
    return {n: first + i for i, n in enumerate(names)}


def special_ids(l):
    names = special_names(l)
    first = TINY_LLM["vocab"] - len(names) - 4
    ids = {n: first + i for i, n in enumerate(names)}
    if "<s>" in ids:  # SentencePiece tokenizers: <s> 1, </s> 2
        ids.update({"<s>": 1, "</s>": 2})
    return ids


def llm_config(l, fmt, t=None, ids=None):
    """The LLM's section: the keys its config class writes, at sizes t (tiny_llm_sizes(l) by default, or
    real_llm_sizes(l)) with special token ids `ids` (the tiny ones by default)."""
    t = t or tiny_llm_sizes(l)
    arch = l["arch"]
    ids = ids or special_ids(l)
    head_dim = t["head_dim"]
    c = {"architectures": [arch], "hidden_act": "silu", "hidden_size": t["hidden"], "initializer_range": 0.02,
         "intermediate_size": t["ffn"], "max_position_embeddings": 32768, "num_attention_heads": t["heads"],
         "num_hidden_layers": t["layers"], "num_key_value_heads": t["kv_heads"], "rms_norm_eps": 1e-06,
         "rope_theta": l["rope_theta"], "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
         "vocab_size": t["vocab"]}
    if arch == "InternLM2ForCausalLM":
        c.update(model_type="internlm2", bias=False, bos_token_id=1, eos_token_id=2, pad_token_id=2,
                 rms_norm_eps=1e-05, attn_implementation="eager",
                 rope_scaling={"type": "dynamic", "factor": 3.0 if l["hidden"] == 6144 else 2.0})
    elif arch == "LlamaForCausalLM":
        llama3 = "<|begin_of_text|>" in ids
        c.update(model_type="llama", attention_bias=False, attention_dropout=0.0, mlp_bias=False, pretraining_tp=1,
                 rope_scaling=None, rms_norm_eps=1e-05 if llama3 else 1e-06,
                 bos_token_id=ids["<|begin_of_text|>"] if llama3 else 1, eos_token_id=ids["<|im_end|>"],
                 max_position_embeddings=8192 if llama3 else 4096)
    elif arch == "Qwen2ForCausalLM":
        c.update(model_type="qwen2", attention_dropout=0.0, bos_token_id=ids["<|endoftext|>"],
                 eos_token_id=ids["<|im_end|>"], max_window_layers=t["layers"], rope_scaling=None,
                 sliding_window=32768, use_sliding_window=False)
    elif arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM"):
        c.update(model_type="qwen3" if arch == "Qwen3ForCausalLM" else "qwen3_moe", attention_bias=False,
                 attention_dropout=0.0, bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                 head_dim=head_dim, max_window_layers=t["layers"], rope_scaling=None, sliding_window=None,
                 use_sliding_window=False, max_position_embeddings=40960)
        if arch == "Qwen3MoeForCausalLM":
            c.update(decoder_sparse_step=1, mlp_only_layers=[], moe_intermediate_size=16, norm_topk_prob=True,
                     num_experts=4, num_experts_per_tok=2, output_router_logits=False, router_aux_loss_coef=0.001)
    elif arch == "GptOssForCausalLM":
        c.update(model_type="gpt_oss", attention_bias=True, attention_dropout=0.0, head_dim=t["head_dim"],
                 experts_per_token=2, num_local_experts=4, num_experts_per_tok=2, sliding_window=128,
                 layer_types=["sliding_attention"], swiglu_limit=7.0, router_aux_loss_coef=0.9,
                 rope_scaling={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                               "original_max_position_embeddings": 4096, "truncate": False},
                 eos_token_id=ids["<|im_end|>"], max_position_embeddings=131072, rms_norm_eps=1e-05)
    elif arch == "Phi3ForCausalLM":
        # eos 2 (</s>): the real 32000 lies past the stand-in's small vocabulary, which the loader refuses.
        c.update(model_type="phi3", attention_dropout=0.0, bos_token_id=1, eos_token_id=2, embd_pdrop=0.0,
                 original_max_position_embeddings=4096, resid_pdrop=0.0, sliding_window=262144, rms_norm_eps=1e-05,
                 rope_scaling={"type": "su", "long_factor": [1.0] * 4, "short_factor": [1.0] * 4},
                 max_position_embeddings=131072)
    elif arch == "InternLM3ForCausalLM":
        c.update(model_type="internlm3", bias=False, qkv_bias=False, head_dim=t["head_dim"], bos_token_id=1,
                 eos_token_id=2, pad_token_id=2, rms_norm_eps=1e-05,
                 rope_scaling={"rope_type": "dynamic", "factor": 6.0})
    else:
        raise KeyError(arch)
    if fmt == "hf":  # transformers 5 text configs: the model_type names the class; rope as rope_parameters
        c.pop("architectures")
        c.pop("torch_dtype")
        c["dtype"] = "bfloat16"
        c["rope_parameters"] = {"rope_theta": c.pop("rope_theta"), "rope_type": "default"}
        if c.get("rope_scaling") is None:
            c.pop("rope_scaling", None)
    return c


def model_config(doc, row, sizes="tiny"):
    """config.json of a row: "tiny" (the stand-in), "real" (the checkpoint's sizes and token ids) or "tiny-vocab"
    (tiny widths and depths over the real vocabulary and ids, so the real tokenizer files fit: a CPU rehearsal)."""
    v, l = doc["vision_towers"][row["vision"]], doc["llms"][row["llm"]]
    ids = special_ids(l) if sizes == "tiny" else real_special_ids(l)
    vision_t = real_vision_sizes(v) if sizes == "real" else TINY_VISION
    llm_t = {"tiny": tiny_llm_sizes(l), "real": real_llm_sizes(l),
             "tiny-vocab": dict(tiny_llm_sizes(l), vocab=l["vocab"])}[sizes]
    if row["format"] == "hf":
        return {"architectures": ["InternVLForConditionalGeneration"], "downsample_ratio": 0.5, "dtype": "bfloat16",
                "image_seq_length": 256, "image_token_id": ids["<IMG_CONTEXT>"], "model_type": "internvl",
                "projector_hidden_act": "gelu", "text_config": llm_config(l, "hf", llm_t, ids),
                "tie_word_embeddings": False, "vision_config": vision_config(v, "hf", vision_t),
                "vision_feature_layer": -1, "vision_feature_select_strategy": "default"}
    return {"architectures": ["InternVLChatModel"],
            "auto_map": {"AutoConfig": "configuration_internvl_chat.InternVLChatConfig",
                         "AutoModel": "modeling_internvl_chat.InternVLChatModel",
                         "AutoModelForCausalLM": "modeling_internvl_chat.InternVLChatModel"},
            "downsample_ratio": 0.5, "dynamic_image_size": True, "force_image_size": 448,
            "llm_config": llm_config(l, "original", llm_t, ids), "max_dynamic_patch": 12, "min_dynamic_patch": 1,
            "model_type": "internvl_chat", "pad2square": False, "ps_version": "v2", "select_layer": -1,
            "template": row["template"], "torch_dtype": "bfloat16", "use_backbone_lora": 0, "use_llm_lora": 0,
            "use_thumbnail": True, "vision_config": vision_config(v, "original", vision_t)}


def tokenizer_config(doc, row, sizes="tiny"):
    l = doc["llms"][row["llm"]]
    ids = special_ids(l) if sizes == "tiny" else real_special_ids(l)
    decoder = {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                        "special": True} for s, i in sorted(ids.items(), key=lambda kv: kv[1])}
    config = {"added_tokens_decoder": decoder, "eos_token": "<|im_end|>", "model_max_length": 16384}
    if "<|begin_of_text|>" in ids:
        config.update(add_bos_token=True, bos_token="<|begin_of_text|>")
    elif "<s>" in ids:
        config.update(add_bos_token=True, bos_token="<s>", eos_token="</s>")
    else:
        config.update(bos_token=None)
    return config


def stand_ins(doc):
    """{relative path: text} of every stand-in file."""
    files = {}
    for row in doc["models"]:
        for name, obj in (("config.json", model_config(doc, row)), ("tokenizer_config.json", tokenizer_config(doc, row))):
            files[os.path.join(row["name"], name)] = json.dumps(obj, indent=2) + "\n"
    return files


def params_b(doc, row):
    p = row_params(doc, row)
    return row["params_card_b"] if p is None else p / 1e9


H200 = "143771MiB"  # what nvidia-smi reports for an H200 ("141 GB" on its data sheet)
PLAN_COLUMNS = ("bf16", "fp8", "4-bit")


def plan_fits(doc, row, fovea):
    """{"bf16": bool, "fp8": bool, "4-bit": bool} from `fovea inspect --plan` on the row's real-size config, or
    None when the loader refuses the config (the row's refusal)."""
    with tempfile.TemporaryDirectory(prefix="fovea_family_plan_") as d:
        for name, obj in (("config.json", model_config(doc, row, "real")),
                          ("tokenizer_config.json", tokenizer_config(doc, row, "real"))):
            with open(os.path.join(d, name), "w") as f:
                json.dump(obj, f, indent=2)
        run = subprocess.run([fovea, "inspect", "--model", d, "--plan", "--gpu-memory", H200], capture_output=True,
                             text=True, timeout=120)
    if run.returncode != 0:
        if row["status"] == "supported":
            sys.exit(f"{row['name']}: fovea inspect --plan failed: {run.stderr.strip()[-500:]}")
        return None
    fits = {}
    for line in run.stdout.splitlines():
        words = line.split()
        if words and words[0] in PLAN_COLUMNS and words[0] not in fits:
            fits[words[0]] = line.rstrip().endswith(" fits")
    missing = [c for c in PLAN_COLUMNS if c not in fits]
    if missing:
        sys.exit(f"{row['name']}: no {', '.join(missing)} row in fovea inspect --plan's output:\n{run.stdout}")
    return fits


def fits_cell(fits):
    return " / ".join("yes" if fits[c] else "no" for c in PLAN_COLUMNS) if fits else "-"


def committed_fits():
    """{row name: "fits" cell} of the committed table (the planner's, written by --write --fovea)."""
    if not os.path.exists(TABLE):
        return None
    cells = {}
    with open(TABLE) as f:
        for line in f:
            parts = [p.strip() for p in line.strip().strip("|").split("|")]
            if line.startswith("| Intern") and len(parts) == 7:
                cells[parts[0]] = parts[5]
    return cells


def markdown(doc, fits=None):
    """The README table; with `fits` ({row name: cell}), the planner's "fits one H200" column too."""
    head, rule = "| model | format | vision | LLM | params (B) |", "|---|---|---|---|---|"
    if fits is not None:
        head, rule = head + " fits one H200: bf16 / FP8 / 4-bit |", rule + "---|"
    lines = [head + " status in Fovea |", rule + "---|"]
    for row in doc["models"]:
        status = ("supported, golden-tested" if row["status"] == "supported" else "refused: " + row["refusal"])
        line = f"| {row['name']} | {row['format']} | {row['vision']} | {row['llm']} | {params_b(doc, row):.1f} |"
        if fits is not None:
            line += f" {fits.get(row['name'], 'not planned (run --write --fovea)')} |"
        lines.append(line + f" {status} |")
    return "\n".join(lines) + "\n"


TABLE = os.path.join(FAMILY, "family_table.md")


def load_doc():
    with open(os.path.join(FAMILY, "family.json")) as f:
        return json.load(f)


def find_row(doc, name):
    for row in doc["models"]:
        if row["name"] == name:
            return row
    raise KeyError(f"no family row named {name}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--fits", action="store_true", help="--markdown: with the planner's 'fits one H200' column")
    parser.add_argument("--fovea", help="the fovea binary: the planner's column is computed, not read from "
                                         "tests/data/family/family_table.md")
    args = parser.parse_args()
    if args.fovea and not os.access(args.fovea, os.X_OK):
        sys.exit(f"--fovea {args.fovea}: not an executable")
    doc = load_doc()
    files = stand_ins(doc)
    if args.fovea:
        fits = {row["name"]: fits_cell(plan_fits(doc, row, args.fovea)) for row in doc["models"]}
    else:
        fits = committed_fits()
    table = markdown(doc, fits)
    if args.write:
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(FAMILY, rel)), exist_ok=True)
            with open(os.path.join(FAMILY, rel), "w") as f:
                f.write(text)
        if args.fovea:
            with open(TABLE, "w") as f:
                f.write(table)
    if args.check:
        stale = []
        for rel, text in files.items():
            path = os.path.join(FAMILY, rel)
            if not os.path.exists(path) or open(path).read() != text:
                stale.append(rel)
        # Without --fovea the committed planner column is kept and every other column checked against family.json.
        if fits is not None and (not os.path.exists(TABLE) or open(TABLE).read() != table):
            stale.append(os.path.relpath(TABLE, FAMILY) + " (run --write --fovea BIN)")
        if stale:
            sys.exit(f"stale (run --write): {', '.join(stale)}")
        for row in doc["models"]:  # the sizes must add up to the model card's total
            p = row_params(doc, row)
            if p is not None and abs(p / 1e9 - row["params_card_b"]) > 0.05 * row["params_card_b"]:
                sys.exit(f"{row['name']}: sizes give {p / 1e9:.2f}B parameters, the card says {row['params_card_b']}B")
    if args.markdown:
        print(table if args.fits or args.fovea else markdown(doc), end="")


if __name__ == "__main__":
    main()
