"""Sustained GEMM rate: one GEMM repeated back to back for several seconds, the rate printed per window.
gemm_peak.py's burst (a few calls after warm-up) runs at the boost clock; an engine runs its GEMMs for minutes,
and an H200 at its 700 W power cap lowers its SM clock (1980 -> ~1500 MHz): the steady windows give the rate a
long run can hold. gemm_peak.py calls sustained_windows() for its sustained floor; run alone, this measures one
bf16 shape (torch.matmul -> cuBLAS) and samples the clocks beside it.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_sampler import GpuSampler  # noqa: E402


def sustained_windows(fn, flop, seconds, window=1.0, echo=False):
    """TFLOP/s of fn in consecutive windows of `window` seconds for `seconds` in all (CUDA only)."""
    import torch
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    windows, start = [], time.perf_counter()
    while time.perf_counter() - start < seconds:
        t0, calls = time.perf_counter(), 0
        while time.perf_counter() - t0 < window:
            for _ in range(8):
                fn()
            torch.cuda.synchronize()
            calls += 8
        windows.append(flop * calls / (time.perf_counter() - t0) / 1e12)
        if echo:
            print(f"t={time.perf_counter() - start:5.1f}s  {windows[-1]:6.1f} TFLOP/s", flush=True)
    return windows


def steady(windows):
    """The rate a long run holds: the mean of the second half of the windows."""
    tail = windows[len(windows) // 2:] or windows
    return sum(tail) / len(tail) if tail else None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--m", type=int, default=8192)
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--n", type=int, default=28672)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--window", type=float, default=1.0)
    p.add_argument("--out")
    args = p.parse_args()
    import torch
    a = torch.randn(args.m, args.k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(args.k, args.n, device="cuda", dtype=torch.bfloat16)
    sampler = GpuSampler()
    sampler.start()
    windows = sustained_windows(lambda: torch.matmul(a, b), 2.0 * args.m * args.k * args.n, args.seconds,
                                args.window, echo=True)
    sampler.finish()
    result = {"m": args.m, "k": args.k, "n": args.n, "windows_tflops": windows, "first": windows[0],
              "steady": steady(windows), "clocks": sampler.summary()}
    print(f"steady {result['steady']:.1f} TFLOP/s; clocks {result['clocks']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
