"""Weights from the config alone (--load-format dummy) through the front ends, on a copy of the demo model without
its safetensors: fovea bench and fovea.Engine run it; fovea inspect --plan prints the memory plan and the refusal."""
import os
import shutil
import subprocess

import pytest

Image = pytest.importorskip("PIL.Image")
FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")


@pytest.fixture
def config_only(demo_model, tmp_path):
    folder = tmp_path / "config_only"
    shutil.copytree(demo_model, folder, ignore=shutil.ignore_patterns("*.safetensors"))
    assert not list(folder.glob("*.safetensors"))
    return folder


def test_bench_with_dummy_weights(config_only, tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    for i in range(2):
        Image.new("RGB", (64, 48), (90 * i, 20, 20)).save(images / f"i{i}.png")
    r = subprocess.run([FOVEA_BIN, "bench", "--model", str(config_only), "--images", str(images), "--backend", "cpu",
                        "--kv-blocks", "256", "--max-tiles", "1", "--gemm-seconds", "0.1", "--warmup", "0",
                        "--max-tokens", "2", "--load-format", "dummy"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "QPM" in r.stdout
    r = subprocess.run([FOVEA_BIN, "bench", "--model", str(config_only), "--images", str(images), "--backend", "cpu",
                        "--load-format", "zeros"], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode != 0 and "--load-format must be one of auto|dummy, got 'zeros'" in r.stderr


def test_python_engine_with_dummy_weights(config_only):
    fovea = pytest.importorskip("fovea", reason="the fovea Python module is not built (needs nanobind)")
    image = Image.new("RGB", (64, 48), (10, 200, 30))
    with fovea.Engine(str(config_only), backend="cpu", max_tiles=1, kv_blocks=128, load_format="dummy") as engine:
        first = engine.generate([fovea.Request(image=image, prompt="What is this?", max_tokens=3)])[0]
    assert first.error is None and len(first.tokens) == 3
    with fovea.Engine(str(config_only), backend="cpu", max_tiles=1, kv_blocks=128, load_format="dummy") as engine:
        again = engine.generate([fovea.Request(image=image, prompt="What is this?", max_tokens=3)])[0]
    assert again.tokens == first.tokens  # the same weights every time


def test_inspect_plan(config_only):
    r = subprocess.run([FOVEA_BIN, "inspect", "--model", str(config_only), "--plan", "--quantization", "fp8",
                        "--gpu-memory", "64MiB"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    for label in ("bf16", "fp8", "4-bit"):
        assert any(line.split()[:1] == [label] for line in lines), r.stdout
    assert "64.00 MiB" not in r.stdout and "0.06 GiB available" in r.stdout
    assert "does not fit: it needs" in r.stdout and "What would fit" in r.stdout
    r = subprocess.run([FOVEA_BIN, "inspect", "--model", str(config_only), "--plan", "--gpu-memory", "12 parsecs"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "bad size" in r.stderr
