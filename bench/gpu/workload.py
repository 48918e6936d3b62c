"""Builds the listing-photo workload of PERF.md from a folder of photos: N requests, each a JPEG (quality ~88)
cropped to the aspect of, then resized to, one resolution of the classifieds mix. Deterministic for a seed.

Each request gets its own random crop window, so no two requests share image bytes: an engine's prefix or
vision cache must not be able to skip work the reference does.

Writes OUT/images/rNNNN.jpg, OUT/tasks.jsonl (the `fovea run` input) and OUT/workload.json (the manifest).
"""
import argparse
import hashlib
import io
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

PHOTO_EXTS = (".jpg", ".jpeg", ".png", ".webp", ".bmp")


def resolution_plan(n, rng):
    """Exactly n resolutions in the mix's proportions (largest remainder), in a seeded random order."""
    quotas = [(w, h, n * share) for w, h, share in common.RESOLUTION_MIX]
    counts = [int(q) for _, _, q in quotas]
    by_remainder = sorted(range(len(quotas)), key=lambda i: quotas[i][2] - counts[i], reverse=True)
    for i in by_remainder[: n - sum(counts)]:
        counts[i] += 1
    plan = [(w, h) for (w, h, _), c in zip(quotas, counts) for _ in range(c)]
    rng.shuffle(plan)
    return plan


def crop_box(src_w, src_h, dst_w, dst_h, rng):
    """A window of the destination's aspect, 80-100% of the largest such window, at a random place."""
    aspect = dst_w / dst_h
    max_w = min(src_w, src_h * aspect)
    scale = rng.uniform(0.8, 1.0)
    w = max(1, int(round(max_w * scale)))
    h = max(1, min(src_h, int(round(w / aspect))))
    x = rng.randint(0, src_w - w)
    y = rng.randint(0, src_h - h)
    return (x, y, x + w, y + h)


def load_photos(folder):
    from PIL import Image
    names = sorted(n for n in os.listdir(folder) if n.lower().endswith(PHOTO_EXTS))
    photos = []
    for name in names:
        try:
            with Image.open(os.path.join(folder, name)) as im:
                photos.append((name, im.convert("RGB")))
        except OSError as e:  # an unreadable photo is left out, not fatal
            common.log("skipping photo", name, e)
    if not photos:
        common.die(f"no readable photos in {folder}")
    return photos


def build(args):
    from PIL import Image
    rng = random.Random(args.seed)
    photos = load_photos(args.photos)
    image_dir = os.path.join(args.out, "images")
    os.makedirs(image_dir, exist_ok=True)
    requests, digests = [], set()
    t0 = time.time()
    for index, (w, h) in enumerate(resolution_plan(args.requests, rng)):
        name, photo = photos[rng.randrange(len(photos))]
        box = crop_box(photo.width, photo.height, w, h, rng)
        image = photo.crop(box).resize((w, h), Image.BICUBIC)
        buf = io.BytesIO()
        image.save(buf, format="JPEG", quality=args.quality)
        data = buf.getvalue()
        rid = f"r{index:04d}"
        path = os.path.abspath(os.path.join(image_dir, rid + ".jpg"))
        with open(path, "wb") as f:
            f.write(data)
        digests.add(hashlib.sha256(data).hexdigest())
        cols, rows = common.official_grid(w, h)
        requests.append({"id": rid, "image": path, "width": w, "height": h, "photo": name, "crop": box,
                         "bytes": len(data), "grid": [cols, rows],
                         "official_tiles": common.official_tile_count(w, h)})
    with open(os.path.join(args.out, "tasks.jsonl"), "w", encoding="utf-8") as f:
        for r in requests:
            f.write(common.json.dumps({"id": r["id"], "image": r["image"], "prompt": common.QUESTION,
                                       "max_tokens": 1}, ensure_ascii=False) + "\n")
    tiles = [r["official_tiles"] for r in requests]
    manifest = {"photos_dir": os.path.abspath(args.photos), "photos": len(photos), "seed": args.seed,
                "quality": args.quality, "requests": requests, "unique_images": len(digests),
                "mean_official_tiles": sum(tiles) / len(tiles), "build_s": time.time() - t0}
    common.write_json(os.path.join(args.out, "workload.json"), manifest)
    common.log(f"workload: {len(requests)} requests from {len(photos)} photos, {len(digests)} unique images, "
               f"mean {manifest['mean_official_tiles']:.2f} official tiles, {manifest['build_s']:.1f} s")
    return manifest


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--photos", required=True, help="folder of source photos")
    p.add_argument("--out", required=True, help="work folder")
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quality", type=int, default=88)
    args = p.parse_args()
    if args.requests < 1:
        common.die("--requests must be at least 1")
    build(args)


if __name__ == "__main__":
    main()
