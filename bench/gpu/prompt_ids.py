"""Token ids of the benchmark prompt, made by Fovea's own tokenizer (`fovea tokenize --special`), so that
transformers gets exactly the ids Fovea builds (the InternLM2 Python tokenizer is not on the GPU machine).

The chat template's text before and after the image block is tokenised once each; a request's ids are then
[BOS] + before + <img> + <IMG_CONTEXT> x 256*tiles + </img> + after. Writes WORK/prompt.json.
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def fovea_tokenize(fovea, tokenizer, text):
    proc = subprocess.run([fovea, "tokenize", "--tokenizer", tokenizer, "--special"], input=text.encode("utf-8"),
                          capture_output=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"fovea tokenize failed ({proc.returncode}): {proc.stderr.decode(errors='replace')}")
    return [int(tok) for tok in proc.stdout.split()]


def build(fovea, tokenizer, variant, template_name=None, question=common.QUESTION):
    ids = common.VARIANT_IDS[variant]
    template_name = template_name or ids["template"]
    template = common.TEMPLATES[template_name]
    before_text = template["before_image"].format(system=template["system"])
    after_text = template["after_image"].format(question=question)
    before = ([ids["bos"]] if ids["bos"] is not None else []) + fovea_tokenize(fovea, tokenizer, before_text)
    after = fovea_tokenize(fovea, tokenizer, after_text)
    return {"variant": variant, "template": template_name, "before": before, "after": after,
            "img_start": ids["img_start"], "img_end": ids["img_end"], "img_context": ids["img_context"],
            "text_tokens": len(before) + len(after) + 2, "before_text": before_text, "after_text": after_text}


def request_ids(prompt, tiles):
    return (prompt["before"] + [prompt["img_start"]] + [prompt["img_context"]] * (common.TOKENS_PER_TILE * tiles)
            + [prompt["img_end"]] + prompt["after"])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fovea", required=True, help="the fovea binary")
    p.add_argument("--tokenizer", required=True, help="tokenizer.model / tokenizer folder (the model dir works)")
    p.add_argument("--variant", choices=sorted(common.VARIANT_IDS), default="internlm2")
    p.add_argument("--template", choices=sorted(common.TEMPLATES), help="default: the variant's own")
    p.add_argument("--out", required=True, help="prompt.json to write")
    args = p.parse_args()
    prompt = build(args.fovea, args.tokenizer, args.variant, args.template)
    common.write_json(args.out, prompt)
    # Sanity: the template's special tokens must have come out as single ids, not as text pieces.
    specials = {"internlm2": [92543, 92542], "qwen2": [151644, 151645]}[args.variant]
    missing = [s for s in specials if s not in prompt["before"] + prompt["after"]]
    common.log(f"prompt ({prompt['template']}): {prompt['text_tokens']} text tokens ({len(prompt['before'])} before the image, "
               f"{len(prompt['after'])} after){'; MISSING special ids ' + str(missing) if missing else ''}")
    if missing:
        sys.exit(1)


if __name__ == "__main__":
    main()
