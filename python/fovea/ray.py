"""Fovea on Ray Data: one engine per actor, fed by `map_batches`.

    ds = ray.data.read_binary_files("photos/", include_paths=True)
    ds = ds.map_batches(fovea.ray.Predictor, fn_constructor_kwargs={"model": "model/", "prompt": "Is there a bed?"},
                        concurrency=8, num_gpus=1, batch_size=64)
    ds.write_json("answers/")

Each actor loads the model once (Ray gives it its own GPU through CUDA_VISIBLE_DEVICES). A batch's rows go to
the engine together, so the engine's continuous batching sees `batch_size` requests at a time: make it a few
times the engine's comfortable batch. This module does not import Ray; it only needs numpy.
"""
from __future__ import annotations

import json
import math
from typing import Any, Dict, Optional, Sequence

from ._engine import Engine
from ._request import Request


class Predictor:
    """A callable class for `Dataset.map_batches`: reads the image column ("bytes" as read_binary_files gives
    it, else "image": bytes, a path or an HWC array, or `image_column`) and the prompt column ("prompt", or one
    `prompt` for every row), and adds "answer" (the text, None on error), "answer_logprobs" (a JSON object
    {answer: log-prob} when `answers` is given, else None), "error" (None or a message) and "error_kind" (None or
    Result.error_kind: e.g. "invalid_image", or "engine_failed", worth a retry) columns. The image
    column is dropped from the output unless `keep_image` (encoded bytes do not belong in a JSON file). Other
    keyword arguments go to fovea.Engine (backend, gpus, quantization, tiling, max_tiles, kv_blocks, ...).
    A corrupt image fails only its row."""

    def __init__(self, model: str, prompt: Optional[str] = None, *, image_column: Optional[str] = None,
                 prompt_column: str = "prompt", max_tokens: int = 1, answers: Optional[Sequence[str]] = None,
                 temperature: float = 0.0, keep_image: bool = False, **engine_options: Any):
        self.engine = Engine(model, **engine_options)
        self.prompt, self.image_column, self.prompt_column = prompt, image_column, prompt_column
        self.max_tokens, self.answers, self.temperature = max_tokens, list(answers or ()), temperature
        self.keep_image = keep_image

    def __call__(self, batch):
        import numpy as np
        columns = list(batch.keys()) if isinstance(batch, dict) else list(batch.columns)
        image_column = self.image_column or ("bytes" if "bytes" in columns else "image")
        if image_column not in columns:
            raise KeyError(f"fovea.ray.Predictor: no image column {image_column!r} in {columns}")
        if self.prompt_column not in columns and self.prompt is None:
            raise KeyError(f"fovea.ray.Predictor: no {self.prompt_column!r} column and no prompt= given")
        images = batch[image_column]
        prompts = batch[self.prompt_column] if self.prompt_column in columns else None
        requests = []
        for i in range(len(images)):
            image = images[i] if isinstance(batch, dict) else images.iloc[i]
            prompt = self.prompt if prompts is None else str(prompts[i] if isinstance(batch, dict) else prompts.iloc[i])
            requests.append(Request(images=[_row_image(image)], prompt=prompt, max_tokens=self.max_tokens,
                                    temperature=self.temperature, answers=self.answers or None))
        results = self.engine.generate(requests)
        out: Dict[str, Any] = {c: batch[c] for c in columns if self.keep_image or c != image_column}
        out["answer"] = _objects([r.text if r.ok else None for r in results])
        out["answer_logprobs"] = _objects([_json_logprobs(r.answer_logprobs) if r.ok and self.answers else None
                                           for r in results])
        out["error"] = _objects([r.error for r in results])
        out["error_kind"] = _objects([r.error_kind for r in results])
        if isinstance(batch, dict):
            return out
        import pandas as pd
        return pd.DataFrame(out)


def _row_image(value):
    """A row's cell as an image (None, a missing cell, fails its row): numpy bytes_/str_ become bytes/str."""
    import numpy as np
    if isinstance(value, np.bytes_):
        return bytes(value)
    if isinstance(value, np.str_):
        return str(value)
    return value


def _json_logprobs(logprobs: Dict[str, float]) -> str:
    return json.dumps({k: (v if math.isfinite(v) else None) for k, v in logprobs.items()})


def _objects(values):
    import numpy as np
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array
