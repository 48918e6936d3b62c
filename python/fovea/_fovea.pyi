"""Types of the native module (python/bindings.cc, python/batch.cc); use fovea.Engine instead."""
from typing import Dict, List, Optional, Tuple, Union

class EngineConfig:
    model_dir: str
    backend: str
    gpus: str
    replicas: int
    kv_blocks: int
    block_size: int
    max_step_tokens: int
    max_batch_seqs: int
    preprocess_threads: int
    prefix_cache: bool
    vision_cache_tiles: int
    max_queue: int
    engine_failure_retries: int
    max_image_pixels: int
    cuda_graphs: bool
    vit_graphs: bool
    batch_invariant: bool
    gpu_normalize: bool
    quantization: str
    w4: str
    load_format: str
    memory_limit_bytes: int
    def __init__(self) -> None: ...

class GenerationParams:
    max_tokens: int
    temperature: float
    top_p: float
    top_k: int
    min_p: float
    repetition_penalty: float
    presence_penalty: float
    frequency_penalty: float
    seed: Optional[int]
    stop: List[str]
    stop_token_ids: List[int]
    answers: List[str]
    choices: List[str]
    top_logprobs: int
    ignore_eos: bool
    return_prompt_token_ids: bool
    def __init__(self) -> None: ...

class BatchOptions:
    concurrency: int
    deltas: bool
    ca_file: str
    s3_endpoint: str
    fetch_timeout: float
    fetch_retries: int
    fetch_parallel: int
    prefetch: int
    max_image_bytes: int
    def __init__(self) -> None: ...

class Job: ...

def make_job(*, images: List[bytes], labels: List[str], prompt: str, system: str, messages_json: str,
             params: GenerationParams, tiling: str, max_tiles: int, max_image_bytes: int, error: str,
             error_kind: str = "invalid_request") -> Job: ...

def chat_parts(messages_json: str) -> Tuple[str, str, int]: ...
def stats_fields() -> List[Tuple[str, str, str]]: ...
def read_image_file(path: str, max_bytes: int) -> bytes: ...

RawLogprobs = List[Tuple[int, str, float, List[Tuple[int, str, float]]]]
# A finished job: (index, text, tokens, logprobs, answer_logprobs, finish_reason, error, prompt_tokens,
#  completion_tokens, ms, choice_logprobs, error_kind, prompt_token_ids)
RawResult = Tuple[int, str, List[int], RawLogprobs, Dict[str, float], str, Optional[str], int, int, float, List[float],
                  Optional[str], List[int]]
# With BatchOptions.deltas: ("delta", index, text, tokens, logprobs) and ("restart", index)
RawDelta = Union[Tuple[str, int, str, List[int], RawLogprobs], Tuple[str, int]]

class Batch:
    def next(self) -> Optional[List[Union[RawResult, RawDelta]]]: ...
    def cancel(self) -> None: ...
    def __len__(self) -> int: ...

class TokenizerHandle:
    def __init__(self, model_dir: str) -> None: ...
    def encode(self, text: str, allow_special: bool) -> List[int]: ...
    def decode(self, ids: List[int], skip_special: bool) -> str: ...
    def chat_ids(self, system: str, user: str) -> List[int]: ...
    def token_id(self, piece: str) -> int: ...
    def vocab_size(self) -> int: ...
    def bos_id(self) -> int: ...
    def eos_ids(self) -> List[int]: ...

class EngineHandle:
    def __init__(self, config: EngineConfig, _fail_engine: int = 0, _fail_after_steps: int = 0) -> None: ...
    def submit(self, jobs: List[Job], options: BatchOptions) -> Batch: ...
    def model_name(self) -> str: ...
    def token_text(self, token: int) -> str: ...
    def stats_json(self) -> str: ...
    def close(self) -> None: ...
