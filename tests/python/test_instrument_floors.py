"""The device instrument's arithmetic, on made-up measurements (no GPU): report.py derives the burst and the
sustained FLOP floors from gemm_peak.py's figures and each engine's ratio to both; gemm_sustained.steady() is the
mean of the second half of the windows; gpu_sampler summarises only the busy samples and counts the ones at the
power cap (clock-limit reason bit 0x4)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "gpu"))
import gemm_sustained  # noqa: E402
import gpu_sampler  # noqa: E402
import report  # noqa: E402

# common.model_dims of an InternVL2-8B-shaped config.
DIMS = {"vit_params": 24 * (4 * 1024 ** 2 + 2 * 1024 * 4096) + 3 * 14 * 14 * 1024, "vit_layers": 24,
        "vit_hidden": 1024, "vit_tokens": 1025, "proj_params": 4096 * 4096 * 2, "llm_params": 6.98e9,
        "llm_layers": 32, "llm_hidden": 4096, "attn_width": 4096, "vocab": 92553}


def data(sustained=None):
    gemm = {"bf16_peak_tflops": 800.0, "fp8_peak_tflops": 1400.0}
    if sustained:
        gemm.update({"bf16_sustained_tflops": sustained, "fp8_sustained_tflops": 1200.0,
                     "bf16_sustained": {"seconds": 10, "clocks": {"sm_clock_mhz": 1455, "power_w": 692}},
                     "fp8_sustained": {"seconds": 5, "clocks": {"sm_clock_mhz": 1380, "power_w": 693}}})
    workload = {"requests": [{"id": "a", "official_tiles": 13}, {"id": "b", "official_tiles": 7}]}
    fovea = {"official": {"qpm_steady": 600.0, "done_ids": ["a", "b"], "done": 2, "tasks": 2,
                          "gpu_clocks": {"samples": 9, "sm_clock_mhz": 1560, "power_w": 691,
                                         "power_capped_share": 1.0}}}
    return {"workload": workload, "model": {"dims": DIMS}, "prompt": {"text_tokens": 81}, "gemm": gemm,
            "ref": {}, "compare": {}, "fovea": fovea, "env": {}, "steps": {}}


def test_sustained_floor_scales_with_the_held_rate():
    d = data(sustained=660.0)
    derived = report.derive(d)
    per_request = derived["mean_tflop_per_request"]
    assert per_request > 0
    assert derived["floor_qpm_bf16"] == pytest.approx(60 * 800 / per_request)
    assert derived["floor_qpm_bf16_sustained"] == pytest.approx(60 * 660 / per_request)
    assert derived["floor_qpm_fp8_sustained"] == pytest.approx(60 * 1200 / per_request)
    row = next(r for r in derived["rows"] if r["engine"] == "Fovea official")
    assert row["x_floor_bf16"] == pytest.approx(600 / derived["floor_qpm_bf16"])
    assert row["x_floor_bf16_sustained"] == pytest.approx(600 / derived["floor_qpm_bf16_sustained"])
    d["derived"] = derived
    table = report.render(d)
    assert "FLOP floor bf16 sustained (660 TFLOP/s held 10 s, SM 1455 MHz, 692 W)" in table
    assert "| Fovea official x the sustained bf16 floor | " in table
    assert "1560 MHz / 691 W, 100% of 9 samples" in table


def test_without_a_sustained_measurement_there_is_no_sustained_row():
    d = data()
    d["derived"] = report.derive(d)
    assert d["derived"]["floor_qpm_bf16_sustained"] is None
    assert "sustained" not in report.render(d)


def test_steady_rate_is_the_second_half_mean():
    assert gemm_sustained.steady([800.0, 700.0, 660.0, 664.0]) == pytest.approx(662.0)
    assert gemm_sustained.steady([700.0]) == pytest.approx(700.0)
    assert gemm_sustained.steady([]) is None


def test_sampler_summary_counts_busy_samples_and_the_power_cap():
    s = gpu_sampler.GpuSampler()
    s.samples = [(1.0, 100, 1980.0, 80.0, "0x0000000000000000"),   # idle: left out
                 (2.0, 900, 1500.0, 690.0, "0x0000000000000004"),  # at the power cap
                 (3.0, 900, 1600.0, 650.0, "0x0000000000000000"),
                 (4.0, 950, 1400.0, 700.0, "0x0000000000000004")]
    summary = s.summary()
    assert summary["samples"] == 3
    assert summary["sm_clock_mhz"] == pytest.approx(1500.0)
    assert summary["power_w"] == pytest.approx(690.0)
    assert summary["power_capped_share"] == pytest.approx(2 / 3)
    assert s.peak_mib == 950
    assert s.summary(since=3.5)["samples"] == 1
    assert gpu_sampler.GpuSampler().summary()["sm_clock_mhz"] is None
