"""InternVL's reference preprocessing with Pillow (the oracle of the image tests and the benchmark).

dynamic_preprocess() is InternVL's rule as published (candidate set sorted by tile count, closest aspect
ratio, tie-break on area); reference_tiles() returns the uint8 tiles [T, S, S, 3] and the grid.
Also reads Fovea's safetensors output with numpy only.
"""
import json
import struct

import numpy as np
from PIL import Image

TILE = 448


def find_closest_aspect_ratio(aspect_ratio, target_ratios, width, height, image_size):
    best_ratio_diff = float("inf")
    best_ratio = (1, 1)
    area = width * height
    for ratio in target_ratios:
        target_aspect_ratio = ratio[0] / ratio[1]
        ratio_diff = abs(aspect_ratio - target_aspect_ratio)
        if ratio_diff < best_ratio_diff:
            best_ratio_diff = ratio_diff
            best_ratio = ratio
        elif ratio_diff == best_ratio_diff:
            if area > 0.5 * image_size * image_size * ratio[0] * ratio[1]:
                best_ratio = ratio
    return best_ratio


def target_ratios(min_num=1, max_num=12):
    ratios = set((i, j) for n in range(min_num, max_num + 1) for i in range(1, n + 1) for j in range(1, n + 1)
                 if min_num <= i * j <= max_num)
    return sorted(ratios, key=lambda x: x[0] * x[1])


def official_grid(width, height, min_num=1, max_num=12, image_size=TILE):
    return find_closest_aspect_ratio(width / height, target_ratios(min_num, max_num), width, height, image_size)


def open_rgb(path):
    with Image.open(path) as im:
        return im.convert("RGB")


def pillow_resize(image, size):
    """PIL.Image.resize(size, BICUBIC) as Pillow <= 12 computes it: horizontal pass first, then vertical.

    Pillow 13 sometimes runs the vertical pass first (e.g. 889x500 -> 896x448), which moves some bytes by up
    to 4; InternVL was trained with, and the reference machine runs, Pillow <= 12 (9.4 and 12.3 give
    identical tiles). Doing the two passes as two resizes gives Pillow <= 12's bytes under any version, since
    each single-direction resize is the same in all of them.
    """
    width, height = size
    if (width, height) == image.size:
        return image.copy()
    if width != image.width and height != image.height:
        image = image.resize((width, image.height), Image.BICUBIC)
    return image.resize((width, height), Image.BICUBIC)


def reference_tiles(image, max_num=12, image_size=TILE, use_thumbnail=True, grid=None):
    """Tiles exactly as InternVL's dynamic_preprocess makes them; `grid` overrides the official choice."""
    cols, rows = grid or official_grid(image.width, image.height, 1, max_num, image_size)
    resized = pillow_resize(image, (image_size * cols, image_size * rows))
    tiles = []
    for i in range(cols * rows):
        box = ((i % cols) * image_size, (i // cols) * image_size,
               (i % cols + 1) * image_size, (i // cols + 1) * image_size)
        tiles.append(np.asarray(resized.crop(box)))
    if use_thumbnail and len(tiles) != 1:
        tiles.append(np.asarray(pillow_resize(image, (image_size, image_size))))
    return np.stack(tiles), (cols, rows)


def normalize(tiles_u8):
    """torchvision ToTensor + Normalize in float32, [T,S,S,3] uint8 -> [T,3,S,S] float32."""
    x = tiles_u8.astype(np.float32) / np.float32(255)
    mean = np.array([0.485, 0.456, 0.406], dtype=np.float32)
    std = np.array([0.229, 0.224, 0.225], dtype=np.float32)
    return ((x - mean) / std).transpose(0, 3, 1, 2).astype(np.float32)


def read_safetensors(path):
    """Returns ({name: ndarray}, metadata) using numpy only."""
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    meta = header.pop("__metadata__", {})
    dtypes = {"U8": np.uint8, "F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64}
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        arr = np.frombuffer(data[base + begin:base + end], dtype=dtypes[info["dtype"]])
        tensors[name] = arr.reshape(info["shape"])
    return tensors, meta
