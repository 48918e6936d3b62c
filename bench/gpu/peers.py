"""The peers in the instrument (issue 26): LMDeploy 0.18 (PyTorch engine) and vLLM 0.20 on the benchmark's own
checkpoint (WORK/model, make_model.py), listing photos (WORK/tasks.jsonl) and prompt tokens (WORK/prompt.json,
made by Fovea's tokenizer), greedy, one new token, prefix caching on. Phases per engine:
  bf16: q1 (one question per photo, the first --photos tasks), q4 and q16 (the first --k-photos / --k16-photos
        photos asked the first 4 / 16 questions of `fovea bench --questions`, an image's questions submitted
        together, as questions.sh does for Fovea); fp8: q1 again with the peer's online FP8.
Each (engine, precision) runs in its own process group under the time left (a failure or a timeout is recorded
with its log's tail and never stops the next one); nvidia-smi is sampled meanwhile for the GPU memory peak.
Results accumulate across calls in WORK/peers.json, copied to OUT/peers.json; a table is printed last.

Where the work differs from Fovea's (recorded in peers.json, "work"):
- vLLM gets Fovea's prompt ids with one <IMG_CONTEXT> where the image goes; its processor expands that into
  <img> + 256 x tiles + </img>, so its ids equal Fovea's when its tiling gives the same tile count (checked per
  request). LMDeploy takes no token ids with images: it gets the same chat template as a ChatTemplateConfig
  and tokenizes the text around the image itself with the checkpoint's tokenizer.json (checked against
  prompt.json before the run).
- Both tile with transformers' GotOcr2 processor (torch resize) instead of InternVL's Pillow tiling: the same
  tile grids, slightly different pixels, so first tokens can differ where the reference's margin is small.
Driver: peers.py --engines lmdeploy,vllm [--precisions bf16,fp8] --work WORK --out OUT --paths-json STASH.json
        [--vllm-eager] [--photos 200] [--k-photos 64] [--k16-photos 32] [--deadline EPOCH]
Worker (one engine, one precision; run by the driver): peers.py --worker ENGINE --precision bf16|fp8 ...
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
import compare  # noqa: E402
from gpu_sampler import GpuSampler  # noqa: E402

ENGINES = ("lmdeploy", "vllm")
VERSIONS = {"lmdeploy": "0.18.0", "vllm": "0.20.0"}


def listing_questions(repo=os.path.join(HERE, "..", "..")):
    """The questions of `fovea bench --questions K`, read from its source so both ask the same: the first is
    the benchmark's question (--prompt), then kListingQuestions[1:]."""
    with open(os.path.join(repo, "src", "cli", "cmd_bench.cc"), encoding="utf-8") as f:
        source = f.read()
    block = source[source.index("kListingQuestions[] = {"):]
    block = block[:block.index("};")]
    return [common.QUESTION] + re.findall(r'"((?:[^"\\]|\\.)*)"', block)


def phases(precision, photos, k_photos, k16_photos):
    """(name, questions per photo, photos) of a run."""
    if precision == "fp8":
        return [("q1", 1, photos)]
    return [("q1", 1, photos), ("q4", 4, k_photos), ("q16", 16, k16_photos)]


def phase_requests(tasks, questions, count):
    """An image's questions together, image after image: [(request id, image path, question index)]."""
    return [(t["id"] if questions == 1 else f"{t['id']}-q{q}", t["image"], q)
            for t in tasks[:count] for q in range(questions)]


# ---------------------------------------------------------------- the engines (worker side)

class VllmPeer:
    """vLLM's offline LLM class. Settings: bf16, prefix caching on (its default), CUDA graphs + torch.compile
    unless --vllm-eager, FlashAttention 3 (Hopper's default), max_model_len 8192 (prompts are <= 3,500 tokens),
    one image per prompt, gpu_memory_utilization 0.9, the default batching limits; fp8: quantization="fp8"
    (online: weights to FP8 at load, dynamic activation scales; the ViT stays bf16)."""

    def __init__(self, model, precision, eager, prompt):
        from vllm import LLM, SamplingParams
        self.settings = {"dtype": "bfloat16", "enable_prefix_caching": True, "enforce_eager": eager,
                         "max_model_len": 8192, "limit_mm_per_prompt": {"image": 1, "video": 0},
                         "gpu_memory_utilization": 0.9, "seed": 0}
        if precision == "fp8":
            self.settings["quantization"] = "fp8"
        self.llm = LLM(model=model, **self.settings)
        self.settings["effective"] = vllm_effective_settings(self.llm)
        self.params = SamplingParams(temperature=0.0, max_tokens=1, detokenize=False)
        self.prompt = prompt

    def generate(self, requests, images, question_ids):
        before, ctx = self.prompt["before"], self.prompt["img_context"]
        prompts = [{"prompt_token_ids": before + [ctx] + question_ids[q], "multi_modal_data": {"image": images[path]}}
                   for _, path, q in requests]
        outs = self.llm.generate(prompts, self.params, use_tqdm=False)
        return [{"token": o.outputs[0].token_ids[0] if o.outputs and o.outputs[0].token_ids else None,
                 "prompt_tokens": len(o.prompt_token_ids or []), "cached_tokens": o.num_cached_tokens} for o in outs]

    def reset(self):
        self.llm.reset_prefix_cache()
        if hasattr(self.llm, "reset_mm_cache"):  # the processed images, or the next phase skips their tiling
            self.llm.reset_mm_cache()
        return "reset_prefix_cache + reset_mm_cache"


def vllm_effective_settings(llm):
    """What the engine resolved the defaults to (batching limits, prefix caching, compilation, CUDA graphs)."""
    out = {}
    try:
        config = llm.llm_engine.vllm_config
        out = {"enable_prefix_caching": config.cache_config.enable_prefix_caching,
               "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
               "max_num_seqs": config.scheduler_config.max_num_seqs,
               "compilation_mode": str(getattr(config.compilation_config, "mode", None)),
               "cudagraph_mode": str(getattr(config.compilation_config, "cudagraph_mode", None)),
               "quantization": config.model_config.quantization}
    except AttributeError as e:  # another vLLM layout: the requested settings stand alone
        out = {"unread": str(e)}
    return out


def lmdeploy_chat_template(template):
    """Fovea's chat template (common.TEMPLATES) as LMDeploy's ChatTemplateConfig fields."""
    before = template["before_image"]
    after = template["after_image"]
    system_open, user_open = before.split("{system}")
    eosys, user = user_open.split("<|im_start|>", 1)
    eoh, assistant = after.split("{question}")[1].split("<|im_start|>", 1)
    return {"model_name": "fovea-benchmark-template", "system": system_open, "meta_instruction": template["system"],
            "eosys": eosys, "user": "<|im_start|>" + user, "eoh": eoh, "assistant": "<|im_start|>" + assistant,
            "eoa": "<|im_end|>", "separator": "", "capability": "chat", "stop_words": ["<|im_end|>"]}


class LmdeployPeer:
    """LMDeploy's pipeline on its PyTorch engine (TurboMind's extension needs CUDA 12 libraries the GPU machine
    lacks). Settings: bf16, enable_prefix_caching=True, session_len 8192, cache_max_entry_count 0.8 and
    max_prefill_token_num 8192 (its defaults), CUDA graphs for decoding (eager_mode False, its default),
    VisionConfig(max_batch_size=8) (its documented setting for batched ViT; default 1); fp8:
    model_format="fp8" (online 128x128-block FP8 weights)."""

    def __init__(self, model, precision, questions, template):
        from lmdeploy import ChatTemplateConfig, GenerationConfig, PytorchEngineConfig, VisionConfig, pipeline
        self.settings = {"session_len": 8192, "enable_prefix_caching": True, "cache_max_entry_count": 0.8,
                         "max_prefill_token_num": 8192}
        if precision == "fp8":
            self.settings["model_format"] = "fp8"
        self.chat = lmdeploy_chat_template(template)
        self.settings["vision_max_batch_size"] = 8
        self.pipe = pipeline(model, backend_config=PytorchEngineConfig(**{k: v for k, v in self.settings.items()
                                                                          if k != "vision_max_batch_size"}),
                             chat_template_config=ChatTemplateConfig(**self.chat),
                             vision_config=VisionConfig(max_batch_size=8), log_level="WARNING")
        self.gen = GenerationConfig(max_new_tokens=1, do_sample=False, top_k=1)
        self.questions = questions
        # LMDeploy turns prefix caching off by itself for this path (vl_async_engine.py: only TurboMind's native
        # vision and the PyTorch "new preprocess" models keep it): record what it runs with.
        config = self.pipe.backend_config
        self.settings["effective"] = {k: getattr(config, k, None) for k in (
            "enable_prefix_caching", "max_batch_size", "cache_max_entry_count", "max_prefill_token_num",
            "eager_mode", "block_size", "model_format")}

    def generate(self, requests, images, question_ids):
        messages = [[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": images[path]}},
                                                  {"type": "text", "text": self.questions[q]}]}]
                    for _, path, q in requests]
        outs = self.pipe(messages, gen_config=self.gen)
        return [{"token": o.token_ids[0] if o.token_ids else None, "prompt_tokens": o.input_token_len,
                 "cached_tokens": None} for o in outs]

    def reset(self):
        return "none (LMDeploy has no prefix-cache reset; it does not reuse image prefixes)"


def check_lmdeploy_prompt(model, prompt, template):
    """LMDeploy tokenizes the text around the image itself (vl/model/base.py to_pytorch_aux): the text up to
    and including <img> with BOS, the rest from </img> without. Those ids against Fovea's prompt.json."""
    from lmdeploy.model import ChatTemplateConfig
    from lmdeploy.tokenizer import Tokenizer
    chat = ChatTemplateConfig(**lmdeploy_chat_template(template)).chat_template()
    text = chat.messages2prompt([{"role": "user", "content": "<img><IMG_CONTEXT></img>\n" + common.QUESTION}])
    head, tail = text.split("<IMG_CONTEXT>")
    tok = Tokenizer(model)
    ids_head, ids_tail = tok.encode(head, add_bos=True), tok.encode(tail, add_bos=False)
    return {"text_equal": text == prompt["before_text"] + "<img><IMG_CONTEXT></img>" + prompt["after_text"],
            "ids_equal": (ids_head == prompt["before"] + [prompt["img_start"]]
                          and ids_tail == [prompt["img_end"]] + prompt["after"])}


def question_token_ids(model, prompt, questions, template):
    """The ids after the image for each question, by the checkpoint's tokenizer.json (the first is checked
    against Fovea's prompt.json["after"], made by `fovea tokenize`)."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model)
    ids = [tok.encode(template["after_image"].format(question=q), add_special_tokens=False) for q in questions]
    return ids, ids[0] == prompt["after"]


def expected_prompt_tokens(prompt, question_ids, image):
    return (len(prompt["before"]) + 2 + common.TOKENS_PER_TILE * common.official_tile_count(*image.size)
            + len(question_ids))


def run_worker(args):
    from PIL import Image
    result_path = args.result
    result = {"engine": args.worker, "version": VERSIONS[args.worker], "precision": args.precision,
              "phases": {}, "started": time.time()}
    prompt = common.read_json(os.path.join(args.work, "prompt.json"))
    tasks = common.read_jsonl(os.path.join(args.work, "tasks.jsonl"))
    if not prompt or not tasks:
        common.die(f"{args.work} lacks prompt.json or tasks.jsonl: run bench/gpu/run_all.sh first on this machine")
    template = common.TEMPLATES[prompt["template"]]
    questions = listing_questions()
    model = os.path.join(args.work, "model")
    question_ids, after_equal = question_token_ids(model, prompt, questions, template)
    result["work"] = {"question_ids_equal_fovea_after": after_equal}
    common.write_json(result_path, result)
    t0 = time.time()
    if args.worker == "vllm":
        engine = VllmPeer(model, args.precision, args.vllm_eager, prompt)
        result["work"]["prompt"] = "Fovea's prompt ids, one <IMG_CONTEXT> expanded by vLLM's processor"
    else:
        result["work"]["lmdeploy_prompt_check"] = check_lmdeploy_prompt(model, prompt, template)
        engine = LmdeployPeer(model, args.precision, questions, template)
        result["work"]["prompt"] = "Fovea's chat template as a ChatTemplateConfig, tokenized by LMDeploy"
    result["settings"] = engine.settings
    result["load_s"] = time.time() - t0
    common.write_json(result_path, result)
    common.log(f"{args.worker} {args.precision}: loaded in {result['load_s']:.1f} s; settings {engine.settings}")
    # Warm-up on the last two tasks; every phase below starts with the caches emptied (engine.reset()).
    warm = [(t["id"], t["image"], 0) for t in tasks[-2:]]
    engine.generate(warm, {p: Image.open(p).convert("RGB") for _, p, _ in warm}, question_ids)
    ref = common.read_json(os.path.join(args.work, "ref.json"), {}).get("records", {})
    ref_tokens = {rid: rec["token"] for rid, rec in ref.items()}
    decisive = [rid for rid, rec in ref.items()
                if rec["margin"] > compare.DECISIVE_MARGIN * max(rec["logits_rms"], 1e-12)]
    fovea_tokens = compare.first_tokens(common.read_jsonl(os.path.join(args.work, "fovea_official.jsonl")))
    for name, k, count in phases(args.precision, args.photos, args.k_photos, args.k16_photos):
        reset = engine.reset()
        requests = phase_requests(tasks, k, count)
        t0 = time.perf_counter()
        images = {}
        for _, path, _ in requests:  # JPEG decoding counts, as in Fovea's runs from files
            if path not in images:
                images[path] = Image.open(path).convert("RGB")
        outs = engine.generate(requests, images, question_ids)
        seconds = time.perf_counter() - t0
        expected = [expected_prompt_tokens(prompt, question_ids[q], images[p]) for _, p, q in requests]
        tokens = {rid: o["token"] for (rid, _, _), o in zip(requests, outs)}
        prompt_tokens = [o["prompt_tokens"] for o in outs]
        cached = [o["cached_tokens"] for o in outs if o["cached_tokens"] is not None]
        entry = {"questions_per_photo": k, "photos": count, "requests": len(requests), "seconds": seconds,
                 "qpm": 60.0 * len(requests) / seconds, "cache_reset_before": reset,
                 "prompt_tokens_mean": sum(prompt_tokens) / len(prompt_tokens),
                 "fovea_prompt_tokens_mean": sum(expected) / len(expected),
                 "prompt_tokens_equal_fovea": sum(1 for a, b in zip(prompt_tokens, expected) if a == b),
                 "cached_prompt_tokens_mean": sum(cached) / len(cached) if cached else None,
                 "distinct_first_tokens": len(set(tokens.values()))}
        if k == 1:
            entry["vs_reference"] = compare.agreement(tokens, ref_tokens, list(ref_tokens))
            entry["vs_reference_decisive"] = compare.agreement(tokens, ref_tokens, decisive)
            entry["vs_fovea_official"] = compare.agreement(tokens, fovea_tokens, list(fovea_tokens))
            entry["first_tokens"] = tokens
        result["phases"][name] = entry
        common.write_json(result_path, result)
        common.log(f"{args.worker} {args.precision} {name}: {len(requests)} requests in {seconds:.1f} s = "
                   f"{entry['qpm']:.1f} QPM, {entry['prompt_tokens_mean']:.0f} prompt tokens (Fovea "
                   f"{entry['fovea_prompt_tokens_mean']:.0f})")
    if "q1" in result["phases"]:
        for name in ("q4", "q16"):
            if name in result["phases"]:
                result["phases"][name]["x_single_question"] = (result["phases"][name]["qpm"]
                                                               / result["phases"]["q1"]["qpm"])
    result["finished"] = time.time()
    common.write_json(result_path, result)
    os._exit(0)  # engines leave threads and child processes behind: do not wait for them at exit


# ---------------------------------------------------------------- the driver

def run_one(args, engine, precision, paths, limit):
    """One worker process (its own process group, killed whole at the limit). Returns its result dict."""
    result_path = os.path.join(args.work, f"peers_{engine}_{precision}.json")
    log_path = os.path.join(args.work, f"peers_{engine}_{precision}.log")
    if os.path.exists(result_path):
        os.remove(result_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths + [HERE, os.environ.get("PYTHONPATH", "")]),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1",
               PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", engine, "--precision", precision,
           "--work", args.work, "--result", result_path, "--photos", str(args.photos),
           "--k-photos", str(args.k_photos), "--k16-photos", str(args.k16_photos)]
    if args.vllm_eager:
        cmd.append("--vllm-eager")
    sampler = GpuSampler()
    sampler.start()
    t0 = time.time()
    status = "ok"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            rc = proc.wait(timeout=limit)
            status = "ok" if rc == 0 else f"failed({rc})"
        except subprocess.TimeoutExpired:
            status = "timeout"
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # its engine processes too, or they hold the GPU
            except ProcessLookupError:
                pass
            proc.wait()
    sampler.finish()
    result = common.read_json(result_path, {}) or {"engine": engine, "precision": precision}
    result.update(status=status, wall_s=time.time() - t0, limit_s=limit, gpu_memory_peak_mib=sampler.peak_mib)
    if status != "ok":
        with open(log_path, errors="replace") as f:
            result["log_tail"] = f.read()[-3000:]
    return result


def drive(args):
    stash = common.read_json(args.paths_json, {}) if args.paths_json else {}
    paths = stash.get("paths", {})
    peers_path = os.path.join(args.work, "peers.json")
    merged = common.read_json(peers_path, {}) or {}
    merged.setdefault("runs", {})
    merged["questions"] = listing_questions()[:16]
    merged["versions"] = VERSIONS
    for engine in args.engines:
        if engine not in stash.get("ready", ENGINES):
            merged["runs"][f"{engine}/bf16"] = {"engine": engine, "status": "not unpacked yet",
                                                "missing": stash.get("missing", {})}
            continue
        for precision in args.precisions:
            left = int(args.deadline - time.time()) - 15
            key = f"{engine}/{precision}"
            if args.peer_files_error:  # the peers cannot load the checkpoint: recorded, not run
                merged["runs"][key] = {"engine": engine, "precision": precision, "status": "no peer files",
                                       "log_tail": args.peer_files_error[-3000:]}
                continue
            if left < 60:
                merged["runs"][key] = {"engine": engine, "precision": precision, "status": "no time left"}
                continue
            common.log(f"peers: {key} (limit {left} s)")
            merged["runs"][key] = run_one(args, engine, precision, paths.get(engine, []), left)
            common.log(f"peers: {key}: {merged['runs'][key]['status']}")
            common.write_json(peers_path, merged)
    merged["written"] = time.strftime("%Y-%m-%d %H:%M:%S")
    common.write_json(peers_path, merged)
    os.makedirs(args.out, exist_ok=True)
    common.write_json(os.path.join(args.out, "peers.json"), merged)
    print(table(merged))


def table(merged):
    rows = ["| run | status | load s | q1 QPM | q4 QPM/question | q16 QPM/question | prompt tokens (Fovea) | "
            "agrees w/ transformers | GPU peak MiB |", "|---|---|---|---|---|---|---|---|---|"]
    for key, run in sorted(merged.get("runs", {}).items()):
        ph = run.get("phases", {})

        def qpm(name):
            return f"{ph[name]['qpm']:.1f}" if name in ph else "-"
        q1 = ph.get("q1", {})
        tokens = (f"{q1['prompt_tokens_mean']:.0f} ({q1['fovea_prompt_tokens_mean']:.0f})" if q1 else "-")
        agree = q1.get("vs_reference", {})
        agree_text = f"{agree['agree']}/{agree['n']}" if agree.get("n") else "-"
        load = f"{run['load_s']:.0f}" if "load_s" in run else "-"
        rows.append(f"| {key} | {run.get('status')} | {load} | {qpm('q1')} | {qpm('q4')} | {qpm('q16')} | {tokens} | "
                    f"{agree_text} | {run.get('gpu_memory_peak_mib') or '-'} |")
    return "\n".join(rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engines", default="lmdeploy,vllm")
    p.add_argument("--work", default=os.environ.get("WORK", "/tmp/fovea_bench"))
    p.add_argument("--out", default=os.environ.get("OUT", "out/peers"))
    p.add_argument("--paths-json", help="peers_stash.py unpack's answer (where each engine's files are)")
    p.add_argument("--deadline", type=float, help="epoch seconds by which everything must have ended")
    p.add_argument("--precisions", default="bf16,fp8", help="bf16 (1/4/16 questions), fp8 (1 question)")
    p.add_argument("--vllm-eager", action="store_true", help="vLLM without CUDA graphs / torch.compile")
    p.add_argument("--photos", type=int, default=200, help="photos of the one-question phase")
    p.add_argument("--k-photos", type=int, default=64, help="photos of the 4-question phase")
    p.add_argument("--k16-photos", type=int, default=32, help="photos of the 16-question phase")
    p.add_argument("--peer-files-error", default="",
                   help="why peer_files.py could not write the peers' files: each run is recorded with it, none run")
    p.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    p.add_argument("--precision", choices=["bf16", "fp8"], default="bf16", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return run_worker(args)
    args.engines = [e for e in args.engines.split(",") if e]
    args.precisions = [x for x in args.precisions.split(",") if x]
    if not args.precisions or set(args.precisions) - {"bf16", "fp8"}:
        p.error("--precisions takes bf16, fp8 or bf16,fp8")
    unknown = [e for e in args.engines if e not in ENGINES]
    if unknown:
        p.error(f"unknown engine(s) {unknown}; known: {', '.join(ENGINES)}")
    if args.deadline is None:
        args.deadline = time.time() + 540
    drive(args)


if __name__ == "__main__":  # LMDeploy's pipeline spawns processes: nothing may start on import
    main()
