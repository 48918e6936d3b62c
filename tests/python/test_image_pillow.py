"""Fovea's image pipeline against Pillow, the reference InternVL was trained with.

- `fovea preprocess` on every photo of ../shared/data/photos: tiles_u8 and pixel_values identical to InternVL's
  dynamic_preprocess + torchvision normalisation, grid/thumbnail metadata, policy and max-tiles flags.
- every image of ../shared/data/images that Pillow decodes as JPEG/PNG/WebP/BMP/GIF: the decoded RGB
  identical to Image.open(f).convert('RGB'), and the tiles identical (checksums from fovea_image_tool).
- the resampler alone on decoded arrays (so decoder and resampler are proven separately).
- bad input: one-line error, non-zero exit.
"""
import os
import subprocess
import sys
import warnings
import zlib

import numpy as np
import pytest
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "image"))
import pillow_reference as ref  # noqa: E402

SHARED = os.environ.get("FOVEA_SHARED_DATA", os.path.join(ROOT, "..", "shared", "data"))
PHOTOS = os.path.join(SHARED, "photos")
IMAGES = os.path.join(SHARED, "images")
FOVEA = os.environ.get("FOVEA_BIN", os.path.join(ROOT, "build", "fovea"))
TOOL = os.path.join(os.path.dirname(FOVEA), "fovea_image_tool")
SUPPORTED = {"JPEG", "PNG", "WEBP", "BMP", "GIF", "MPO", "DIB"}
# Images Pillow decodes that Fovea refuses, each for a stated reason (kept short and explicit).
KNOWN_REFUSED = {}

needs_fovea = pytest.mark.skipif(not os.path.exists(FOVEA), reason=f"no fovea binary at {FOVEA}")
needs_tool = pytest.mark.skipif(not os.path.exists(TOOL), reason=f"no fovea_image_tool at {TOOL}")
needs_photos = pytest.mark.skipif(not os.path.isdir(PHOTOS), reason="no ../shared/data/photos")
needs_images = pytest.mark.skipif(not os.path.isdir(IMAGES), reason="no ../shared/data/images")


def corpus_paths():
    for root, _, files in os.walk(IMAGES):
        for name in sorted(files):
            yield os.path.join(root, name)


def pillow_decodable():
    """(path, rgb ndarray) for every corpus file Pillow opens in a supported format and converts."""
    warnings.simplefilter("ignore")
    out = []
    for path in corpus_paths():
        try:
            with Image.open(path) as im:
                if im.format not in SUPPORTED:
                    continue
                rgb = im.convert("RGB")
        except Exception:  # Pillow refuses it: test_corpus_refused_like_pillow covers it
            continue
        out.append((path, rgb))
    return out


def sniffed_supported(data):
    """The formats Fovea's sniffer sends to a decoder (src/image/decode_image.cc)."""
    return (data[:3] == b"\xff\xd8\xff" or data[:8] == b"\x89PNG\r\n\x1a\n" or data[:2] == b"BM" or
            data[:6] in (b"GIF87a", b"GIF89a") or (data[:4] == b"RIFF" and data[8:12] == b"WEBP"))


def pillow_refused():
    """Corpus files in a format Fovea decodes that Pillow refuses to open or convert."""
    warnings.simplefilter("ignore")
    out = []
    for path in corpus_paths():
        with open(path, "rb") as f:
            if not sniffed_supported(f.read(16)):
                continue
        try:
            with Image.open(path) as im:
                im.convert("RGB")
        except Exception:
            out.append(path)
    return out


def run_preprocess(tmp_path, image, *flags):
    out = tmp_path / "out.safetensors"
    proc = subprocess.run([FOVEA, "preprocess", image, *flags, "--out", str(out)], capture_output=True, text=True)
    return proc, out


def read_raw(path):
    data = open(path, "rb").read()
    nl = data.index(b"\n")
    w, h = map(int, data[:nl].split())
    return np.frombuffer(data[nl + 1:], np.uint8).reshape(h, w, 3)


def write_raw(path, arr):
    with open(path, "wb") as f:
        f.write(f"{arr.shape[1]} {arr.shape[0]}\n".encode())
        f.write(np.ascontiguousarray(arr, dtype=np.uint8).tobytes())


@needs_fovea
@needs_photos
def test_photos_preprocess_bit_exact(tmp_path):
    photos = sorted(os.listdir(PHOTOS))
    assert photos
    for name in photos:
        path = os.path.join(PHOTOS, name)
        proc, out = run_preprocess(tmp_path, path)
        assert proc.returncode == 0, proc.stderr
        tensors, meta = ref.read_safetensors(out)
        expected, (cols, rows) = ref.reference_tiles(ref.open_rgb(path))
        assert meta["grid"] == f"{cols},{rows}", name
        assert meta["thumbnail"] == ("1" if cols * rows > 1 else "0"), name
        assert tensors["tiles_u8"].shape == expected.shape, name
        diff = np.abs(tensors["tiles_u8"].astype(int) - expected).max()
        assert diff == 0, f"{name}: max |delta| {diff}"
        assert np.array_equal(tensors["pixel_values"], ref.normalize(expected)), name


@needs_fovea
@needs_photos
def test_preprocess_flags(tmp_path):
    path = os.path.join(PHOTOS, sorted(os.listdir(PHOTOS))[0])
    image = ref.open_rgb(path)
    proc, out = run_preprocess(tmp_path, path, "--max-tiles", "4")
    assert proc.returncode == 0, proc.stderr
    tensors, meta = ref.read_safetensors(out)
    expected, (cols, rows) = ref.reference_tiles(image, max_num=4)
    assert meta["grid"] == f"{cols},{rows}"
    assert np.array_equal(tensors["tiles_u8"], expected)

    proc, out = run_preprocess(tmp_path, path, "--policy", "compact")
    assert proc.returncode == 0, proc.stderr
    tensors, meta = ref.read_safetensors(out)
    cols, rows = map(int, meta["grid"].split(","))
    # The compact grid's tiles are still Pillow-exact resizes of the photo.
    expected, _ = ref.reference_tiles(image, grid=(cols, rows), use_thumbnail=meta["thumbnail"] == "1")
    assert np.array_equal(tensors["tiles_u8"], expected)
    assert tensors["tiles_u8"].shape[0] <= 13


@needs_fovea
@needs_images
def test_exif_flag_transposes_like_pillow(tmp_path):
    from PIL import ImageOps
    checked = 0
    for name in sorted(os.listdir(IMAGES)):
        if not name.startswith("hopper_orientation_") or not name.endswith((".jpg", ".png", ".webp")):
            continue
        path = os.path.join(IMAGES, name)
        with Image.open(path) as im:
            transposed = ImageOps.exif_transpose(im).convert("RGB")
        proc, out = run_preprocess(tmp_path, path, "--exif", "--max-tiles", "1")
        assert proc.returncode == 0, proc.stderr
        tensors, _ = ref.read_safetensors(out)
        expected, _ = ref.reference_tiles(transposed, max_num=1)
        assert np.array_equal(tensors["tiles_u8"], expected), name
        checked += 1
    assert checked >= 7


@needs_fovea
@needs_images
def test_bad_input_gives_one_line_error(tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(open(os.path.join(IMAGES, "hopper.jpg"), "rb").read()[:300])
    for path, needle in [(str(bad), "JPEG"), (os.path.join(IMAGES, "decompression_bomb.gif"), "limit"),
                         (str(tmp_path / "missing.png"), "not found")]:
        proc, out = run_preprocess(tmp_path, path)
        assert proc.returncode != 0
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], proc.stderr
        assert not out.exists()


@needs_tool
@needs_images
def test_corpus_decode_bit_exact(tmp_path):
    cases = pillow_decodable()
    assert len(cases) > 500
    mismatches = []
    for path, rgb in cases:
        name = os.path.basename(path)
        proc = subprocess.run([TOOL, "decode", path, str(tmp_path / "d.raw")], capture_output=True, text=True)
        if proc.returncode != 0:
            if name not in KNOWN_REFUSED:
                mismatches.append(f"{name}: refused: {proc.stderr.strip()}")
            continue
        ours = read_raw(tmp_path / "d.raw")
        expected = np.asarray(rgb)
        if ours.shape != expected.shape or not np.array_equal(ours, expected):
            mismatches.append(f"{name}: differs from Pillow")
    assert not mismatches, "\n".join(mismatches[:20])


@needs_tool
@needs_images
def test_corpus_refused_like_pillow(tmp_path):
    """Issue 19: what Pillow refuses (BMP header/bitfield/palette variants, PNG text bombs, unknown compression
    methods, APNG sequence errors, truncated chunks) Fovea refuses too, with a one-line error."""
    refused = pillow_refused()
    assert len(refused) >= 25
    accepted = []
    for path in refused:
        proc = subprocess.run([TOOL, "decode", path, str(tmp_path / "d.raw")], capture_output=True, text=True)
        if proc.returncode == 0:
            accepted.append(os.path.relpath(path, IMAGES))
        else:
            assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not accepted, f"Pillow refuses, Fovea accepts: {accepted}"


def checksums(tiles_u8):
    """The tool's zlib (crc32, adler32) of the tile bytes."""
    data = np.ascontiguousarray(tiles_u8, dtype=np.uint8)
    return zlib.crc32(data), zlib.adler32(data)


@needs_tool
@needs_images
def test_corpus_tiles_bit_exact():
    cases = [(p, rgb) for p, rgb in pillow_decodable() if os.path.basename(p) not in KNOWN_REFUSED]
    lines = []
    batch = 64
    for i in range(0, len(cases), batch):
        paths = [p for p, _ in cases[i:i + batch]]
        proc = subprocess.run([TOOL, "tiles", *paths], capture_output=True, text=True, check=True)
        lines += proc.stdout.strip().splitlines()
    assert len(lines) == len(cases)
    mismatches = []
    for (path, rgb), line in zip(cases, lines):
        name = os.path.basename(path)
        if line.startswith("ERROR"):
            mismatches.append(f"{name}: {line}")
            continue
        cols, rows, thumb, crc, adler = map(int, line.split())
        expected, grid = ref.reference_tiles(rgb)
        if (cols, rows) != grid or thumb != int(cols * rows > 1) or (crc, adler) != checksums(expected):
            mismatches.append(f"{name}: grid {cols},{rows} vs {grid[0]},{grid[1]} or tiles differ")
    assert not mismatches, "\n".join(mismatches[:20])


@needs_tool
@needs_photos
def test_resampler_alone_matches_pillow(tmp_path):
    """Resize Pillow's own decoded pixels, so any difference can only come from the resampler."""
    rng = np.random.default_rng(0)
    arrays = [np.asarray(ref.open_rgb(os.path.join(PHOTOS, n))) for n in sorted(os.listdir(PHOTOS))[:3]]
    arrays += [rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8) for w, h in [(1, 1), (3, 7), (33, 17), (640, 480)]]
    sizes = [(448, 448), (1792, 1344), (5, 3), (1, 9), (901, 77)]
    for arr in arrays:
        write_raw(tmp_path / "in.raw", arr)
        for w, h in sizes:
            subprocess.run([TOOL, "resize", str(tmp_path / "in.raw"), str(w), str(h), str(tmp_path / "out.raw")],
                           check=True)
            expected = np.asarray(ref.pillow_resize(Image.fromarray(arr), (w, h)))
            assert np.array_equal(read_raw(tmp_path / "out.raw"), expected), f"{arr.shape} -> {w}x{h}"
