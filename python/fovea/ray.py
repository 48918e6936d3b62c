"""Fovea on Ray Data: one engine per actor, fed by `map_batches`.

    ds = ray.data.read_binary_files("photos/", include_paths=True)
    ds = ds.map_batches(fovea.ray.Predictor, fn_constructor_kwargs={"model": "model/", "prompt": "Is there a bed?"},
                        concurrency=8, num_gpus=1, batch_size=64)
    ds.write_json("answers/")

Each actor loads the model once (Ray gives it its own GPU through CUDA_VISIBLE_DEVICES). `__call__` is a
coroutine, so Ray Data hands an actor several batches at once (RAY_DATA_DEFAULT_ASYNC_BATCH_UDF_MAX_CONCURRENCY,
4 by default) and the engine takes the next batch's rows while it finishes the last one's: it never drains
between batches. This module does not import Ray; it only needs numpy (and pandas for pandas batches).
"""
from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Optional, Sequence, Union

from ._engine import Engine
from ._request import Request, Result
from ._sampling import SAMPLING_FIELDS, UNLIMITED_TOKENS, SamplingParams

# Output columns, in order (answer_logprobs / choice_logprobs / samples hold JSON text or None).
OUTPUT_COLUMNS = ("answer", "answer_logprobs", "choice_logprobs", "token_logprobs", "samples", "finish_reason",
                  "prompt_tokens", "completion_tokens", "error", "error_kind")


class Predictor:
    """A callable class for `Dataset.map_batches`. Per row it reads:

    - the image column ("bytes" as read_binary_files gives it, else "image": bytes, a path, a URL or an HWC
      array; or `image_column`); it may be absent when rows carry OpenAI-style `messages` instead;
    - "prompt" (or `prompt_column`; else `prompt` for every row), or "messages" (OpenAI-style chat messages, a
      list or its JSON text; image_url parts are fetched like image URLs);
    - optional "system" (else `system`), "answers" (a list or JSON list, else `answers`), "tiling" ("official"
      or "compact", else the engine's), "max_tiles" (else the engine's), "choices" (a list or JSON list: answer with the most likely one) and
      "sampling" (a dict or JSON object of SamplingParams fields: temperature, top_p, top_k, min_p, seed, n,
      max_tokens, stop, penalties, ...) over the defaults `max_tokens`, `temperature`, `sampling`.

    It adds "answer" (the text, None on error), "answer_logprobs" (JSON {answer: log-prob} when `answers` is
    given; not for rows with choices), "choice_logprobs" (JSON {choice: total log-prob} for rows with choices),
    "token_logprobs" (for rows whose sampling asks for "logprobs": N, JSON list per generated token of {"token",
    "text", "logprob", "top": N alternatives as {"token", "text", "logprob"}}), "samples" (JSON list of every
    sample's text for rows with n > 1), "finish_reason", "prompt_tokens",
    "completion_tokens", "error" (None or a message) and "error_kind" (None or Result.error_kind:
    "invalid_image", "engine_failed", ...). A bad row (corrupt image, bad sampling value) fails only itself. The
    image column is dropped from the output unless `keep_image`. Other keyword arguments go to fovea.Engine
    (backend, gpus, quantization, tiling, max_tiles, kv_blocks, fetch options, ...). `predict(batch)` is the blocking form, for use outside Ray."""

    def __init__(self, model: str, prompt: Optional[str] = None, *, image_column: Optional[str] = None,
                 prompt_column: str = "prompt", messages_column: str = "messages", system_column: str = "system",
                 choices_column: str = "choices", sampling_column: str = "sampling", tiling_column: str = "tiling",
                 answers_column: str = "answers", max_tiles_column: str = "max_tiles",
                 system: Optional[str] = None,
                 max_tokens: int = 1, answers: Optional[Sequence[str]] = None, temperature: float = 0.0,
                 sampling: Union[SamplingParams, Dict[str, Any], None] = None, keep_image: bool = False,
                 **engine_options: Any):
        self.prompt, self.system, self.keep_image = prompt, system, keep_image
        self.image_column, self.prompt_column, self.messages_column = image_column, prompt_column, messages_column
        self.system_column, self.choices_column, self.sampling_column = system_column, choices_column, sampling_column
        self.tiling_column, self.answers_column = tiling_column, answers_column
        self.max_tiles_column = max_tiles_column
        self.answers = list(answers or ())
        defaults = dict(max_tokens=max_tokens, temperature=temperature)
        defaults.update(_sampling_fields(sampling))
        self.defaults = defaults
        Request(**self.defaults).validate()  # a bad default fails at construction, not on every row
        self.engine = Engine(model, **engine_options)

    async def __call__(self, batch):
        rows, requests = self._requests(batch)
        results = await self.engine.agenerate([r for r in requests if isinstance(r, Request)])
        return self._output(batch, rows, requests, results)

    def predict(self, batch):
        """The blocking form of __call__."""
        rows, requests = self._requests(batch)
        results = self.engine.generate([r for r in requests if isinstance(r, Request)])
        return self._output(batch, rows, requests, results)

    def _requests(self, batch):
        """(columns, per row a Request or the Result of a row refused before the engine)."""
        columns = list(batch.keys()) if isinstance(batch, dict) else list(batch.columns)
        image_column = self.image_column or ("bytes" if "bytes" in columns else "image")
        has_messages = self.messages_column in columns
        if image_column not in columns and not has_messages:
            raise KeyError(f"fovea.ray.Predictor: no image column {image_column!r} (nor {self.messages_column!r}) in "
                           f"{columns}")
        if self.prompt_column not in columns and self.prompt is None and not has_messages:
            raise KeyError(f"fovea.ray.Predictor: no {self.prompt_column!r} column and no prompt= given")
        count = len(batch[columns[0]]) if columns else 0
        cell = _cells(batch)
        requests: List[Union[Request, Result]] = []
        for i in range(count):
            try:
                requests.append(self._row_request(cell, columns, image_column, i))
            except (TypeError, ValueError) as e:  # this row's own input: it fails alone
                requests.append(Result(i, error=f"{type(e).__name__}: {e}", error_kind="invalid_request",
                                       finish_reason="error"))
        return (columns, image_column), requests

    def _row_request(self, cell, columns, image_column: str, i: int) -> Request:
        def value(column):
            v = cell(column, i) if column in columns else None
            return None if _missing(v) else v

        messages = _json_value(value(self.messages_column), "messages")
        prompt = None if messages is not None else (value(self.prompt_column) if self.prompt_column in columns
                                                    else self.prompt)
        image = value(image_column)
        # A row's image comes from the image column, or (missing there) from its messages alone.
        images = [] if image_column not in columns or (image is None and messages is not None) else [image]
        system = value(self.system_column)
        choices = _json_value(value(self.choices_column), "choices")
        tiling = value(self.tiling_column)
        max_tiles = value(self.max_tiles_column)
        answers = _json_value(value(self.answers_column), "answers")
        answers = self.answers if answers is None else [str(a) for a in answers]
        fields = dict(self.defaults)
        fields.update(_sampling_fields(_json_value(value(self.sampling_column), "sampling")))
        request = Request(images=[_row_image(x) for x in images],
                          prompt=None if prompt is None else str(prompt),
                          messages=None if messages is None else [dict(m) for m in messages],
                          system=None if system is None else str(system),
                          choices=None if choices is None else [str(c) for c in choices],
                          tiling=None if tiling is None else str(tiling),
                          max_tiles=None if max_tiles is None else _whole(max_tiles, "max_tiles"),
                          answers=None if choices is not None else answers or None, **fields)
        request.validate()
        return request

    def _output(self, batch, rows, requests, results: List[Result]):
        columns, image_column = rows
        engine_results = iter(results)
        merged = [r if isinstance(r, Result) else next(engine_results) for r in requests]
        out: Dict[str, Any] = {c: batch[c] for c in columns if self.keep_image or c != image_column}
        values = {
            "answer": [r.text if r.ok else None for r in merged],
            "answer_logprobs": [_json_logprobs(r.answer_logprobs) if r.ok and r.answer_logprobs else None
                                for r in merged],
            "choice_logprobs": [_json_logprobs(r.choice_logprobs) if r.ok and r.choice_logprobs else None
                                for r in merged],
            "token_logprobs": [_json_token_logprobs(r.logprobs) if r.ok and r.logprobs is not None else None
                               for r in merged],
            "samples": [json.dumps([o.text for o in r.outputs]) if r.ok and len(r.outputs) > 1 else None
                        for r in merged],
            "finish_reason": [r.finish_reason or None for r in merged],
            "prompt_tokens": [r.prompt_tokens for r in merged],
            "completion_tokens": [r.completion_tokens for r in merged],
            "error": [r.error for r in merged],
            "error_kind": [r.error_kind for r in merged],
        }
        for name in OUTPUT_COLUMNS:
            out[name] = _objects(values[name]) if name not in ("prompt_tokens", "completion_tokens") else \
                _ints(values[name])
        if isinstance(batch, dict):
            return out
        import pandas as pd
        return pd.DataFrame(out)


def _cells(batch):
    if isinstance(batch, dict):
        return lambda column, i: batch[column][i]
    return lambda column, i: batch[column].iloc[i]


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _json_value(value, name: str):
    """A nested cell as Python lists/dicts: JSON text is parsed, numpy arrays become lists."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)):
        try:
            return json.loads(value)
        except json.JSONDecodeError as e:
            raise ValueError(f"the {name} column is not valid JSON: {e}") from None
    if hasattr(value, "tolist") and not isinstance(value, dict):
        return value.tolist()
    return value


def _sampling_fields(sampling) -> Dict[str, Any]:
    """SamplingParams or a dict of its fields -> Request fields (unknown names refused)."""
    if sampling is None:
        return {}
    if isinstance(sampling, SamplingParams):
        return sampling.fields()
    if not isinstance(sampling, dict):
        raise ValueError(f"sampling must be a dict of SamplingParams fields, not {type(sampling).__name__}")
    unknown = set(sampling) - set(SAMPLING_FIELDS)
    if unknown:
        raise ValueError(f"unknown sampling fields {sorted(unknown)} (known: {', '.join(SAMPLING_FIELDS)})")
    fields = {k: _json_value(v, k) if k in ("stop", "stop_token_ids", "choices") else _scalar(v)
              for k, v in sampling.items() if not _missing(v)}
    if "max_tokens" in sampling and sampling["max_tokens"] is None:
        fields["max_tokens"] = UNLIMITED_TOKENS
    return fields


def _whole(value, name: str) -> int:
    """An integer cell (pandas makes a column with missing cells float): 3.0 -> 3; 2.5 is refused."""
    value = _scalar(value)
    if isinstance(value, bool) or not float(value).is_integer():
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return int(value)


def _scalar(value):
    """numpy scalars (as pandas cells hold them) as Python numbers."""
    return value.item() if hasattr(value, "item") and not isinstance(value, (str, bytes)) else value


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


def _json_token_logprobs(logprobs) -> str:
    def entry(lp):
        return {"token": lp.token, "text": lp.text, "logprob": lp.logprob}
    return json.dumps([dict(entry(lp), top=[entry(t) for t in lp.top]) for lp in logprobs])


def _objects(values):
    import numpy as np
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def _ints(values):
    import numpy as np
    return np.asarray(values, dtype=np.int64)
