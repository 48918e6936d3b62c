"""fovea bench on CPU with the demo model: both workloads run, the JSON holds the figures, the SVG is a plot."""
import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

Image = pytest.importorskip("PIL.Image")
FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")
SHARED_PHOTOS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "photos"


def bench(args, cwd):
    return subprocess.run([FOVEA_BIN, "bench", *args], capture_output=True, text=True, timeout=600, cwd=cwd)


def check_report(json_path, svg_path, requests):
    report = json.loads(Path(json_path).read_text())
    assert report["requests"] == requests and report["failed"] == 0
    assert report["qpm"] > 0 and report["output_tokens_per_s"] > 0 and report["prompt_tokens_per_s"] > 0
    assert report["gemm_peak"]["tflops"] > 0 and report["gemm_peak"]["backend"] == "cpu"
    assert 0 < report["mfu"]
    assert set(report["stages"]) == {"preprocess", "vit", "llm"}
    assert report["stages"]["llm"]["total_ms"] > 0
    assert report["timeline"][-1][1] == requests
    # Every EngineStats field over the run (engine/stats_fields.h): the measured requests alone, warm-up excluded.
    try:
        from fovea import _fovea  # the table's names, where the Python module is built
        assert list(report["engine_stats"]) == [name for name, _, _ in _fovea.stats_fields()] + ["engines"]
    except ImportError:
        pass
    assert report["engine_stats"]["requests_finished"] == requests
    assert report["engine_stats"]["llm_ms"] == report["stages"]["llm"]["total_ms"]
    root = ET.parse(svg_path).getroot()  # well-formed XML
    assert root.tag.endswith("svg")
    assert root.find("{http://www.w3.org/2000/svg}polyline") is not None
    return report


def test_bench_listing_photo_mix(demo_model, tmp_path):
    photos = tmp_path / "photos"
    photos.mkdir()
    for i, (w, h) in enumerate([(320, 240), (200, 300)]):
        Image.new("RGB", (w, h), (60 * i, 120, 200)).save(photos / f"p{i}.jpg", quality=95)
    r = bench(["--model", str(demo_model), "--photos", str(photos), "--count", "5", "--backend", "cpu", "--kv-blocks", "1024",
               "--max-tiles", "2", "--gemm-seconds", "0.2", "--warmup", "1", "--save-workload", "wl"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "QPM" in r.stdout and "MFU" in r.stdout
    report = check_report(tmp_path / "bench.json", tmp_path / "bench.svg", 5)
    assert report["workload"] == "listing-photos"
    sizes = {Image.open(p).size for p in (tmp_path / "wl").glob("*.jpg")}
    mix = {(480, 360), (640, 480), (800, 600), (1024, 768), (750, 1000), (1080, 1440), (1920, 1080), (612, 464)}
    assert sizes and sizes <= mix


def test_bench_image_directory_and_usage(demo_model, tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    for i in range(3):
        Image.new("RGB", (64, 48), (80 * i, 10, 10)).save(images / f"i{i}.png")
    r = bench(["--model", str(demo_model), "--images", str(images), "--backend", "cpu", "--kv-blocks", "1024", "--max-tiles", "1",
               "--gemm-seconds", "0.1", "--warmup", "0", "--max-tokens", "3", "--json", "out.json", "--svg", "out.svg"],
              tmp_path)
    assert r.returncode == 0, r.stderr
    report = check_report(tmp_path / "out.json", tmp_path / "out.svg", 3)
    assert report["workload"] == "directory"
    assert bench(["--model", str(demo_model)], tmp_path).returncode == 2
    assert bench(["--model", str(demo_model), "--images", str(images), "--gemm", "1,2"], tmp_path).returncode == 2


@pytest.mark.skipif(not SHARED_PHOTOS.is_dir(), reason="../shared/data/photos is absent")
def test_bench_on_real_photos(demo_model, tmp_path):
    r = bench(["--model", str(demo_model), "--photos", str(SHARED_PHOTOS), "--count", "3", "--backend", "cpu", "--kv-blocks", "1024",
               "--max-tiles", "1", "--gemm-seconds", "0.1", "--warmup", "0"], tmp_path)
    assert r.returncode == 0, r.stderr
    check_report(tmp_path / "bench.json", tmp_path / "bench.svg", 3)


def test_bench_vit_alone(demo_model, tmp_path):
    """--vit-alone N: the ViT + projector alone on N tiles cut from the images in order (each 900x448 image is 2
    tiles + a thumbnail), burst and held figures in the JSON; too few tiles, or bad options, are refused."""
    images = tmp_path / "images"
    images.mkdir()
    for i in range(2):
        Image.new("RGB", (900, 448), (90 * i, 40, 10)).save(images / f"w{i}.png")
    common = ["--model", str(demo_model), "--images", str(images), "--backend", "cpu", "--kv-blocks", "1024"]
    r = bench(common + ["--vit-alone", "4", "--vit-reps", "2", "--vit-hold", "0.2", "--json", "vit.json"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "ViT + projector alone: 4 tiles per batch (from 2 images" in r.stdout
    timing = json.loads((tmp_path / "vit.json").read_text())["vit_alone"]
    assert timing["tiles"] == 4 and timing["images"] == 2 and timing["reps"] == 2
    assert timing["ms_per_tile"] > 0 and timing["held_ms_per_tile"] > 0 and timing["held_batches"] >= 1
    assert timing["hold_seconds"] >= 0.2
    r = bench(common + ["--vit-alone", "3", "--json", "one.json"], tmp_path)
    assert r.returncode == 0, r.stderr
    one = json.loads((tmp_path / "one.json").read_text())["vit_alone"]
    assert one["images"] == 1 and one["hold_seconds"] == 0 and one["held_batches"] == 0
    r = bench(common + ["--vit-alone", "7"], tmp_path)
    assert r.returncode != 0 and "2 images give 6 tiles, 7 asked" in r.stderr
    assert bench(common + ["--vit-alone", "2", "--vit-reps", "0"], tmp_path).returncode == 2
