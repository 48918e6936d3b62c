"""Runs carried test binaries (e.g. the CUDA op-consistency test and the golden forward tests built with the
CUDA backend) inside the benchmark's device call, each under a timeout, and records pass/fail with the end of
its output. Binaries that are missing are recorded as such, not run."""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def run_one(path, timeout):
    if not os.access(path, os.X_OK):
        return {"status": "missing", "seconds": 0.0, "tail": ""}
    t0 = time.time()
    try:
        proc = subprocess.run([path], capture_output=True, timeout=timeout)
        output = (proc.stdout + proc.stderr).decode("utf-8", errors="replace")
        status = "passed" if proc.returncode == 0 else f"failed({proc.returncode})"
    except subprocess.TimeoutExpired as e:
        output = ((e.stdout or b"") + (e.stderr or b"")).decode("utf-8", errors="replace")
        status = "timeout"
    return {"status": status, "seconds": time.time() - t0, "tail": output[-1500:]}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("binaries", nargs="*")
    args = p.parse_args()
    results = {}
    for path in args.binaries:
        results[os.path.basename(path)] = run_one(path, args.timeout)
        r = results[os.path.basename(path)]
        common.log(f"gpu test {path}: {r['status']} in {r['seconds']:.1f} s")
        common.write_json(args.out, results)
    common.write_json(args.out, results)
    sys.exit(0 if all(r["status"] == "passed" for r in results.values()) else 1)


if __name__ == "__main__":
    main()
