#!/usr/bin/env python3
"""Writes e4m3_golden.txt: float32 inputs and the FP8 E4M3 (float8_e4m3fn) code torch gives for each after
clamping to +-448 (saturating conversion, as FP8 quantization kernels do), for tests/core's encoder check.
One line per value: the input's float32 bits in hex, then the code in hex. Regenerate with:
  python3 tests/data/fp8/make_e4m3_golden.py > tests/data/fp8/e4m3_golden.txt
"""
import struct

import torch

gen = torch.Generator().manual_seed(7)
values = [0.0, -0.0, 448.0, -448.0, 447.9, 464.0, 500.0, 1e9, -1e9, 2.0 ** -6, 2.0 ** -9, 2.0 ** -10,
          1.5 * 2.0 ** -10, 3 * 2.0 ** -10, 232.0, 248.0, 1.0625, 1.0, 0.1, -3.3, 1e-30, -1e-30]
# Ties between neighbouring codes of every binade (round half to even), and their neighbours.
codes = torch.arange(0, 126, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
for lo, hi in zip(codes[:-1].tolist(), codes[1:].tolist()):
    mid = (lo + hi) / 2
    values += [mid, float(torch.tensor(mid).nextafter(torch.tensor(0.0))), float(torch.tensor(mid).nextafter(torch.tensor(1e9))), -mid]
for scale in (1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0, 400.0):
    values += (torch.randn(200, generator=gen) * scale).tolist()
x = torch.tensor(values, dtype=torch.float32)
q = x.clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(torch.uint8)
for v, c in zip(x.tolist(), q.tolist()):
    print(f"{struct.unpack('<I', struct.pack('<f', v))[0]:08x} {c:02x}")
