"""Carrying the peer engines (vLLM, LMDeploy) to the GPU machine in several device calls.

A call carries at most 64 MiB with the working tree, and the peers' files are ~130 MB compressed, so each
package set (common, lmdeploy, vllm) is one .tar.xz "blob", and the blobs are cut into byte ranges that fill
the carries in order: .carry_peers/c1, c2, ... Every carry holds peers_manifest.json (all blobs: sha256, size,
the parts and which carry holds each) so that, on the GPU machine, each call's parts are copied into a stash in
/tmp (which survives between calls while the machine stays warm); a blob whose parts are all there is joined,
checked against its sha256 and unpacked into ROOT/<set>; an engine is ready once all its sets are unpacked.

  pack:   peers_stash.py pack --out .carry_peers --capacity BYTES --blob common=F --blob lmdeploy=F ...
              [--engine lmdeploy=common,lmdeploy --engine vllm=common,vllm]
  unpack: peers_stash.py unpack --stash .carry_peers/cN --root /tmp/peers   (prints JSON: ready engines, ...)
Pure Python and tar: no torch (tests/python/test_peers_stash.py runs it in CI).
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import tarfile

MANIFEST = "peers_manifest.json"


def sha256_of(paths):
    """sha256 over the concatenation of the files, read in 8 MiB pieces."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(8 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def plan_parts(blob_sizes, capacity):
    """Cuts the blobs, in order, into byte ranges that fill carries of `capacity` bytes one after another.
    blob_sizes: [(name, bytes)]. Returns [(blob, carry_index, start, length)], carry_index from 0."""
    if capacity <= 0:
        raise ValueError("carry capacity must be positive")
    parts, carry, free = [], 0, capacity
    for name, size in blob_sizes:
        if size <= 0:
            raise ValueError(f"blob {name} is empty")
        start = 0
        while start < size:
            if free == 0:
                carry, free = carry + 1, capacity
            length = min(free, size - start)
            parts.append((name, carry, start, length))
            start += length
            free -= length
    return parts


def pack(blobs, engines, capacity, out):
    """blobs: [(name, path)] in carry order; engines: {engine: [blob names]}. Writes out/c1.. and returns the
    manifest."""
    sizes = [(name, os.path.getsize(path)) for name, path in blobs]
    plan = plan_parts(sizes, capacity)
    carries = max(c for _, c, _, _ in plan) + 1
    for index in range(carries):
        folder = os.path.join(out, f"c{index + 1}")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
    paths = dict(blobs)
    manifest = {"carries": carries, "capacity": capacity, "engines": engines, "blobs": []}
    for name, size in sizes:
        entry = {"name": name, "bytes": size, "sha256": sha256_of([paths[name]]), "parts": []}
        with open(paths[name], "rb") as src:
            for number, (_, carry, start, length) in enumerate(p for p in plan if p[0] == name):
                part = f"{name}.part{number:02d}"
                src.seek(start)
                with open(os.path.join(out, f"c{carry + 1}", part), "wb") as dst:
                    remaining = length
                    while remaining:
                        block = src.read(min(remaining, 8 << 20))
                        dst.write(block)
                        remaining -= len(block)
                entry["parts"].append({"file": part, "carry": f"c{carry + 1}", "bytes": length})
        manifest["blobs"].append(entry)
    for index in range(carries):
        with open(os.path.join(out, f"c{index + 1}", MANIFEST), "w") as f:
            json.dump(dict(manifest, this_carry=f"c{index + 1}"), f, indent=1)
    return manifest


def _safe_members(archive, dest):
    """The archive's members, refusing any that would land outside dest (an absolute path, '..', a link out)."""
    root = os.path.realpath(dest)
    for member in archive.getmembers():
        target = os.path.realpath(os.path.join(dest, member.name))
        if target != root and not target.startswith(root + os.sep):
            raise ValueError(f"archive member {member.name!r} escapes {dest}")
        if member.issym() or member.islnk():
            link = os.path.realpath(os.path.join(os.path.dirname(target), member.linkname))
            if not link.startswith(root + os.sep):
                raise ValueError(f"archive link {member.name!r} points outside {dest}")
        yield member


def unpack(stash_dir, root):
    """Copies this carry's parts into ROOT/stash, then joins, checks and unpacks every blob that is complete and
    not unpacked yet. Returns {"ready": [...], "unpacked_now": [...], "missing": {blob: [parts]}, "errors": {...}}."""
    manifest_path = os.path.join(stash_dir, MANIFEST)
    with open(manifest_path) as f:
        manifest = json.load(f)
    stash = os.path.join(root, "stash")
    os.makedirs(stash, exist_ok=True)
    for name in os.listdir(stash_dir):
        if ".part" in name:
            shutil.copyfile(os.path.join(stash_dir, name), os.path.join(stash, name))
    shutil.copyfile(manifest_path, os.path.join(stash, MANIFEST))
    result = {"unpacked_now": [], "missing": {}, "errors": {}, "carry": manifest.get("this_carry"),
              "carries": manifest.get("carries")}
    for blob in manifest["blobs"]:
        dest = os.path.join(root, blob["name"])
        marker = os.path.join(dest, ".peers_sha256")
        if os.path.exists(marker) and open(marker).read().strip() == blob["sha256"]:
            continue
        parts = [os.path.join(stash, p["file"]) for p in blob["parts"]]
        absent = [p["file"] + f" (in {p['carry']})" for p, path in zip(blob["parts"], parts)
                  if not os.path.exists(path) or os.path.getsize(path) != p["bytes"]]
        if absent:
            result["missing"][blob["name"]] = absent
            continue
        digest = sha256_of(parts)
        if digest != blob["sha256"]:
            result["errors"][blob["name"]] = f"sha256 {digest} != manifest {blob['sha256']}"
            continue
        joined = os.path.join(stash, blob["name"] + ".tar.xz")
        with open(joined, "wb") as out:
            for path in parts:
                with open(path, "rb") as src:
                    shutil.copyfileobj(src, out, 8 << 20)
        tmp = dest + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        try:
            with tarfile.open(joined, "r:*") as archive:
                members = list(_safe_members(archive, tmp))
                if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: the standard library's own guard too
                    archive.extractall(tmp, members=members, filter="data")
                else:
                    archive.extractall(tmp, members=members)
        except (tarfile.TarError, ValueError, OSError) as e:
            result["errors"][blob["name"]] = f"unpacking failed: {e}"
            shutil.rmtree(tmp, ignore_errors=True)
            continue
        finally:
            os.remove(joined)
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)
        with open(marker, "w") as f:
            f.write(blob["sha256"] + "\n")
        for path in parts:  # the disk holds the checkpoint too: keep one copy of the peers, not two
            os.remove(path)
        result["unpacked_now"].append(blob["name"])
    done = {b["name"] for b in manifest["blobs"]
            if os.path.exists(os.path.join(root, b["name"], ".peers_sha256"))}
    result["ready"] = sorted(e for e, sets in manifest["engines"].items() if all(s in done for s in sets))
    result["paths"] = {e: [os.path.join(root, s) for s in sets] for e, sets in manifest["engines"].items()}
    return result


def parse_pairs(values, split_list=False):
    out = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key or not rest:
            raise SystemExit(f"peers_stash: expected NAME=VALUE, got {value!r}")
        out[key] = rest.split(",") if split_list else rest
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    pk = sub.add_parser("pack")
    pk.add_argument("--out", required=True)
    pk.add_argument("--capacity", type=int, required=True, help="bytes of parts per carry")
    pk.add_argument("--blob", action="append", default=[], help="NAME=FILE, in carry order")
    pk.add_argument("--engine", action="append", default=[], help="ENGINE=SET,SET (default: lmdeploy, vllm)")
    up = sub.add_parser("unpack")
    up.add_argument("--stash", required=True)
    up.add_argument("--root", required=True)
    args = p.parse_args(argv)
    if args.command == "pack":
        blobs = list(parse_pairs(args.blob).items())
        if not blobs:
            raise SystemExit("peers_stash: no --blob")
        engines = parse_pairs(args.engine, split_list=True) or {
            "lmdeploy": ["common", "lmdeploy"], "vllm": ["common", "vllm"]}
        manifest = pack(blobs, engines, args.capacity, args.out)
        json.dump(manifest, sys.stdout, indent=1)
    else:
        json.dump(unpack(args.stash, args.root), sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
