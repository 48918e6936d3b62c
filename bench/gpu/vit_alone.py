"""The ViT + projector alone, Fovea against transformers under the same conditions (issue 26's per-tile target).

The end-to-end runs give Fovea's ViT time per tile while the LLM shares the GPU's power budget (clocks ~1.4-1.5 GHz
at the power cap on an H100), and bench/gpu/reference.py times transformers' get_image_features on a short burst
after a warm-up: the two figures are not taken alike. Here both engines time the same batch of real tiles (the
first N tiles of the images, in name order, official tiling), in one GPU call, alternating rounds:
- burst: one warm-up batch, then --reps batches (reference.py's measure);
- held: the batch repeated for --hold seconds, the second half timed (the clocks a held load settles at).
Fovea runs `fovea bench --vit-alone N` (its engine's own path: tiles uploaded as bytes, normalised on the device,
ViT, projector, the copy into the image pool) on dummy weights of the model's config; transformers runs
InternVLModel.get_image_features on random weights of the same shapes (InternVL2-8B: InternViT-300M, the
projector to 4,096), bf16, sdpa attention.

  python3 bench/gpu/vit_alone.py --fovea BIN --model-dir DIR --images DIR [--tiles 32] [--reps 3] [--hold 10]
         [--rounds 2] [--quantizations none,fp8-all] --out FILE.json
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
import make_model  # noqa: E402


def image_paths(folder):
    return [os.path.join(folder, n) for n in sorted(os.listdir(folder)) if not n.startswith(".")]


def first_tiles(paths, count):
    """The first `count` tiles of the images in order, as fovea bench --vit-alone cuts them."""
    import torch
    tiles, have = [], 0
    for path in paths:
        pv = common.load_pixel_values(path)
        tiles.append(pv[: count - have])
        have += tiles[-1].shape[0]
        if have == count:
            return torch.cat(tiles)
    common.die(f"{len(paths)} images give {have} tiles, {count} asked")


def sync(device):
    import torch
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_transformers(model, pixels, reps, hold):
    """The same measure as vision_timing.cc: warm-up, `reps` batches; then repeat for `hold` s, time the last half."""
    import torch

    def once():
        with torch.inference_mode():
            model.get_image_features(pixel_values=pixels)
        sync(str(pixels.device))

    once()
    start = time.perf_counter()
    for _ in range(reps):
        once()
    tiles = pixels.shape[0]
    result = {"tiles": tiles, "reps": reps, "ms_per_tile": 1e3 * (time.perf_counter() - start) / (reps * tiles)}
    if hold > 0:
        start, window_start, in_window, last = time.perf_counter(), None, 0, 0.0
        while last < hold or in_window == 0:
            once()
            last = time.perf_counter() - start
            if window_start is None:
                if last >= hold / 2:
                    window_start = last
            else:
                in_window += 1
        result.update(hold_seconds=last, held_batches=in_window,
                      held_ms_per_tile=1e3 * (last - window_start) / (in_window * tiles))
    return result


def time_fovea(args, out_json, quantization="none"):
    cmd = [args.fovea, "bench", "--model", args.model_dir, "--images", args.images, "--backend",
           "cuda" if args.device.startswith("cuda") else "cpu",
           "--load-format", "dummy", "--kv-blocks", "1024", "--vit-alone", str(args.tiles), "--vit-reps",
           str(args.reps), "--vit-hold", str(args.hold), "--quantization", quantization, "--json", out_json]
    common.log("$ " + " ".join(cmd))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.hold + 120)
    sys.stderr.write(done.stdout + done.stderr[-2000:])
    if done.returncode != 0:
        return {"error": f"rc {done.returncode}: {done.stderr[-500:]}"}
    return json.load(open(out_json))["vit_alone"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fovea", required=True)
    p.add_argument("--model-dir", required=True, help="a config-only InternVL2-8B folder (family_models.py)")
    p.add_argument("--images", required=True)
    p.add_argument("--tiles", type=int, default=32)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--hold", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda", help="cpu: a rehearsal of the steps (--tiny shapes; no timing claim)")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--quantizations", default="none",
                   help="Fovea's --quantization values to time each round (e.g. none,fp8-all: the FP8 ViT); "
                        "transformers stays bf16. The first is the headline ratio")
    args = p.parse_args()
    quantizations = args.quantizations.split(",")

    import torch
    import transformers
    from transformers import InternVLModel
    config = make_model.build_config("internlm2", tiny=args.tiny, std=0.02)
    config.text_config.num_hidden_layers = 1  # get_image_features never reaches the LLM
    torch.manual_seed(0)
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    with torch.device(args.device):
        model = InternVLModel._from_config(config, dtype=dtype, attn_implementation="sdpa").eval()
    pixels = first_tiles(image_paths(args.images), args.tiles).to(args.device, dtype)

    rounds = []
    for r in range(args.rounds):
        by_quantization = {}
        for q in quantizations:
            by_quantization[q] = time_fovea(args, args.out + f".fovea{r}-{q}.json", q)
        ref = time_transformers(model, pixels, args.reps, args.hold)
        rounds.append({"fovea": by_quantization[quantizations[0]], "fovea_by_quantization": by_quantization,
                       "transformers": ref})
        for q, fovea in by_quantization.items():
            common.log(f"round {r}: fovea {q} {fovea.get('ms_per_tile')} / held {fovea.get('held_ms_per_tile')} ms "
                       f"per tile")
        common.log(f"round {r}: transformers {ref['ms_per_tile']:.3f} / held {ref.get('held_ms_per_tile', 0):.3f}")

    def best(side, key, q=None):
        values = [(x["fovea_by_quantization"][q] if q else x[side]).get(key) for x in rounds]
        values = [v for v in values if v]
        return min(values) if values else None

    summary = {}
    for key in ("ms_per_tile", "held_ms_per_tile"):
        f, t = best("fovea", key), best("transformers", key)
        summary[key] = {"fovea": f, "transformers": t, "ratio": f / t if f and t else None}
        for q in quantizations[1:]:
            fq = best("fovea", key, q)
            summary[key][f"fovea_{q}"] = fq
            summary[key][f"ratio_{q}"] = fq / t if fq and t else None
    gpu = torch.cuda.get_device_name() if args.device.startswith("cuda") else "none (cpu rehearsal)"
    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "gpu": gpu,
              "torch": torch.__version__, "transformers": transformers.__version__, "tiles": args.tiles,
              "reps": args.reps, "hold_s": args.hold, "rounds": rounds, "best": summary,
              "command": " ".join(sys.argv)}
    common.write_json(args.out, result)
    for key, v in summary.items():
        ratio = f"{v['ratio']:.3f}" if v["ratio"] else "n/a"
        extra = "".join(f"; {q}: fovea {v[f'fovea_{q}']} ratio {v[f'ratio_{q}']:.3f}" for q in quantizations[1:]
                        if v.get(f"ratio_{q}"))
        print(f"{key}: fovea {v['fovea']} transformers {v['transformers']} ratio {ratio}{extra}")


if __name__ == "__main__":
    main()
