"""fovea.Engine: load a model once, then generate for many requests (blocking, streaming or asyncio)."""
from __future__ import annotations

import asyncio
import json
import os
from typing import AsyncIterator, Iterator, List, Optional, Sequence, Union

from . import _fovea
from ._call import Call, Progress
from ._prompts import Prompts, Sampling, as_requests
from ._request import TILINGS, Request, Result
from ._sampling import SamplingParams, StreamDelta
from ._tokenizer import Tokenizer

Requests = Union[Request, Sequence[Request]]


class Engine:
    """An InternVL model loaded on one backend, serving many requests at once (continuous batching).

    `model` is a checkpoint directory. `backend` is "cpu", "cuda" or "auto". `gpus` ("all", "0,1,3" or a list
    of ints) and `replicas` (CPU engines) ask for data parallelism. `quantization` is None (the checkpoint's
    dtype) or a name `fovea run --quantization` takes: a W8A8 recipe "fp8" (= "fp8-channel"), "fp8-tensor",
    "fp8-channel", "fp8-block", "fp8-channel-act128" or "fp8-all", or "w4a16" (the LLM's projections 4-bit: a
    4-bit AWQ/GPTQ checkpoint kept packed, or 4-bit dummy weights); `w4` ("auto", "packed", "dequantize") says
    how a 4-bit AWQ/GPTQ checkpoint loads, `batch_invariant=True` makes outputs independent of batch-mates.
    `tiling` and `max_tiles` are the defaults for requests that do not set them. `concurrency` is how many
    requests of one call are in the engine at once (as `fovea run --concurrency`).

    URL images (http://, https://, s3://bucket/key) are downloaded ahead of the engine, as `fovea run` does it and
    with its options: `ca_file` (PEM roots; default FOVEA_CA_BUNDLE or the system's), `s3_endpoint` (default
    AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL), `fetch_timeout` (seconds per attempt), `fetch_retries`,
    `fetch_parallel` (downloads at once), `prefetch` (requests fetched ahead), `max_image_bytes`.
    With several engines (gpus / replicas), a request whose engine failed (its device) runs again on another
    engine `engine_failure_retries` times (the dispatcher's retry, the same for `fovea run`, `serve` and `bench`).

    Further keyword arguments set engine options of the same name (kv_blocks, max_batch_seqs,
    preprocess_threads, prefix_cache, cuda_graphs, ...). vLLM's `LLM(model=..., trust_remote_code=True)` reads
    the same (Fovea runs no model code; tensor_parallel_size must be 1: use gpus= for data parallelism).
    Loading releases the GIL; use the engine as a context manager or call close() to free it early.
    """

    def __init__(self, model: Union[str, "os.PathLike[str]"], backend: str = "auto",
                 gpus: Union[str, Sequence[int], None] = None, replicas: int = 1, quantization: Optional[str] = None,
                 tiling: str = "official", max_tiles: Optional[int] = None, concurrency: int = 64, *,
                 ca_file: Optional[str] = None, s3_endpoint: Optional[str] = None, fetch_timeout: float = 60.0,
                 fetch_retries: int = 3, fetch_parallel: int = 8, prefetch: int = 32,
                 max_image_bytes: int = 64 << 20, engine_failure_retries: int = 1,
                 trust_remote_code: bool = False, tensor_parallel_size: int = 1, **options):
        if backend not in ("auto", "cpu", "cuda"):
            raise ValueError("backend must be 'auto', 'cpu' or 'cuda'")
        if tiling not in TILINGS:
            raise ValueError(f"tiling must be one of {TILINGS}")
        if replicas < 1 or concurrency < 1 or (max_tiles is not None and max_tiles < 1):
            raise ValueError("replicas, concurrency and max_tiles must be at least 1")
        if tensor_parallel_size != 1:
            raise ValueError("Fovea runs a whole model per GPU: tensor_parallel_size must be 1 (gpus= spreads "
                             "requests over several)")
        if not (fetch_timeout > 0 and fetch_retries >= 0 and fetch_parallel >= 1 and prefetch >= 1
                and max_image_bytes >= 1 and engine_failure_retries >= 0):
            raise ValueError("fetch_timeout, fetch_parallel, prefetch and max_image_bytes must be positive, "
                             "fetch_retries and engine_failure_retries >= 0")
        config = _fovea.EngineConfig()
        config.model_dir = os.fspath(model)
        config.backend = backend
        config.gpus = "" if gpus is None else gpus if isinstance(gpus, str) else ",".join(str(g) for g in gpus)
        config.replicas = replicas
        config.quantization = quantization or "none"
        config.engine_failure_retries = engine_failure_retries
        # Test-only fault hook: engine K of the service fails as if its device had, after S scheduler steps.
        fail_engine, fail_after_steps = options.pop("_inject_engine_failure", (0, 0))
        for name, value in options.items():
            if name.startswith("_") or not hasattr(config, name):
                raise TypeError(f"Engine() got an unknown option {name!r}")
            setattr(config, name, value)
        self.tiling, self.max_tiles, self.concurrency = tiling, max_tiles, concurrency
        self._options = dict(ca_file=os.fspath(ca_file) if ca_file else "", s3_endpoint=s3_endpoint or "",
                             fetch_timeout=float(fetch_timeout), fetch_retries=fetch_retries,
                             fetch_parallel=fetch_parallel, prefetch=prefetch, max_image_bytes=max_image_bytes)
        self._model_dir = config.model_dir
        self._tokenizer: Optional[Tokenizer] = None
        self._handle = _fovea.EngineHandle(config, fail_engine, fail_after_steps)

    @property
    def model_name(self) -> str:
        return self._handle.model_name()

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer and chat template (loaded on first use)."""
        if self._tokenizer is None:
            self._tokenizer = Tokenizer(self._model_dir)
        return self._tokenizer

    def get_tokenizer(self) -> Tokenizer:
        """vLLM's name for `tokenizer`."""
        return self.tokenizer

    def stats(self) -> dict:
        """Engine counters: requests, tokens (prompt, computed, reused from the prefix cache), cache hits, queue
        depth, KV blocks, time per stage, health; behind a data-parallel dispatcher each engine's own under
        "engines". fovea._fovea.stats_fields() lists each key with its kind and meaning."""
        return json.loads(self._handle.stats_json())

    def close(self) -> None:
        """Waits for requests in flight and frees the model."""
        self._handle.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def generate(self, prompts: Prompts, sampling_params: Sampling = None, use_tqdm: bool = False, *,
                 progress: bool = False) -> List[Result]:
        """Runs every prompt and returns their Results in input order, as vLLM's LLM.generate: `prompts` are
        fovea Requests, prompt strings (the user's text: Fovea applies the chat template) or vLLM-style dicts
        {"prompt": ..., "multi_modal_data": {"image": PIL image or list}}, one or a list; `sampling_params` one
        SamplingParams for all or one per prompt (a Request keeps its own fields when it is None; strings and
        dicts then take vLLM's defaults). Blocks; the GIL is released while the engine works. A request that
        fails (e.g. a corrupt image) has Result.error set; nothing raises for the batch, except ValueError for
        parameters no request could run with. `use_tqdm` / `progress` show a progress bar."""
        requests = as_requests(prompts, sampling_params)
        results: List[Optional[Result]] = [None] * len(requests)
        bar = Progress(len(requests)) if progress or use_tqdm else None
        try:
            for result in self._run(requests, deltas=False):
                results[result.index] = result
                if bar:
                    bar.add(result)
        finally:
            if bar:
                bar.close()
        return results  # type: ignore[return-value]

    def chat(self, messages, sampling_params: Sampling = None, use_tqdm: bool = False) -> List[Result]:
        """vLLM's LLM.chat: one conversation (a list of OpenAI-style messages, images as image_url parts) or a list
        of them, with vLLM's SamplingParams() defaults unless sampling_params is given."""
        conversations = [messages] if messages and isinstance(messages[0], dict) else messages
        return self.generate([Request(messages=list(c)) for c in conversations], sampling_params or SamplingParams(),
                             use_tqdm)

    def stream(self, prompts: Prompts, sampling_params: Sampling = None, *,
               deltas: bool = False) -> Iterator[Union[Result, StreamDelta]]:
        """Yields each prompt's Result as soon as it finishes (Result.index says which); with deltas=True, a
        StreamDelta for every piece of new text instead (its `index` and `output_index` say which prompt and
        sample; the last one of a prompt carries its Result). Leaving the loop early cancels the requests not yet
        started."""
        return self._run(as_requests(prompts, sampling_params), deltas)

    async def astream(self, prompts: Prompts, sampling_params: Sampling = None, *,
                      deltas: bool = False) -> AsyncIterator[Union[Result, StreamDelta]]:
        """asyncio form of stream(): `async for result in engine.astream(prompts)`; waiting happens on a worker
        thread, so the event loop keeps running."""
        call = self._submit(as_requests(prompts, sampling_params), deltas)
        try:
            while True:
                chunk = await asyncio.get_running_loop().run_in_executor(None, call.batch.next)
                if chunk is None:
                    return
                for event in call.events(chunk):
                    yield event
        finally:
            call.batch.cancel()

    async def agenerate(self, prompts: Prompts, sampling_params: Sampling = None) -> List[Result]:
        """asyncio form of generate(): `results = await engine.agenerate(prompts, sampling_params)`."""
        requests = as_requests(prompts, sampling_params)
        results: List[Optional[Result]] = [None] * len(requests)
        async for result in self.astream(requests):
            results[result.index] = result
        return results  # type: ignore[return-value]

    def _run(self, requests: List[Request], deltas: bool) -> Iterator[Union[Result, StreamDelta]]:
        call = self._submit(requests, deltas)
        try:
            while (chunk := call.batch.next()) is not None:
                yield from call.events(chunk)
        finally:
            call.batch.cancel()

    def _submit(self, requests: List[Request], deltas: bool) -> Call:
        options = _fovea.BatchOptions()
        for name, value in self._options.items():
            setattr(options, name, value)
        options.concurrency = self.concurrency
        options.deltas = deltas
        return Call(self._handle, requests, options, self.tiling, self.max_tiles)
