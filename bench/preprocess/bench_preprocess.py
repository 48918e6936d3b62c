#!/usr/bin/env python3
"""Preprocessing benchmark: Fovea vs Pillow (the reference) vs OpenCV (the INTER_AREA/INTER_CUBIC variant).

    bench_preprocess.py PHOTO_DIR [--build BUILD_DIR] [--images 40] [--threads 1,2,4] [--out FILE.json]

Builds the listing-photo workload of shared/guide/PERF.md from PHOTO_DIR (each photo centre-cropped to the
target aspect, resized, saved as JPEG quality 88, over the resolution mix), then measures per image, JPEG
decode included, on one core: CPU ms of the Pillow reference (InternVL's dynamic_preprocess + ToTensor/
Normalize in float32), of the OpenCV variant, and of Fovea (fovea_preprocess_bench, C++); the pixel difference
of each to Pillow's tiles; and Fovea's throughput with 1..N worker threads. CPU time is reported next to wall
time because shared machines make wall time noisy.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "image"))
import pillow_reference as ref  # noqa: E402

# PERF.md's listing-photo mix: (width, height, share).
MIX = [(480, 360, 25), (640, 480, 15), (800, 600, 20), (1024, 768, 10), (750, 1000, 10), (1080, 1440, 10),
       (1920, 1080, 5), (612, 464, 5)]


def workload_sizes(count):
    """`count` sizes in the mix's proportions (largest remainder), interleaved."""
    quotas = [count * share / 100 for _, _, share in MIX]
    counts = [int(q) for q in quotas]
    for i in sorted(range(len(MIX)), key=lambda i: quotas[i] - counts[i], reverse=True)[:count - sum(counts)]:
        counts[i] += 1
    sizes = []
    while any(counts):
        for i, (w, h, _) in enumerate(MIX):
            if counts[i]:
                sizes.append((w, h))
                counts[i] -= 1
    return sizes


def build_workload(photo_dir, count, out_dir):
    photos = sorted(os.path.join(photo_dir, f) for f in os.listdir(photo_dir)
                    if f.lower().endswith((".jpg", ".jpeg", ".png", ".webp")))
    if not photos:
        sys.exit(f"no photos in {photo_dir}")
    paths = []
    for i, (w, h) in enumerate(workload_sizes(count)):
        with Image.open(photos[i % len(photos)]) as im:
            im = im.convert("RGB")
            # Centre crop to the target aspect, then resize: a listing photo of that resolution.
            scale = min(im.width / w, im.height / h)
            cw, ch = int(w * scale), int(h * scale)
            left, top = (im.width - cw) // 2, (im.height - ch) // 2
            im = im.crop((left, top, left + cw, top + ch)).resize((w, h), Image.LANCZOS)
            path = os.path.join(out_dir, f"listing_{i:03d}_{w}x{h}.jpg")
            im.save(path, quality=88)
            paths.append(path)
    return paths


def pillow_reference(path):
    """The reference pipeline as InternVL runs it (Pillow one-step resize of the installed version)."""
    image = Image.open(path).convert("RGB")
    cols, rows = ref.official_grid(image.width, image.height)
    resized = image.resize((448 * cols, 448 * rows), Image.BICUBIC)
    tiles = [resized.crop(((i % cols) * 448, (i // cols) * 448, (i % cols + 1) * 448, (i // cols + 1) * 448))
             for i in range(cols * rows)]
    if len(tiles) > 1:
        tiles.append(image.resize((448, 448), Image.BICUBIC))
    tiles_u8 = np.stack([np.asarray(t) for t in tiles])
    return tiles_u8, ref.normalize(tiles_u8)


def opencv_variant(path, cv2):
    """The write-up's OpenCV pipeline: INTER_AREA when shrinking, INTER_CUBIC when enlarging."""
    image = cv2.cvtColor(cv2.imread(path, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    h, w = image.shape[:2]
    cols, rows = ref.official_grid(w, h)

    def resize(img, size):
        interp = cv2.INTER_AREA if size[0] <= img.shape[1] and size[1] <= img.shape[0] else cv2.INTER_CUBIC
        return cv2.resize(img, size, interpolation=interp)

    resized = resize(image, (448 * cols, 448 * rows))
    tiles = [resized[r * 448:(r + 1) * 448, c * 448:(c + 1) * 448] for r in range(rows) for c in range(cols)]
    if len(tiles) > 1:
        tiles.append(resize(image, (448, 448)))
    tiles_u8 = np.stack(tiles)
    return tiles_u8, ref.normalize(tiles_u8)


def time_python(fn, paths, repeat):
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(repeat):
        for p in paths:
            fn(p)
    n = repeat * len(paths)
    return 1000 * (time.process_time() - cpu0) / n, 1000 * (time.perf_counter() - wall0) / n


def run_fovea_bench(build, workdir, threads, repeat):
    out = subprocess.run([os.path.join(build, "fovea_preprocess_bench"), workdir, "--threads", str(threads),
                          "--repeat", str(repeat)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def fovea_vs_pillow(build, paths):
    """Per image: is Fovea's tiles_u8 identical to Pillow's (≤ 12 pass order, and the installed version)?"""
    out = subprocess.run([os.path.join(build, "fovea_image_tool"), "tiles", *paths], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    same_reference = same_installed = 0
    for path, line in zip(paths, out):
        crc = int(line.split()[3])
        image = ref.open_rgb(path)
        tiles_ref, _ = ref.reference_tiles(image)
        same_reference += zlib.crc32(np.ascontiguousarray(tiles_ref)) == crc
        tiles_installed, _ = pillow_reference(path)
        same_installed += zlib.crc32(np.ascontiguousarray(tiles_installed)) == crc
    return same_reference, same_installed


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("photo_dir")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"), help="folder with fovea_preprocess_bench")
    parser.add_argument("--images", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--threads", default="", help="comma list for Fovea's scaling (default 1..nproc)")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")] if args.threads else sorted(
        {1, 2, 4, 8, 16, os.cpu_count() or 1} & set(range(1, (os.cpu_count() or 1) + 1)))

    with tempfile.TemporaryDirectory() as workdir:
        paths = build_workload(args.photo_dir, args.images, workdir)
        results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.processor() or
                   platform.machine(), "cpus": os.cpu_count(), "images": len(paths),
                   "pillow_version": Image.__version__, "command": " ".join(sys.argv)}
        # Pillow reference, one core.
        pil_cpu, pil_wall = time_python(pillow_reference, paths, args.repeat)
        results["pillow"] = {"cpu_ms_per_image": pil_cpu, "wall_ms_per_image": pil_wall, "max_abs_diff": 0}
        # OpenCV variant, one core.
        try:
            import cv2
            cv2.setNumThreads(1)
            cv_cpu, cv_wall = time_python(lambda p: opencv_variant(p, cv2), paths, args.repeat)
            diffs = [np.abs(opencv_variant(p, cv2)[0].astype(int) - pillow_reference(p)[0]) for p in paths]
            results["opencv"] = {"cpu_ms_per_image": cv_cpu, "wall_ms_per_image": cv_wall,
                                 "max_abs_diff": int(max(d.max() for d in diffs)),
                                 "mean_abs_diff": float(np.mean([d.mean() for d in diffs]))}
        except ImportError:
            results["opencv"] = None
        # Fovea, one core, then scaling over worker threads.
        one = run_fovea_bench(args.build, workdir, 1, args.repeat)
        same_ref, same_installed = fovea_vs_pillow(args.build, paths)
        results["fovea"] = {"cpu_ms_per_image": one["cpu_ms_per_image"], "wall_ms_per_image": one["ms_per_image"],
                            "avx2": one["avx2"], "identical_to_pillow_le12": f"{same_ref}/{len(paths)}",
                            "identical_to_installed_pillow": f"{same_installed}/{len(paths)}"}
        results["fovea_scaling"] = []
        for t in threads:
            r = run_fovea_bench(args.build, workdir, t, max(args.repeat, t))
            results["fovea_scaling"].append({"threads": t, "images_per_s": 1000 / r["ms_per_image"],
                                             "cpu_ms_per_image": r["cpu_ms_per_image"]})

    print(f"{len(paths)} listing photos, JPEG q88, decode included, Pillow {Image.__version__}, {os.cpu_count()} CPUs")
    print(f"{'pipeline':<10} {'CPU ms/img':>11} {'wall ms/img':>12} {'vs Pillow':>10}  pixels vs Pillow")
    for name in ("pillow", "opencv", "fovea"):
        r = results.get(name)
        if not r:
            continue
        speed = results["pillow"]["cpu_ms_per_image"] / r["cpu_ms_per_image"]
        if name == "fovea":
            pixels = f"identical {r['identical_to_pillow_le12']} (Pillow<=12 order), " \
                     f"{r['identical_to_installed_pillow']} (installed)"
        elif name == "opencv":
            pixels = f"max |d| {r['max_abs_diff']}, mean {r['mean_abs_diff']:.2f}"
        else:
            pixels = "reference"
        print(f"{name:<10} {r['cpu_ms_per_image']:>11.1f} {r['wall_ms_per_image']:>12.1f} {speed:>9.1f}x  {pixels}")
    print("fovea scaling: " + ", ".join(f"{s['threads']} thr {s['images_per_s']:.0f} img/s"
                                        for s in results["fovea_scaling"]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
