"""fovea.Engine: load a model once, then generate for many requests (blocking, streaming or asyncio)."""
from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import AsyncIterator, Iterator, List, Optional, Sequence, Union

from . import _fovea
from ._request import TILINGS, Request, Result, image_bytes, make_result

Requests = Union[Request, Sequence[Request]]


class Engine:
    """An InternVL model loaded on one backend, serving many requests at once (continuous batching).

    `model` is a checkpoint directory. `backend` is "cpu", "cuda" or "auto". `gpus` ("all", "0,1,3" or a list
    of ints) and `replicas` (CPU engines) ask for data parallelism. `quantization` is None (the checkpoint's
    dtype) or a W8A8 recipe as `fovea run --quantization` takes it: "fp8" (= "fp8-channel"), "fp8-tensor",
    "fp8-channel", "fp8-block", "fp8-channel-act128" or "fp8-all"; `w4` ("auto", "packed", "dequantize") says how
    a 4-bit AWQ/GPTQ checkpoint loads, `batch_invariant=True` makes outputs independent of batch-mates.
    `tiling` and `max_tiles` are the defaults for requests that do not set them. `concurrency` is how many
    requests of one call are in the engine at once (as `fovea run --concurrency`). Further keyword arguments set
    engine options of the same name (kv_blocks, max_batch_seqs, preprocess_threads, prefix_cache, cuda_graphs,
    ...). Loading releases the GIL; use the engine as a context manager or call close() to free it early.
    """

    def __init__(self, model: Union[str, "os.PathLike[str]"], backend: str = "auto",
                 gpus: Union[str, Sequence[int], None] = None, replicas: int = 1, quantization: Optional[str] = None,
                 tiling: str = "official", max_tiles: Optional[int] = None, concurrency: int = 64, **options):
        if backend not in ("auto", "cpu", "cuda"):
            raise ValueError("backend must be 'auto', 'cpu' or 'cuda'")
        if tiling not in TILINGS:
            raise ValueError(f"tiling must be one of {TILINGS}")
        if replicas < 1 or concurrency < 1 or (max_tiles is not None and max_tiles < 1):
            raise ValueError("replicas, concurrency and max_tiles must be at least 1")
        config = _fovea.EngineConfig()
        config.model_dir = os.fspath(model)
        config.backend = backend
        config.gpus = "" if gpus is None else gpus if isinstance(gpus, str) else ",".join(str(g) for g in gpus)
        config.replicas = replicas
        config.quantization = quantization or "none"
        for name, value in options.items():
            if name.startswith("_") or not hasattr(config, name):
                raise TypeError(f"Engine() got an unknown option {name!r}")
            setattr(config, name, value)
        self.tiling, self.max_tiles, self.concurrency = tiling, max_tiles, concurrency
        self._handle = _fovea.EngineHandle(config)

    @property
    def model_name(self) -> str:
        return self._handle.model_name()

    def stats(self) -> dict:
        """Engine counters: requests, tokens (prompt, computed, reused from the prefix cache), cache hits, queue
        depth, KV blocks, time per stage, health; behind a data-parallel dispatcher each engine's own under
        "engines"."""
        return json.loads(self._handle.stats_json())

    def close(self) -> None:
        """Waits for requests in flight and frees the model."""
        self._handle.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def generate(self, requests: Requests, progress: bool = False) -> List[Result]:
        """Runs every request and returns their Results in input order. Blocks; the GIL is released while the
        engine works. A request that fails (e.g. a corrupt image) has Result.error set; nothing raises for the
        batch, except ValueError for parameters no request could run with."""
        requests = _as_list(requests)
        results: List[Optional[Result]] = [None] * len(requests)
        for result in self._run(requests, _Progress(len(requests)) if progress else None):
            results[result.index] = result
        return results  # type: ignore[return-value]

    def stream(self, requests: Requests) -> Iterator[Result]:
        """Yields each request's Result as soon as it finishes (Result.index says which). Leaving the loop early
        cancels the requests not yet started."""
        return self._run(_as_list(requests), None)

    async def astream(self, requests: Requests) -> AsyncIterator[Result]:
        """asyncio form of stream(): `async for result in engine.astream(requests)`; waiting happens on a worker
        thread, so the event loop keeps running."""
        requests = _as_list(requests)
        batch = self._submit(requests)
        try:
            while True:
                chunk = await asyncio.get_running_loop().run_in_executor(None, batch.next)
                if chunk is None:
                    return
                for raw in chunk:
                    yield make_result(raw, requests[raw[0]])
        finally:
            batch.cancel()

    async def agenerate(self, requests: Requests) -> List[Result]:
        """asyncio form of generate(): `results = await engine.agenerate(requests)`, in input order."""
        requests = _as_list(requests)
        results: List[Optional[Result]] = [None] * len(requests)
        async for result in self.astream(requests):
            results[result.index] = result
        return results  # type: ignore[return-value]

    def _run(self, requests: List[Request], progress: Optional["_Progress"]) -> Iterator[Result]:
        batch = self._submit(requests)
        try:
            while (chunk := batch.next()) is not None:
                for raw in chunk:
                    result = make_result(raw, requests[raw[0]])
                    if progress:
                        progress.add(result)
                    yield result
        finally:
            batch.cancel()
            if progress:
                progress.close()

    def _submit(self, requests: List[Request]):
        for request in requests:
            request.validate()
        return self._handle.submit([self._job(r) for r in requests], self.concurrency)

    def _job(self, request: Request):
        encoded, labels, error = [], [], ""
        try:
            for number, image in enumerate(request.all_images(), 1):
                data, label = image_bytes(image, number)
                encoded.append(data)
                labels.append(label)
            messages = request.messages_json()
        except (OSError, TypeError, ValueError) as e:  # this request's fault: its Result carries the error
            error, messages = f"{type(e).__name__}: {e}", ""
        return _fovea.make_job(
            images=encoded, labels=labels, prompt=request.prompt or "", system=request.system or "",
            messages_json=messages, max_tokens=request.max_tokens, temperature=request.temperature,
            top_p=request.top_p, seed=request.seed, stop=request.stop_list(),
            top_logprobs=0 if request.logprobs is None else max(1, request.logprobs),
            answers=list(request.answers or ()), choices=list(request.choices or ()), tiling=request.tiling or self.tiling,
            max_tiles=request.max_tiles or self.max_tiles or 0, error=error)


def _as_list(requests: Requests) -> List[Request]:
    return [requests] if isinstance(requests, Request) else list(requests)


class _Progress:
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
