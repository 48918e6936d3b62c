"""One generate()/stream() call: its Requests become native jobs (n per request, one per sample), a native Batch
runs them, and the finished samples come back together as Results (or, for token streaming, as StreamDeltas)."""
from __future__ import annotations

import sys
import time
from typing import Iterator, List, Optional, Sequence, Tuple, Union

from . import _fovea
from ._request import _FINISH, Request, Result, image_bytes, make_result, token_logprobs
from ._sampling import StreamDelta


class Call:
    """The jobs of one call and the Results as their samples finish. `events(chunk)` turns what Batch.next()
    returned into Results (each once all its samples finished) or, with deltas, StreamDeltas."""

    def __init__(self, handle, requests: List[Request], options, tiling: str, max_tiles: Optional[int]):
        for request in requests:
            request.validate()
        self.requests, self.deltas = requests, options.deltas
        self.owner: List[Tuple[int, int]] = []  # job -> (request index, sample)
        jobs = []
        for i, request in enumerate(requests):
            inputs = _job_inputs(request, options.max_image_bytes)
            for sample in range(request.n):
                self.owner.append((i, sample))
                jobs.append(_make_job(request, sample, inputs, tiling, max_tiles, options.max_image_bytes))
        self.samples: List[List[Optional[tuple]]] = [[None] * r.n for r in requests]
        self.missing = [r.n for r in requests]
        self.batch = handle.submit(jobs, options)

    def events(self, chunk: Sequence[tuple]) -> Iterator[Union[Result, StreamDelta]]:
        for raw in chunk:
            if isinstance(raw[0], str):  # ("delta", job, text, tokens, logprobs) or ("restart", job)
                i, sample = self.owner[raw[1]]
                if raw[0] == "restart":
                    yield StreamDelta(i, sample, restart=True)
                else:
                    logprobs = token_logprobs(raw[4], self.requests[i].logprobs)
                    yield StreamDelta(i, sample, raw[2], list(raw[3]), logprobs)
                continue
            i, sample = self.owner[raw[0]]
            self.samples[i][sample] = raw
            self.missing[i] -= 1
            result = make_result(self.samples[i], self.requests[i], i) if self.missing[i] == 0 else None
            if self.deltas:
                yield StreamDelta(i, sample, finished=True, finish_reason=raw[_FINISH], result=result)
            elif result is not None:
                yield result


def _job_inputs(request: Request, max_image_bytes: int) -> Tuple[list, list, str, str, str]:
    """(encoded images, labels, messages JSON, error, error kind): once per request, shared by its samples. An image
    that cannot be read or converted is "invalid_image", as every door reports it (src/requests/request_images.h);
    an unsupported image type is the request's own shape, "invalid_request"."""
    encoded, labels = [], []
    try:
        for number, image in enumerate(request.all_images(), 1):
            data, label = image_bytes(image, number, max_image_bytes)
            encoded.append(data)
            labels.append(label)
    except (OSError, ValueError) as e:  # this request's fault: its Result carries the error
        return [], [], "", f"{type(e).__name__}: {e}", "invalid_image"
    except TypeError as e:
        return [], [], "", f"{type(e).__name__}: {e}", "invalid_request"
    try:
        return encoded, labels, request.messages_json(), "", ""
    except (TypeError, ValueError) as e:
        return [], [], "", f"{type(e).__name__}: {e}", "invalid_request"


def generation_params(request: Request, sample: int):
    p = _fovea.GenerationParams()
    p.max_tokens = int(request.max_tokens)
    p.temperature = float(request.temperature)
    p.top_p = float(request.top_p)
    p.top_k = int(request.top_k)
    p.min_p = float(request.min_p)
    p.repetition_penalty = float(request.repetition_penalty)
    p.presence_penalty = float(request.presence_penalty)
    p.frequency_penalty = float(request.frequency_penalty)
    p.seed = request.sample_seed(sample)
    p.stop = request.stop_list()
    p.stop_token_ids = [int(t) for t in request.stop_token_ids or ()]
    p.ignore_eos = bool(request.ignore_eos)
    p.top_logprobs = 0 if request.logprobs is None else max(1, int(request.logprobs))
    p.answers = list(request.answers or ())
    p.choices = list(request.choices or ())
    p.return_prompt_token_ids = True
    return p


def _make_job(request: Request, sample: int, inputs: Tuple[list, list, str, str, str], tiling: str,
              max_tiles: Optional[int], max_image_bytes: int):
    encoded, labels, messages, error, error_kind = inputs
    return _fovea.make_job(images=encoded, labels=labels, prompt=request.prompt or "", system=request.system or "",
                           messages_json=messages, params=generation_params(request, sample),
                           tiling=request.tiling or tiling, max_tiles=request.max_tiles or max_tiles or 0,
                           max_image_bytes=max_image_bytes, error=error, error_kind=error_kind or "invalid_request")


class Progress:
    """A progress bar on stderr: tqdm when installed, else one line redrawn at most every half second."""

    def __init__(self, total: int):
        self.total, self.done, self.failed, self.start, self.shown = total, 0, 0, time.time(), 0.0
        try:
            from tqdm import tqdm
            self.bar = tqdm(total=total, unit="req", desc="fovea")
        except ImportError:
            self.bar = None

    def add(self, result: Result) -> None:
        self.done += 1
        self.failed += result.error is not None
        if self.bar is not None:
            self.bar.update(1)
            return
        now = time.time()
        if now - self.shown >= 0.5 or self.done == self.total:
            self.shown = now
            qpm = 60.0 * self.done / max(now - self.start, 1e-9)
            sys.stderr.write(f"\rfovea: {self.done}/{self.total} done, {self.failed} failed, {qpm:.0f} QPM")
            sys.stderr.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.total:
            sys.stderr.write("\n")
