"""GEMM ceilings on random data: bf16 (torch.matmul -> cuBLAS) and FP8 e4m3 (torch._scaled_mm, bf16 out), at a
large square product and at the LLM prefill shapes of the model (M = 8192 tokens). The best bf16 figure is the
MFU denominator and gives the FLOP floor of the workload. Timed with CUDA events after warm-up.

A burst runs at the boost clock; a long run at the power cap does not (an H200 drops from 1980 to ~1500 MHz at
700 W). With --sustain-seconds S (CUDA), the gate_up shape is also held for S seconds in bf16 and S/2 in FP8: the
second half's mean is the sustained rate, and the report gives the floor at that rate beside the burst floor.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from gemm_sustained import steady, sustained_windows  # noqa: E402
from gpu_sampler import GpuSampler  # noqa: E402


def shapes(tiny):
    if tiny:
        return [("square", 256, 256, 256), ("qkv", 128, 128, 256)]
    h, kv, f = 4096, 1024, 14336  # InternLM2-7B
    return [("square 8192", 8192, 8192, 8192), ("qkv", 8192, h, h + 2 * kv), ("o", 8192, h, h),
            ("gate_up", 8192, h, 2 * f), ("down", 8192, f, h)]


def time_op(fn, device, warmup, iters):
    import time
    import torch
    for _ in range(warmup):
        fn()
    if device == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1000.0 / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


def bf16_gemm(m, k, n, device):
    import torch
    a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    b = torch.randn(k, n, device=device, dtype=torch.bfloat16)
    return lambda: torch.matmul(a, b)


def fp8_gemm(m, k, n, device):
    import torch
    a = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt FP8 wants
    one = torch.tensor(1.0, device=device)
    return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)


def measure(args):
    import torch
    result = {"device": args.device, "torch": torch.__version__, "bf16": {}, "fp8": {}, "errors": {}}
    if args.device == "cuda":
        result["gpu"] = torch.cuda.get_device_name()
    for kind, make in (("bf16", bf16_gemm), ("fp8", fp8_gemm)):
        for name, m, k, n in shapes(args.tiny):
            try:
                seconds = time_op(make(m, k, n, args.device), args.device, args.warmup, args.iters)
                result[kind][name] = {"m": m, "k": k, "n": n, "tflops": 2.0 * m * k * n / seconds / 1e12}
            except Exception as e:  # FP8 may be missing (CPU, old torch): record it, keep the bf16 numbers
                result["errors"][f"{kind} {name}"] = f"{type(e).__name__}: {e}"
            if args.device == "cuda":
                torch.cuda.empty_cache()
        figures = [v["tflops"] for v in result[kind].values()]
        result[f"{kind}_peak_tflops"] = max(figures) if figures else None
        prefill = [v["tflops"] for name, v in result[kind].items() if not name.startswith("square")]
        result[f"{kind}_prefill_tflops"] = [min(prefill), max(prefill)] if prefill else None
    if args.device == "cuda" and args.sustain_seconds > 0 and not args.tiny:
        _, m, k, n = next(s for s in shapes(False) if s[0] == "gate_up")
        for kind, make, seconds in (("bf16", bf16_gemm, args.sustain_seconds),
                                    ("fp8", fp8_gemm, args.sustain_seconds / 2)):
            try:
                sampler = GpuSampler()
                sampler.start()
                windows = sustained_windows(make(m, k, n, args.device), 2.0 * m * k * n, seconds)
                sampler.finish()
                result[f"{kind}_sustained"] = {"m": m, "k": k, "n": n, "seconds": seconds, "windows_tflops": windows,
                                               "clocks": sampler.summary()}
                result[f"{kind}_sustained_tflops"] = steady(windows)
            except Exception as e:
                result["errors"][f"{kind} sustained"] = f"{type(e).__name__}: {e}"
            torch.cuda.empty_cache()
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--sustain-seconds", type=float, default=10.0)
    args = p.parse_args()
    result = measure(args)
    common.write_json(args.out, result)
    for kind in ("bf16", "fp8"):
        row = ", ".join(f"{name} {v['tflops']:.0f}" for name, v in result[kind].items())
        common.log(f"gemm {kind} TFLOP/s: {row or 'n/a'}")
    for kind in ("bf16", "fp8"):
        if result.get(f"{kind}_sustained_tflops"):
            clocks = result[f"{kind}_sustained"]["clocks"]
            common.log(f"gemm {kind} sustained: {result[f'{kind}_sustained_tflops']:.0f} TFLOP/s at "
                       f"{clocks['sm_clock_mhz']} MHz, {clocks['power_w']} W")
    for what, err in result["errors"].items():
        common.log(f"gemm {what} failed: {err}")
    sys.exit(0 if result["bf16_peak_tflops"] else 1)


if __name__ == "__main__":
    main()
