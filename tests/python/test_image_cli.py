"""`fovea make-demo-images` and `fovea inspect`: the files they write and what they print."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "image"))
import pillow_reference as ref  # noqa: E402

FOVEA = os.environ.get("FOVEA_BIN", os.path.join(ROOT, "build", "fovea"))
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA), reason=f"no fovea binary at {FOVEA}")


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    proc = subprocess.run([FOVEA, "make-demo-images", "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return out


def test_demo_images_are_pictures_of_listing_sizes(demo_dir):
    files = sorted(os.listdir(demo_dir))
    assert len(files) == 8
    sizes = set()
    formats = set()
    for name in files:
        with Image.open(demo_dir / name) as im:
            formats.add(im.format)
            sizes.add(im.size)
            pixels = np.asarray(im.convert("RGB")).astype(int)
        # A scene, not noise and not flat: large smooth areas (small neighbour differences) with real contrast.
        assert pixels.std() > 20, name
        assert np.abs(np.diff(pixels, axis=1)).mean() < 12, name
    assert formats == {"JPEG", "PNG"}
    assert {(480, 360), (800, 600), (750, 1000), (1920, 1080), (612, 464)} <= sizes


def test_demo_images_preprocess_bit_exact(demo_dir, tmp_path):
    for name in sorted(os.listdir(demo_dir)):
        out = tmp_path / "t.safetensors"
        proc = subprocess.run([FOVEA, "preprocess", str(demo_dir / name), "--out", str(out)], capture_output=True,
                              text=True)
        assert proc.returncode == 0, proc.stderr
        tensors, meta = ref.read_safetensors(out)
        expected, (cols, rows) = ref.reference_tiles(ref.open_rgb(demo_dir / name))
        assert meta["grid"] == f"{cols},{rows}"
        assert np.array_equal(tensors["tiles_u8"], expected), name


def test_inspect_prints_both_policies_and_draws_grid(demo_dir, tmp_path):
    image = demo_dir / "demo_08_480x320.png"
    out = tmp_path / "grid.png"
    proc = subprocess.run([FOVEA, "inspect", str(image), "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    official = re.search(r"official\s+grid (\d+)x(\d+)( \+ thumbnail)? = (\d+) tiles, (\d+) image tokens",
                         proc.stdout)
    compact = re.search(r"compact\s+grid (\d+)x(\d+)( \+ thumbnail)? = (\d+) tiles, (\d+) image tokens",
                        proc.stdout)
    assert official and compact, proc.stdout
    assert official.group(1, 2) == ("3", "2") and official.group(5) == "1792"
    assert compact.group(1, 2) == ("2", "1") and compact.group(5) == "512"
    with Image.open(out) as drawn, Image.open(image) as original:
        assert drawn.size == original.size
        diff = np.abs(np.asarray(drawn.convert("RGB")).astype(int) - np.asarray(original.convert("RGB")))
        changed = diff.max(axis=2) > 0
        # Grid lines: whole columns at the official cell borders (x = 0, 1/3, 2/3, 1 of the width) are drawn.
        assert changed[:, original.width // 3].mean() > 0.9 or changed[:, original.width // 3 - 1].mean() > 0.9
        assert changed.mean() < 0.2


def test_inspect_bad_input_one_line_error(tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    proc = subprocess.run([FOVEA, "inspect", str(bad)], capture_output=True, text=True)
    assert proc.returncode != 0
    assert len(proc.stderr.strip().splitlines()) == 1 and "PNG" in proc.stderr
