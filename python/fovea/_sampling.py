"""vLLM's vocabulary in Fovea: SamplingParams as vLLM users write it, and the output pieces a vLLM script reads
(CompletionOutput, Logprob) plus the token-delta events of Engine.stream(..., deltas=True)."""
from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any, Dict, List, Optional, Sequence, Union

# The generation fields SamplingParams and Request share (same names, same meaning).
SAMPLING_FIELDS = ("n", "temperature", "top_p", "top_k", "min_p", "seed", "max_tokens", "stop", "stop_token_ids",
                   "ignore_eos", "repetition_penalty", "presence_penalty", "frequency_penalty", "logprobs", "choices")

# vLLM's max_tokens=None: as many as the context leaves (the engine clamps to the model's context).
UNLIMITED_TOKENS = 2**31 - 1
MAX_SEED = 2**64 - 1


@dataclasses.dataclass
class SamplingParams:
    """How to generate, with vLLM's names, defaults and meanings (vllm.SamplingParams):

    n samples per prompt (seeds seed, seed+1, ... when a seed is given; the prompt's KV is shared);
    temperature (0: greedy), top_p, top_k (0 or -1: all), min_p; repetition_penalty (over prompt and output),
    presence_penalty, frequency_penalty (over the output), applied before sampling and to greedy choices too;
    seed (None: a fresh random one); max_tokens (None: up to the context); stop strings (not in the text),
    stop_token_ids, ignore_eos; logprobs (the n most likely tokens per position, the model's own log-probs).
    Fovea's extension: choices, the answer is the most likely of these strings, each scored over all its tokens
    (as vLLM's guided choice, but exact: Result.choice_logprobs has every total)."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: Optional[int] = None
    max_tokens: Optional[int] = 16
    stop: Union[str, Sequence[str], None] = None
    stop_token_ids: Optional[Sequence[int]] = None
    ignore_eos: bool = False
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logprobs: Optional[int] = None
    choices: Optional[Sequence[str]] = None

    def __post_init__(self):
        check_sampling(self)

    def fields(self) -> Dict[str, Any]:
        """The generation fields as Request takes them."""
        values = {name: getattr(self, name) for name in SAMPLING_FIELDS}
        if values["max_tokens"] is None:
            values["max_tokens"] = UNLIMITED_TOKENS
        return values


def check_sampling(p: Any) -> None:
    """Raises ValueError for generation fields no engine could run (vLLM's ranges)."""
    def check(name: str, rule: str, ok, integer: bool = False) -> None:
        value = getattr(p, name)
        kind_ok = isinstance(value, numbers.Integral) if integer else (isinstance(value, numbers.Real)
                                                                        and math.isfinite(value))
        if isinstance(value, bool) or not kind_ok or not ok(value):
            raise ValueError(f"{name} must be {rule}, got {value!r}")

    check("n", "an integer >= 1", lambda v: v >= 1, integer=True)
    check("temperature", ">= 0", lambda v: v >= 0)
    check("top_p", "in (0, 1]", lambda v: 0 < v <= 1)
    check("top_k", "-1, 0 (every token) or a positive integer", lambda v: v >= -1, integer=True)
    check("min_p", "in [0, 1]", lambda v: 0 <= v <= 1)
    check("repetition_penalty", "> 0", lambda v: v > 0)
    check("presence_penalty", "in [-2, 2]", lambda v: -2 <= v <= 2)
    check("frequency_penalty", "in [-2, 2]", lambda v: -2 <= v <= 2)
    if p.max_tokens is not None:
        check("max_tokens", "at least 1", lambda v: v >= 1, integer=True)
    if p.seed is not None:
        check("seed", "in [0, 2**64)", lambda v: 0 <= v <= MAX_SEED, integer=True)
    if p.logprobs is not None:
        check("logprobs", ">= 0", lambda v: v >= 0, integer=True)
    if p.stop_token_ids is not None and not all(isinstance(t, numbers.Integral) and t >= 0 for t in p.stop_token_ids):
        raise ValueError("stop_token_ids must be non-negative token ids")
    if p.choices is not None and p.n != 1:
        raise ValueError("choices score every choice exactly: n must be 1")


@dataclasses.dataclass
class Logprob:
    """vLLM's Logprob: one token's log-probability, its rank among the vocabulary (1 = most likely; None when
    the engine did not rank it) and its text."""

    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


@dataclasses.dataclass
class CompletionOutput:
    """One sample of a Result, as vLLM's CompletionOutput: text, token_ids, finish_reason ("stop", "length",
    "cancelled", "error"), cumulative_logprob and logprobs (a {token_id: Logprob} per position, the chosen token
    and the most likely ones) when logprobs were asked for."""

    index: int
    text: str
    token_ids: List[int]
    cumulative_logprob: Optional[float]
    logprobs: Optional[List[Dict[int, Logprob]]]
    finish_reason: Optional[str]
    stop_reason: Union[int, str, None] = None
    error: Optional[str] = None
    error_kind: Optional[str] = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclasses.dataclass
class StreamDelta:
    """One event of Engine.stream(..., deltas=True): new text and token ids of sample `output_index` of input
    `index`. `restart`: that sample's engine failed and it runs again elsewhere, so what it streamed so far is
    void. The last event of a sample has finished=True (and no new text); the one that completes the input's
    last sample carries the whole Result in `result`."""

    index: int
    output_index: int = 0
    text: str = ""
    token_ids: List[int] = dataclasses.field(default_factory=list)
    logprobs: Optional[list] = None
    finished: bool = False
    finish_reason: Optional[str] = None
    restart: bool = False
    result: Optional[Any] = None
