"""The transformers reference on the benchmark workload: end-to-end (Pillow preprocessing inline, the official
tiling, batch B), forward-only (inputs ready on the device), the ViT + projector alone per tile, and optionally
the same requests in float32 as the yardstick for bf16 agreement. max_tokens = 1: the first greedy token and
the last-token logits of every request are kept for the comparison with Fovea.

Each phase writes its results into OUT (JSON) as soon as it ends, so a step cut by its timeout still leaves the
phases before it. Full last-token logits go to LOGITS (.npz: ids, bf16, f32) for compare.py.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import prompt_ids  # noqa: E402


def sync(device):
    import torch
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def load_model(model_dir, device, dtype, attn):
    import torch
    from transformers import InternVLForConditionalGeneration
    if device.startswith("cuda"):
        try:  # straight onto the GPU: no 16 GB detour through host memory
            model = InternVLForConditionalGeneration.from_pretrained(model_dir, dtype=dtype, attn_implementation=attn,
                                                                     device_map=device)
            return model.eval()
        except (ImportError, ValueError) as e:
            common.log(f"reference: device_map load failed ({e}); loading on the host")
    model = InternVLForConditionalGeneration.from_pretrained(model_dir, dtype=dtype, attn_implementation=attn)
    return model.to(device).eval()


def pad_batch(id_lists, pad_id):
    """Left padding, with position ids counted from each sequence's own start (as generate() does)."""
    import torch
    longest = max(len(x) for x in id_lists)
    input_ids = torch.full((len(id_lists), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(id_lists), longest), dtype=torch.long)
    positions = torch.zeros((len(id_lists), longest), dtype=torch.long)
    for row, ids in enumerate(id_lists):
        start = longest - len(ids)
        input_ids[row, start:] = torch.tensor(ids, dtype=torch.long)
        mask[row, start:] = 1
        positions[row, start:] = torch.arange(len(ids))
    return input_ids, mask, positions


def forward_last_logits(model, batch, device):
    """batch: dict with input_ids, mask, positions (CPU or device) and pixel_values. Returns [B, V] float32."""
    import torch
    kwargs = dict(input_ids=batch["input_ids"].to(device), pixel_values=batch["pixel_values"].to(device, model.dtype),
                  position_ids=batch["positions"].to(device), use_cache=False, logits_to_keep=1)
    if batch["input_ids"].shape[0] > 1:  # one sequence needs no mask: sdpa takes its causal fast path
        kwargs["attention_mask"] = batch["mask"].to(device)
    with torch.inference_mode():
        out = model(**kwargs)
    logits = out.logits[:, -1, :].float()
    if batch["input_ids"].shape[0] > 1 and not bool(torch.isfinite(logits).all()):
        # Fully masked padding rows can turn into NaN inside some attention kernels and leak into the real rows
        # through 0 * NaN: redo such a batch one unpadded sequence at a time, and say so.
        PAD_FALLBACKS[0] += 1
        return torch.cat([forward_last_logits(model, single, device) for single in split_batch(batch)])
    return logits


PAD_FALLBACKS = [0]  # batches recomputed without padding (reported: it costs the e2e figure time)


def split_batch(batch):
    for row in range(batch["input_ids"].shape[0]):
        start = int((batch["mask"][row] == 0).sum())
        tiles_before = sum(batch["tiles"][:row])
        yield {"input_ids": batch["input_ids"][row:row + 1, start:], "mask": batch["mask"][row:row + 1, start:],
               "positions": batch["positions"][row:row + 1, start:], "tiles": [batch["tiles"][row]],
               "pixel_values": batch["pixel_values"][tiles_before:tiles_before + batch["tiles"][row]]}


def make_batch(requests, pixel_list, prompt, pad_id):
    import torch
    ids = [prompt_ids.request_ids(prompt, pv.shape[0]) for pv in pixel_list]
    input_ids, mask, positions = pad_batch(ids, pad_id)
    return {"input_ids": input_ids, "mask": mask, "positions": positions, "pixel_values": torch.cat(pixel_list),
            "ids": [r["id"] for r in requests], "lengths": [len(x) for x in ids],
            "tiles": [pv.shape[0] for pv in pixel_list]}


def summarise_logits(batch, logits, records):
    import torch
    top = torch.topk(logits, 5, dim=-1)
    for row, rid in enumerate(batch["ids"]):
        values = top.values[row].tolist()
        records[rid] = {"token": int(top.indices[row, 0]), "margin": values[0] - values[1],
                        "top5_ids": top.indices[row].tolist(), "top5_logits": values,
                        "logits_rms": float(logits[row].pow(2).mean().sqrt()),
                        "tiles": batch["tiles"][row], "prompt_tokens": batch["lengths"][row],
                        "finite": bool(torch.isfinite(logits[row]).all())}


def batches(items, size):
    return [items[i:i + size] for i in range(0, len(items), size)]


def run_e2e(model, requests, prompt, args, result, logits_out):
    """Pillow preprocessing inline, one batch at a time, as a plain transformers service would do it."""
    import torch
    pad_id = 0
    groups = batches(requests, args.batch)
    warm = groups[0]
    forward_last_logits(model, make_batch(warm, [common.load_pixel_values(r["image"]) for r in warm], prompt, pad_id),
                        args.device)
    sync(args.device)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    records, pre_s = {}, 0.0
    t0 = time.perf_counter()
    for group in groups:
        t_pre = time.perf_counter()
        pixels = [common.load_pixel_values(r["image"]) for r in group]
        batch = make_batch(group, pixels, prompt, pad_id)
        pre_s += time.perf_counter() - t_pre
        logits = forward_last_logits(model, batch, args.device)
        summarise_logits(batch, logits, records)
        for row, rid in enumerate(batch["ids"]):
            logits_out[rid] = logits[row].cpu()
    sync(args.device)
    elapsed = time.perf_counter() - t0
    tokens = [rec["token"] for rec in records.values()]
    result["e2e"] = {"requests": len(requests), "batch": args.batch, "seconds": elapsed,
                     "qpm": 60.0 * len(requests) / elapsed, "preprocess_ms_per_image": 1000.0 * pre_s / len(requests),
                     "distinct_first_tokens": len(set(tokens)), "padding_fallback_batches": PAD_FALLBACKS[0],
                     "non_finite_requests": sum(1 for rec in records.values() if not rec["finite"]),
                     "peak_gpu_mem_gb": torch.cuda.max_memory_allocated() / 1e9 if args.device.startswith("cuda") else None}
    result["records"] = records
    common.log(f"reference e2e: {len(requests)} requests in {elapsed:.2f} s = {result['e2e']['qpm']:.1f} QPM, "
               f"Pillow {result['e2e']['preprocess_ms_per_image']:.1f} ms/image, "
               f"{len(set(tokens))} distinct first tokens")


def run_forward_only(model, requests, prompt, args, result):
    """Inputs preprocessed and already on the device: the model's own speed."""
    prepared = []
    for group in batches(requests, args.batch):
        batch = make_batch(group, [common.load_pixel_values(r["image"]) for r in group], prompt, 0)
        for key in ("input_ids", "mask", "positions"):
            batch[key] = batch[key].to(args.device)
        batch["pixel_values"] = batch["pixel_values"].to(args.device, model.dtype)
        prepared.append(batch)
    forward_last_logits(model, prepared[0], args.device)
    sync(args.device)
    t0 = time.perf_counter()
    for batch in prepared:
        forward_last_logits(model, batch, args.device)
    sync(args.device)
    elapsed = time.perf_counter() - t0
    result["forward_only"] = {"requests": len(requests), "batch": args.batch, "seconds": elapsed,
                              "qpm": 60.0 * len(requests) / elapsed}
    common.log(f"reference forward-only: {elapsed:.2f} s = {result['forward_only']['qpm']:.1f} QPM")


def run_vit(model, requests, args, result):
    """ViT + projector alone (get_image_features) on one batch of real tiles."""
    import torch
    tiles, pixels = 0, []
    for r in requests:
        pv = common.load_pixel_values(r["image"])
        pixels.append(pv)
        tiles += pv.shape[0]
        if tiles >= args.vit_tiles:
            break
    pv = torch.cat(pixels)[: args.vit_tiles].to(args.device, model.dtype)
    with torch.inference_mode():
        model.model.get_image_features(pixel_values=pv)
        sync(args.device)
        t0 = time.perf_counter()
        for _ in range(args.vit_reps):
            model.model.get_image_features(pixel_values=pv)
        sync(args.device)
    elapsed = time.perf_counter() - t0
    per_tile = 1000.0 * elapsed / (args.vit_reps * pv.shape[0])
    result["vit"] = {"tiles": int(pv.shape[0]), "reps": args.vit_reps, "ms_per_tile": per_tile}
    common.log(f"reference ViT+projector: {per_tile:.3f} ms per tile (batch {pv.shape[0]})")


def run_fp32(model, requests, prompt, args, result, logits_f32):
    """The same requests one at a time in float32 (no TF32): what the bf16 answers are judged against."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model.float()
    t0 = time.perf_counter()
    for r in requests:
        batch = make_batch([r], [common.load_pixel_values(r["image"])], prompt, 0)
        logits_f32[r["id"]] = forward_last_logits(model, batch, args.device)[0].cpu()
    sync(args.device)
    result["fp32"] = {"requests": len(requests), "seconds": time.perf_counter() - t0}
    common.log(f"reference float32: {len(requests)} requests in {result['fp32']['seconds']:.1f} s")


def save_logits(path, bf16, f32):
    import numpy as np
    ids = sorted(bf16)
    arrays = {"ids": np.array(ids), "bf16": np.stack([bf16[i].numpy() for i in ids]) if ids else np.zeros((0, 0))}
    f32_ids = [i for i in ids if i in f32]
    arrays["f32_ids"] = np.array(f32_ids)
    arrays["f32"] = np.stack([f32[i].numpy() for i in f32_ids]) if f32_ids else np.zeros((0, 0))
    np.savez(path, **arrays)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--work", required=True, help="folder holding workload.json and prompt.json")
    p.add_argument("--out", required=True, help="JSON results")
    p.add_argument("--logits", required=True, help=".npz of last-token logits")
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    p.add_argument("--attn", default="sdpa")
    p.add_argument("--vit-tiles", type=int, default=32)
    p.add_argument("--vit-reps", type=int, default=3)
    p.add_argument("--fp32-requests", type=int, default=16, help="0 skips the float32 yardstick")
    p.add_argument("--skip", default="", help="comma list of phases to skip: fwd,vit,fp32")
    args = p.parse_args()
    import torch
    skip = set(filter(None, args.skip.split(",")))
    manifest = common.read_json(os.path.join(args.work, "workload.json"))
    prompt = common.read_json(os.path.join(args.work, "prompt.json"))
    if not manifest or not prompt:
        common.die("workload.json or prompt.json missing (run workload.py and prompt_ids.py first)")
    requests = manifest["requests"][: args.requests]
    dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[args.dtype]
    t0 = time.perf_counter()
    model = load_model(args.model, args.device, dtype, args.attn)
    result = {"model": args.model, "dtype": args.dtype, "attn": args.attn, "device": args.device,
              "torch": torch.__version__, "transformers": __import__("transformers").__version__,
              "load_s": time.perf_counter() - t0, "text_tokens": prompt["text_tokens"]}
    if args.device.startswith("cuda"):
        result["weights_gpu_mem_gb"] = torch.cuda.memory_allocated() / 1e9
        result["gpu"] = torch.cuda.get_device_name()
    common.log(f"reference: loaded {args.model} in {result['load_s']:.1f} s")
    bf16_logits, f32_logits = {}, {}
    phases = [("e2e", lambda: run_e2e(model, requests, prompt, args, result, bf16_logits)),
              ("fwd", lambda: run_forward_only(model, requests, prompt, args, result)),
              ("vit", lambda: run_vit(model, requests, args, result)),
              ("fp32", lambda: run_fp32(model, requests[: args.fp32_requests], prompt, args, result, f32_logits))]
    failed = False
    for name, phase in phases:
        if name in skip or (name == "fp32" and args.fp32_requests <= 0):
            continue
        try:
            phase()
        except Exception as e:  # one failing phase must not lose the others' numbers
            failed = True
            result.setdefault("errors", {})[name] = f"{type(e).__name__}: {e}"
            common.log(f"reference phase {name} failed: {type(e).__name__}: {e}")
        common.write_json(args.out, result)
        if bf16_logits:
            save_logits(args.logits, bf16_logits, f32_logits)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
