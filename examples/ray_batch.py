#!/usr/bin/env python3
"""Answers one question about every image of a folder with Fovea on Ray Data, writing JSON lines.

    pip install ".[ray]"
    python3 examples/ray_batch.py --model MODEL_DIR --images PHOTOS_DIR --prompt "Is there a bed?" --out answers/

Each output row has the image's "path", the "answer", "answer_logprobs" (with --answers yes,no) and "error"
(None, or why that image failed). On a cluster, start Ray first and pass --address auto; --gpus-per-actor 1
gives each actor (one engine) its own GPU.
"""
import argparse

import ray

import fovea.ray


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--images", required=True, help="a folder of images (or anything read_binary_files takes)")
    p.add_argument("--prompt", required=True)
    p.add_argument("--out", required=True, help="output folder of JSON lines files")
    p.add_argument("--answers", default="", help="comma-separated answers whose log-probs to report")
    p.add_argument("--backend", default="auto")
    p.add_argument("--max-tiles", type=int, default=None, help="tiles per image (default: the model's)")
    p.add_argument("--actors", type=int, default=1, help="engines (one per GPU)")
    p.add_argument("--gpus-per-actor", type=float, default=0)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--address", default=None, help="a running Ray cluster ('auto'); default: a local one")
    args = p.parse_args()

    ray.init(address=args.address)
    ds = ray.data.read_binary_files(args.images, include_paths=True)
    ds = ds.map_batches(fovea.ray.Predictor,
                        fn_constructor_kwargs={"model": args.model, "backend": args.backend, "prompt": args.prompt,
                                               "answers": [a for a in args.answers.split(",") if a],
                                               "max_tiles": args.max_tiles},
                        concurrency=args.actors, num_gpus=args.gpus_per_actor, batch_size=args.batch_size)
    ds.write_json(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
