"""The files that let vLLM 0.20 and LMDeploy 0.18 load make_model.py's -hf checkpoint (issue 26), written beside
the ones Fovea and transformers read, and changing nothing they read differently:

- config.json: text_config.architectures (both peers build the LLM from it).
- preprocessor_config.json / video_preprocessor_config.json / processor_config.json: transformers' InternVL
  processor (GotOcr2 image processor: 1-12 tiles + a thumbnail of 448 px, 256 tokens per tile), which both
  peers call for the tiling. Fovea reads min/max_patches and crop_to_patches from the first: the values it
  already uses.
- tokenizer.json: InternLM2's SentencePiece model as a `tokenizers` BPE (no dummy prefix, byte fallback, BOS
  added by the post-processor, the chat and image tokens as special tokens), so that the peers' tokenizer gives
  the ids Fovea's does. Fovea's tokenizer stays tokenizer.model (a folder's tokenizer.model wins), but Fovea
  parses tokenizer.json too (its post-processor's BOS), so a half-written one would make it refuse the model:
  it is built first and written atomically, or not at all. `<video>` (which vLLM's processor requires to be one
  token) is given id 92537, an unused piece ([UNUSED_TOKEN_140]) inside the vocabulary.
- tokenizer_config.json: tokenizer_class, add_bos_token, <unk>/<s>/</s> in added_tokens_decoder (Fovea looks
  bos_token up there once add_bos_token is set) and the image tokens under extra_special_tokens.

The InternLM2 variant only: the Qwen2 variant's vocabulary has no free id for `<video>`.
  python3 bench/gpu/peer_files.py --model DIR   (adds them to a folder make_model.py wrote without them)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import sentencepiece_proto  # noqa: E402

IMAGE_TOKENS = {"start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>",
                "video_token": "<video>"}
VIDEO_TOKEN_ID = 92537  # [UNUSED_TOKEN_140] of InternLM2's tokenizer.model: never produced from text
# The control pieces of InternLM2's tokenizer.model, added tokens in its tokenizer.json and tokenizer_config.json.
SENTENCEPIECE_SPECIALS = {"<unk>": 0, "<s>": 1, "</s>": 2}
TEXT_ARCHITECTURE = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}


def image_processor_config():
    """GotOcr2's settings for InternVL's official tiling (common.py: 448 px tiles, up to 12 + a thumbnail)."""
    return {"image_processor_type": "GotOcr2ImageProcessor", "processor_class": "InternVLProcessor",
            "crop_to_patches": True, "min_patches": 1, "max_patches": common.MAX_TILES,
            "size": {"height": common.TILE, "width": common.TILE}, "resample": 3, "do_resize": True,
            "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True, "do_convert_rgb": True,
            "image_mean": list(common.IMAGENET_MEAN), "image_std": list(common.IMAGENET_STD)}


def video_processor_config():
    keep = ("size", "resample", "do_resize", "do_rescale", "rescale_factor", "do_normalize", "do_convert_rgb",
            "image_mean", "image_std")
    return dict({k: v for k, v in image_processor_config().items() if k in keep},
                video_processor_type="InternVLVideoProcessor", processor_class="InternVLProcessor",
                initial_shift=True)


def check_convertible(model, model_file):
    """What sentencepiece_bpe does not model must be off in the model (all are in InternLM2's)."""
    problems = []
    if model["model_type"] != sentencepiece_proto.BPE:
        problems.append(f"model type {model['model_type']} is not BPE (2)")
    if model["add_dummy_prefix"]:
        problems.append("it adds a dummy prefix")
    if model["remove_extra_whitespaces"]:
        problems.append("it removes extra whitespace")
    if model["precompiled_charsmap"] or model["normalizer_name"] not in ("", "identity"):
        problems.append(f"its normalizer {model['normalizer_name']!r} is not the identity")
    if problems:
        raise ValueError(f"{model_file}: {'; '.join(problems)}, which this conversion does not model")


def sentencepiece_bpe(model_file):
    """InternLM2's tokenizer.model as a `tokenizers` BPE: the pieces as the vocabulary, and a merge (left, right)
    for every split of a normal piece into two pieces, ranked by the piece's score as SentencePiece ranks its
    merges (ties: shorter left part first, then lower ids). No dummy prefix: InternLM2's model has
    add_dummy_prefix off ("Hello" -> 9843, " Hello" -> 22190). Unknown characters fall back to byte pieces.
    The model is read as a protobuf (sentencepiece_proto.py), not loaded with SentencePieceProcessor, which newer
    sentencepiece releases refuse for InternLM2's piece 354 ("\x00"). That piece stays in the vocabulary as it
    is, as transformers' SentencePiece converters (which also read the proto) keep it: a NUL in the text maps to
    354, as the older sentencepiece that InternLM2 was made with encodes it."""
    from tokenizers import Tokenizer, decoders, normalizers
    from tokenizers.models import BPE
    model = sentencepiece_proto.read_model(model_file)
    check_convertible(model, model_file)
    pieces = [piece for piece, _, _ in model["pieces"]]
    vocab = {piece: index for index, piece in enumerate(pieces)}
    if len(vocab) != len(pieces):
        raise ValueError(f"{model_file} holds a piece twice")
    special = (sentencepiece_proto.CONTROL, sentencepiece_proto.UNKNOWN, sentencepiece_proto.UNUSED,
               sentencepiece_proto.BYTE)
    ranked = []
    for index, (piece, score, kind) in enumerate(model["pieces"]):
        if kind in special:
            continue
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in vocab and right in vocab:
                ranked.append((-score, len(left), vocab[left], vocab[right], left, right))
    ranked.sort()
    merges = [(left, right) for *_, left, right in ranked]
    unknown = [i for i, (_, _, kind) in enumerate(model["pieces"]) if kind == sentencepiece_proto.UNKNOWN]
    unk_id = unknown[0] if unknown else model["unk_id"]
    tokenizer = Tokenizer(BPE(vocab=vocab, merges=merges, unk_token=pieces[unk_id], fuse_unk=True,
                              byte_fallback=model["byte_fallback"]))
    tokenizer.normalizer = normalizers.Replace(" ", "\u2581")
    tokenizer.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    return tokenizer


def build_tokenizer_json(model_file, added, bos="<s>"):
    """InternLM2's tokenizer.model -> a `tokenizers` Tokenizer (JSON string) with `added` ({text: id}) as special
    tokens and BOS prepended to a single sequence. An added id inside the pieces renames the piece there, as
    InternLM2's own tokenizer files rename [UNUSED_TOKEN_*] pieces; ids past the pieces extend the vocabulary."""
    import json
    from tokenizers import Tokenizer, processors
    doc = json.loads(sentencepiece_bpe(model_file).to_str())
    vocab = doc["model"]["vocab"]
    piece_at = {index: piece for piece, index in vocab.items()}
    specials = {**added, **SENTENCEPIECE_SPECIALS}
    bos_id = specials[bos]
    for text, index in specials.items():
        if index in piece_at and piece_at[index] != text:
            del vocab[piece_at[index]]
            vocab[text] = index
    beyond = sorted(i for i in specials.values() if i not in piece_at)
    if beyond and beyond != list(range(len(piece_at), len(piece_at) + len(beyond))):
        raise ValueError(f"added token ids {beyond} do not follow the {len(piece_at)} pieces")
    doc["added_tokens"] = [
        {"id": index, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True} for text, index in sorted(specials.items(), key=lambda kv: kv[1])]
    tokenizer = Tokenizer.from_str(json.dumps(doc, ensure_ascii=False))
    tokenizer.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                             special_tokens=[(bos, bos_id)])
    return tokenizer.to_str(pretty=False)


def write_peer_files(out, variant, added):
    """Writes/extends the files above in the model folder `out`. `added`: the tokenizer's added tokens."""
    if variant != "internlm2":
        common.log(f"peer files: the {variant} variant gets none (vLLM/LMDeploy runs use --variant internlm2)")
        return False
    config_path = os.path.join(out, "config.json")
    config = common.read_json(config_path)
    text = config["text_config"]
    text["architectures"] = [TEXT_ARCHITECTURE[text["model_type"]]]
    common.write_json(config_path, config)
    common.write_json(os.path.join(out, "preprocessor_config.json"), image_processor_config())
    common.write_json(os.path.join(out, "video_preprocessor_config.json"), video_processor_config())
    common.write_json(os.path.join(out, "processor_config.json"),
                      {"processor_class": "InternVLProcessor", "image_seq_length": common.TOKENS_PER_TILE})
    tokens = dict(added, **{"<video>": VIDEO_TOKEN_ID})
    model_file = os.path.join(out, "tokenizer.model")
    if os.path.exists(model_file):
        # Built before anything is written: a failure leaves no tokenizer.json (Fovea would read a bad one).
        common.write_text(os.path.join(out, "tokenizer.json"), build_tokenizer_json(model_file, tokens))
    else:
        common.log("peer files: no tokenizer.model in the model folder, so no tokenizer.json for the peers")
    tok_path = os.path.join(out, "tokenizer_config.json")
    tok = common.read_json(tok_path, {})
    # PreTrainedTokenizerFast: the pipeline exactly as tokenizer.json gives it (AutoTokenizer would otherwise
    # take model_type internvl's Qwen2Tokenizer).
    # add_bos_token makes Fovea (and transformers) look bos_token up among the added tokens: list <s> there, as
    # InternLM2's own tokenizer_config.json does.
    decoder = tok.get("added_tokens_decoder", {})
    decoder.update(common.added_tokens_decoder(SENTENCEPIECE_SPECIALS))
    tok["added_tokens_decoder"] = dict(sorted(decoder.items(), key=lambda kv: int(kv[0])))
    tok.update({"tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": True, "add_eos_token": False,
                "extra_special_tokens": IMAGE_TOKENS, "pad_token": "</s>", "unk_token": "<unk>",
                "processor_class": "InternVLProcessor"})
    common.write_json(tok_path, tok)
    return True


def main():
    """Adds the peer files to a model folder that make_model.py wrote before it made them."""
    import argparse
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="make_model.py's output folder")
    args = p.parse_args()
    info = common.read_json(os.path.join(args.model, "model.json"), {})
    variant = info.get("variant", "internlm2")
    added = common.read_json(os.path.join(args.model, "added_tokens.json"), {})
    try:
        written = write_peer_files(args.model, variant, added)
    except Exception as e:  # noqa: BLE001 - one line for peers.sh to record, not a traceback
        common.die(f"peer files: not written ({type(e).__name__}: {e})")
    if not written:
        sys.exit(1)
    common.log(f"peer files written to {args.model}")


if __name__ == "__main__":
    main()
