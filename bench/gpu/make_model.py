"""Makes a random-weight InternVL checkpoint in transformers' native `internvl` (-hf) format that both
transformers and Fovea load: InternVL2-8B-shaped (InternViT-300M + a Llama text config standing for
InternLM2-7B, as transformers' converter maps it) or, with --variant qwen2, InternVL3-8B-shaped (Qwen2.5-7B);
with --variant qwen2 --size 72b the LLM is Qwen2.5-72B-shaped (InternVL2.5/3-78B's LLM; the ViT stays 300M).
--config-only writes config.json and the tokenizer files only, for `--load-format dummy` (no torch weights).

Built with `_from_config` under the target device in bf16 with a fixed seed. Default init (std 0.02) leaves
biases, norms, layer scales, the CLS token and the position embeddings at constants (zeros/ones); this script
perturbs them all so a loader or kernel that drops one of them changes the answers. Writes safetensors shards,
config.json, the tokenizer files and model.json (what was built, how long it took), and for --variant internlm2
the files vLLM and LMDeploy need to load it too (peer_files.py).
"""
import argparse
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import peer_files  # noqa: E402

# InternLM2 special tokens as InternVL2-8B's tokenizer_config.json declares them: 92538-92543 rename pieces that
# tokenizer.model calls [UNUSED_TOKEN_141..146]; 92544+ lie above its 92,544 pieces.
INTERNLM2_ADDED = {"<|plugin|>": 92538, "<|interpreter|>": 92539, "<|action_end|>": 92540,
                   "<|action_start|>": 92541, "<|im_end|>": 92542, "<|im_start|>": 92543, "<img>": 92544, "</img>": 92545, "<IMG_CONTEXT>": 92546, "<quad>": 92547, "</quad>": 92548,
                   "<ref>": 92549, "</ref>": 92550, "<box>": 92551, "</box>": 92552}
QWEN2_ADDED = {"<img>": 151665, "</img>": 151666, "<IMG_CONTEXT>": 151667, "<quad>": 151668,
               "</quad>": 151669, "<ref>": 151670, "</ref>": 151671, "<box>": 151672, "</box>": 151673}

FULL = {
    "vision": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
    "internlm2": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                      intermediate_size=14336, vocab_size=92553, rms_norm_eps=1e-5),
    "qwen2": dict(hidden_size=3584, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
                  intermediate_size=18944, vocab_size=151674, rms_norm_eps=1e-6),
    # Qwen2.5-72B (InternVL2.5-78B, InternVL3-78B): 80 layers of width 8192, 64 heads of 128, 8 KV heads.
    "qwen2-72b": dict(hidden_size=8192, num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8,
                      intermediate_size=29568, vocab_size=151674, rms_norm_eps=1e-6),
}
# --tiny: the same graph at sizes a CPU runs in seconds (real vocab, so the real tokenizers still fit).
TINY = {
    "vision": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128),
    "internlm2": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      intermediate_size=352, vocab_size=92553, rms_norm_eps=1e-5),
    "qwen2": dict(hidden_size=112, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=304, vocab_size=151674, rms_norm_eps=1e-6),
}


def build_config(variant, tiny, std, size="8b"):
    from transformers import InternVLConfig, InternVLVisionConfig, LlamaConfig, Qwen2Config
    sizes = dict(TINY if tiny else FULL)
    if size == "72b":
        if variant != "qwen2" or tiny:
            common.die("--size 72b is Qwen2.5-72B: use it with --variant qwen2 and without --tiny")
        sizes["qwen2"] = FULL["qwen2-72b"]
    vision = InternVLVisionConfig(
        **sizes["vision"], image_size=common.TILE, patch_size=14, attention_bias=True, use_qk_norm=False,
        norm_type="layer_norm", layer_norm_eps=1e-6, layer_scale_init_value=0.1, use_mean_pooling=True,
        hidden_act="gelu", initializer_range=std)
    common_text = dict(max_position_embeddings=32768, rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                       tie_word_embeddings=False, initializer_range=std, hidden_act="silu")
    ids = common.VARIANT_IDS[variant]
    if variant == "internlm2":
        text = LlamaConfig(**sizes["internlm2"], **common_text, bos_token_id=1, eos_token_id=2, pad_token_id=2,
                           attention_bias=False, mlp_bias=False,
                           head_dim=sizes["internlm2"]["hidden_size"] // sizes["internlm2"]["num_attention_heads"])
    else:
        text = Qwen2Config(**sizes["qwen2"], **common_text, bos_token_id=151643, eos_token_id=151645,
                           pad_token_id=151643, use_sliding_window=False)
    return InternVLConfig(vision_config=vision, text_config=text, image_token_id=ids["img_context"],
                          image_seq_length=common.TOKENS_PER_TILE, downsample_ratio=0.5,
                          projector_hidden_act="gelu", vision_feature_layer=-1,
                          vision_feature_select_strategy="default", tie_word_embeddings=False)


def perturb_constants(model, std, generator_seed):
    """Randomises what default init leaves constant. Norm weights 1 + N(0, 0.1), biases N(0, std), layer
    scales 0.1 * (1 + N(0, 0.1)), CLS token and position embeddings N(0, std)."""
    import torch
    gen = torch.Generator(device="cpu").manual_seed(generator_seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            is_norm = "norm" in name and leaf == "weight"
            if not (is_norm or leaf == "bias" or "lambda_" in leaf or "cls_token" in name
                    or "position_embeddings" in name):
                continue
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32).to(p.device)
            if is_norm:
                p.copy_(1.0 + 0.1 * noise)
            elif "lambda_" in leaf:
                p.copy_(0.1 * (1.0 + 0.1 * noise))
            else:
                p.copy_(std * noise)


def write_tokenizer(out, variant, tokenizer_path):
    """Copies the tokenizer (a tokenizer.model file, or a folder of tokenizer files) and records the added
    image tokens the way InternVL checkpoints do (added_tokens.json + tokenizer_config.json)."""
    if tokenizer_path:
        if os.path.isdir(tokenizer_path):
            for name in os.listdir(tokenizer_path):
                if name in ("tokenizer.model", "tokenizer.json", "vocab.json", "merges.txt", "special_tokens_map.json"):
                    common.copy_file(os.path.join(tokenizer_path, name), os.path.join(out, name))
        else:  # a lone SentencePiece model may be carried under another name (e.g. internlm2.model)
            name = "tokenizer.model" if tokenizer_path.endswith(".model") else os.path.basename(tokenizer_path)
            common.copy_file(tokenizer_path, os.path.join(out, name))
    added = dict(INTERNLM2_ADDED if variant == "internlm2" else QWEN2_ADDED)
    if variant == "qwen2":
        base = common.read_json(os.path.join(tokenizer_path or "", "added_tokens.json"), {}) if tokenizer_path else {}
        added = {**base, **added}
    common.write_json(os.path.join(out, "added_tokens.json"), added)
    common.write_json(os.path.join(out, "tokenizer_config.json"), {
        "added_tokens_decoder": common.added_tokens_decoder(added), "model_max_length": 32768,
        "bos_token": "<s>" if variant == "internlm2" else None,
        "eos_token": "</s>" if variant == "internlm2" else "<|im_end|>"})


def annotate_config(out, template):
    """The -hf config names no chat template; the original format's `template` key says which one."""
    path = os.path.join(out, "config.json")
    cfg = common.read_json(path)
    cfg["template"] = template
    common.write_json(path, cfg)


def add_peer_files(out, variant):
    """The files vLLM and LMDeploy need besides Fovea's and transformers' (peer_files.py). A failure here is
    logged and leaves the checkpoint as Fovea and transformers use it."""
    added = INTERNLM2_ADDED if variant == "internlm2" else QWEN2_ADDED
    try:
        return peer_files.write_peer_files(out, variant, added)
    except Exception as e:  # noqa: BLE001 - the peers are optional, Fovea's benchmark is not
        common.log(f"peer files: not written ({type(e).__name__}: {e})")
        return False


def clear_model_dir(out):
    """A shard or index left from an earlier model would be read with the new one: start from an empty folder,
    but never delete a folder this script did not make."""
    if os.path.isdir(out) and os.listdir(out):
        if not os.path.exists(os.path.join(out, "model.json")):
            common.die(f"{out} is not empty and holds no model.json: refusing to overwrite it")
        shutil.rmtree(out)
    os.makedirs(out)


def hf_config_dict(variant, size):
    """The -hf config.json of --variant/--size as a dict, written without transformers (the keys Fovea and
    transformers read; the same values build_config gives, for --config-only on machines without torch)."""
    if size == "72b" and variant != "qwen2":
        common.die("--size 72b is Qwen2.5-72B: use it with --variant qwen2")
    llm = FULL["qwen2-72b" if size == "72b" else variant]
    ids = common.VARIANT_IDS[variant]
    text = dict(llm, model_type="llama" if variant == "internlm2" else "qwen2", hidden_act="silu",
                head_dim=llm["hidden_size"] // llm["num_attention_heads"], max_position_embeddings=32768,
                rope_parameters={"rope_type": "default", "rope_theta": 1e6}, tie_word_embeddings=False,
                bos_token_id=1 if variant == "internlm2" else 151643,
                eos_token_id=2 if variant == "internlm2" else 151645, attention_bias=False,
                use_sliding_window=False, sliding_window=None, initializer_range=0.02)
    if variant == "qwen2":
        text.pop("attention_bias")
    vision = dict(FULL["vision"], model_type="internvl_vision", image_size=[common.TILE, common.TILE],
                  patch_size=[14, 14], attention_bias=True, use_qk_norm=False, norm_type="layer_norm",
                  layer_norm_eps=1e-6, layer_scale_init_value=0.1, use_mean_pooling=True, hidden_act="gelu",
                  num_channels=3, use_absolute_position_embeddings=True)
    return {"architectures": ["InternVLForConditionalGeneration"], "model_type": "internvl", "downsample_ratio": 0.5,
            "image_seq_length": common.TOKENS_PER_TILE, "image_token_id": ids["img_context"],
            "projector_hidden_act": "gelu", "vision_feature_layer": -1, "vision_feature_select_strategy": "default",
            "tie_word_embeddings": False, "text_config": text, "vision_config": vision, "torch_dtype": "bfloat16",
            "template": ids["template"]}


def make_config_only(args):
    """config.json, the tokenizer files and model.json; no weights, no torch."""
    t0 = time.time()
    clear_model_dir(args.out)
    config = hf_config_dict(args.variant, args.size)
    if args.template:
        config["template"] = args.template
    common.write_json(os.path.join(args.out, "config.json"), config)
    write_tokenizer(args.out, args.variant, args.tokenizer)
    peers = add_peer_files(args.out, args.variant)
    info = {"dir": os.path.abspath(args.out), "variant": args.variant, "size": args.size, "config_only": True,
            "text_config": config["text_config"], "build_s": time.time() - t0, "peer_files": peers}
    common.write_json(os.path.join(args.out, "model.json"), info)
    common.log(f"config only: {args.variant} {args.size} in {args.out} (run with --load-format dummy)")
    return info


def make(args):
    if args.config_only:
        return make_config_only(args)
    import torch
    from transformers import InternVLForConditionalGeneration
    t0 = time.time()
    torch.manual_seed(args.seed)
    if args.device == "cuda":
        torch.cuda.manual_seed_all(args.seed)
    config = build_config(args.variant, args.tiny, args.std, args.size)
    if args.llm_layers:  # a shallow LLM behind the full ViT: the ViT's own precision shows in the logits
        config.text_config.num_hidden_layers = args.llm_layers
    dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[args.dtype]
    with torch.device(args.device):
        model = InternVLForConditionalGeneration._from_config(config, dtype=dtype)
    if not args.plain_init:
        perturb_constants(model, args.std, args.seed + 1)
    if args.device == "cuda":
        torch.cuda.synchronize()
    t_built = time.time()
    params = sum(p.numel() for p in model.parameters())
    clear_model_dir(args.out)
    model.save_pretrained(args.out, max_shard_size=args.shard_size)
    write_tokenizer(args.out, args.variant, args.tokenizer)
    annotate_config(args.out, args.template or common.VARIANT_IDS[args.variant]["template"])
    peers = add_peer_files(args.out, args.variant)
    t_saved = time.time()
    info = {"dir": os.path.abspath(args.out), "variant": args.variant, "tiny": args.tiny, "seed": args.seed,
            "std": args.std, "perturbed": not args.plain_init, "llm_layers": config.text_config.num_hidden_layers,
            "dtype": args.dtype, "params": params,
            "build_s": t_built - t0, "save_s": t_saved - t_built,
            "bytes": sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out)),
            "dims": common.model_dims(config), "torch": torch.__version__, "peer_files": peers,
            "transformers": __import__("transformers").__version__}
    common.write_json(os.path.join(args.out, "model.json"), info)
    common.log(f"model: {args.variant}{' tiny' if args.tiny else ''} {params / 1e9:.3f} B params, built in "
               f"{info['build_s']:.1f} s, saved {info['bytes'] / 1e9:.2f} GB in {info['save_s']:.1f} s to {args.out}")
    return info


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--variant", choices=sorted(common.VARIANT_IDS), default="internlm2")
    p.add_argument("--tokenizer", default="", help="tokenizer.model file, or a folder of tokenizer files")
    p.add_argument("--template", choices=sorted(common.TEMPLATES), help="written to config.json; default: the variant's")
    p.add_argument("--tiny", action="store_true", help="small shapes for a CPU check")
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--std", type=float, default=0.02, help="initializer_range of the random init")
    p.add_argument("--plain-init", action="store_true", help="keep transformers' constant inits")
    p.add_argument("--shard-size", default="5GB")
    p.add_argument("--size", choices=["8b", "72b"], default="8b", help="72b: Qwen2.5-72B's LLM (--variant qwen2)")
    p.add_argument("--config-only", action="store_true", help="config and tokenizer only, for --load-format dummy")
    p.add_argument("--llm-layers", type=int, default=0, help="the LLM's depth, if not the variant's (weights only)")
    make(p.parse_args())


if __name__ == "__main__":
    main()
