"""Types of the native module (python/bindings.cc); use fovea.Engine instead."""
from typing import Dict, List, Optional, Tuple

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
    max_image_pixels: int
    cuda_graphs: bool
    vit_graphs: bool
    gpu_normalize: bool
    quantization: str
    w4: str
    load_format: str
    memory_limit_bytes: int
    def __init__(self) -> None: ...

class Job: ...

def make_job(*, images: List[bytes], labels: List[str], prompt: str, system: str, messages_json: str,
             max_tokens: int, temperature: float, top_p: float, seed: int, stop: List[str], top_logprobs: int,
             answers: List[str], choices: List[str], tiling: str, max_tiles: int, error: str) -> Job: ...

# (index, text, tokens, [(token, text, logprob, [(token, text, logprob)])], answer_logprobs, finish_reason, error,
#  prompt_tokens, completion_tokens, ms, choice_logprobs, error_kind)
RawResult = Tuple[int, str, List[int], List[Tuple[int, str, float, List[Tuple[int, str, float]]]], Dict[str, float],
                  str, Optional[str], int, int, float, List[float], Optional[str]]

class Batch:
    def next(self) -> Optional[List[RawResult]]: ...
    def cancel(self) -> None: ...
    def __len__(self) -> int: ...

class EngineHandle:
    def __init__(self, config: EngineConfig) -> None: ...
    def submit(self, jobs: List[Job], concurrency: int) -> Batch: ...
    def model_name(self) -> str: ...
    def token_text(self, token: int) -> str: ...
    def stats(self) -> Dict[str, int]: ...
    def close(self) -> None: ...
