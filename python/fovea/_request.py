"""What one generation asks for (Request) and gives back (Result), and how Python images become encoded bytes."""
from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import math
import numbers
import os
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _fovea
from ._sampling import MAX_SEED, CompletionOutput, Logprob, SamplingParams, check_sampling

# A path (str or PathLike), a base64 data: URL, an http://, https:// or s3://bucket/key URL (downloaded ahead of
# the engine with retries; TLS roots and S3 endpoint from the Engine's arguments, else FOVEA_CA_BUNDLE and the
# usual AWS_* variables or ~/.aws), the encoded file's bytes, a numpy HWC uint8 array (RGB, RGBA or HW grey) or a
# PIL image.
ImageLike = Any

TILINGS = ("official", "compact")
URL_SCHEMES = ("http", "https", "s3")


@dataclasses.dataclass
class Request:
    """One generation: images, a prompt (or OpenAI-style chat messages) and sampling parameters.

    The sampling fields are vLLM's SamplingParams fields with the same meaning (see fovea.SamplingParams), but
    Fovea's defaults for short answers: greedy, one token. `seed` None draws a fresh random seed; `n` samples
    use seeds seed, seed+1, ... `answers` asks for the log-probability of each given answer's first token (e.g.
    ["yes", "no"]); `logprobs=n` returns the n most likely tokens at each generated position. `tiling`
    ("official" or "compact") and `max_tiles` override the Engine's defaults.
    """

    image: Optional[ImageLike] = None
    prompt: Optional[str] = None
    images: Sequence[ImageLike] = ()
    messages: Optional[List[Dict[str, Any]]] = None
    system: Optional[str] = None
    max_tokens: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    seed: Optional[int] = None
    stop: Union[str, Sequence[str], None] = None
    logprobs: Optional[int] = None
    answers: Optional[Sequence[str]] = None
    # The answer is the most likely of these (each scored over all its tokens as a continuation of the prompt);
    # Result.choice_logprobs has every choice's total log-probability (vLLM's guided choice, scored exactly).
    choices: Optional[Sequence[str]] = None
    tiling: Optional[str] = None
    max_tiles: Optional[int] = None
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    stop_token_ids: Optional[Sequence[int]] = None
    ignore_eos: bool = False
    n: int = 1

    def validate(self) -> None:
        """Raises ValueError for parameters no engine could run (bad images only fail their own Result)."""
        check_sampling(self)
        if self.tiling is not None and self.tiling not in TILINGS:
            raise ValueError(f"tiling must be one of {TILINGS}")
        if self.max_tiles is not None and not (isinstance(self.max_tiles, numbers.Integral) and 1 <= self.max_tiles <= 256):
            raise ValueError("max_tiles must be an integer between 1 and 256 (as in every door; the model's "
                             "max_dynamic_patch bounds it)")
        if self.messages is not None and self.prompt is not None:
            raise ValueError("give a prompt or messages, not both")

    def with_sampling(self, sampling: SamplingParams) -> "Request":
        """This request with `sampling`'s generation fields instead of its own."""
        return dataclasses.replace(self, **sampling.fields())

    def sample_seed(self, sample: int) -> Optional[int]:
        """The seed of sample `sample` of `n`: seed + sample (vLLM's parallel sampling), None for a random one."""
        return None if self.seed is None else (self.seed + sample) % (MAX_SEED + 1)

    def all_images(self) -> List[ImageLike]:
        return ([] if self.image is None else [self.image]) + list(self.images)

    def stop_list(self) -> List[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)

    def messages_json(self) -> str:
        """The chat messages as JSON for the native parser ("" when there are none); `system` goes first."""
        if self.messages is None:
            return ""
        messages = list(self.messages)
        if self.system is not None:
            messages.insert(0, {"role": "system", "content": self.system})
        return json.dumps(messages)


@dataclasses.dataclass
class TokenLogprob:
    """A generated token's log-probability and, when asked (Request.logprobs), the most likely alternatives."""

    token: int
    text: str
    logprob: float
    top: List["TokenLogprob"] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Result:
    """The outcome of one Request. `error` is None on success, else a message (e.g. the image could not be
    decoded), and `error_kind` says whose fault: "invalid_request" (a bad parameter, message or image type),
    "invalid_image" (an image that cannot be read, fetched or decoded: a missing file too, as in every door),
    "context_length_exceeded" (retrying it unchanged fails the same way), "engine_failed" (the device failed,
    here and on the engine it was retried on) or "internal". `index` is the request's position in
    the call's input. `answer_logprobs` maps each of the request's `answers` to its log-probability (-inf where it
    is not a single known token); `logprobs` is None unless the request asked for it.

    vLLM's RequestOutput fields too: `outputs` (one CompletionOutput per sample, `n` of them; text, tokens,
    finish_reason and logprobs above are the first sample's), `prompt`, `prompt_token_ids` (the prompt as the
    model saw it: chat template and image tokens included), `request_id`, `finished`. With n > 1,
    completion_tokens counts every sample's tokens and error is the first failed sample's."""

    index: int
    text: str = ""
    tokens: List[int] = dataclasses.field(default_factory=list)
    logprobs: Optional[List[TokenLogprob]] = None
    answer_logprobs: Dict[str, float] = dataclasses.field(default_factory=dict)
    finish_reason: str = ""
    error: Optional[str] = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    ms: float = 0.0
    choice_logprobs: Dict[str, float] = dataclasses.field(default_factory=dict)
    error_kind: Optional[str] = None
    outputs: List[CompletionOutput] = dataclasses.field(default_factory=list)
    prompt: Optional[str] = None
    prompt_token_ids: List[int] = dataclasses.field(default_factory=list)
    request_id: str = ""
    finished: bool = True

    @property
    def ok(self) -> bool:
        return self.error is None


# The native tuple of one finished sample (python/batch.cc, Batch::convert).
(_INDEX, _TEXT, _TOKENS, _LOGPROBS, _ANSWERS, _FINISH, _ERROR, _PROMPT_TOKENS, _COMPLETION_TOKENS, _MS, _CHOICES,
 _ERROR_KIND, _PROMPT_IDS) = range(13)


def token_logprobs(raw_logprobs: list, wanted: Optional[int]) -> Optional[List[TokenLogprob]]:
    """[(token, text, logprob, [(token, text, logprob)])] -> TokenLogprobs with `wanted` alternatives each."""
    if wanted is None:
        return None
    return [TokenLogprob(token, text, value, [TokenLogprob(t, s, v) for t, s, v in top[:wanted]])
            for token, text, value, top in raw_logprobs]


def vllm_logprobs(logprobs: List[TokenLogprob]) -> List[Dict[int, Logprob]]:
    """vLLM's form: per position {token_id: Logprob}, the chosen token and its alternatives ranked 1, 2, ..."""
    positions = []
    for lp in logprobs:
        entry = {alt.token: Logprob(alt.logprob, rank, alt.text) for rank, alt in enumerate(lp.top, 1)}
        if lp.token not in entry:
            entry[lp.token] = Logprob(lp.logprob, None, lp.text)
        positions.append(entry)
    return positions


def completion_output(sample: int, raw: Tuple, request: Request) -> CompletionOutput:
    logprobs = token_logprobs(raw[_LOGPROBS], request.logprobs)
    return CompletionOutput(
        index=sample, text=raw[_TEXT], token_ids=list(raw[_TOKENS]),
        cumulative_logprob=None if logprobs is None else sum(lp.logprob for lp in logprobs),
        logprobs=None if logprobs is None else vllm_logprobs(logprobs), finish_reason=raw[_FINISH] or None,
        error=raw[_ERROR], error_kind=raw[_ERROR_KIND])


def make_result(raws: Sequence[Tuple], request: Request, index: int) -> Result:
    """The Result of `request` (input `index`) from the native tuples of its samples, in sample order."""
    first = raws[0]
    failed = next((raw for raw in raws if raw[_ERROR] is not None), None)
    error, error_kind = (failed[_ERROR], failed[_ERROR_KIND]) if failed is not None else (None, None)
    answers, choices = first[_ANSWERS], first[_CHOICES]
    answer_logprobs = {a: answers.get(a, -math.inf) for a in (request.answers or ())} if error is None else {}
    choice_logprobs = dict(zip(request.choices or (), choices)) if error is None else {}
    prompt_ids = next((list(raw[_PROMPT_IDS]) for raw in raws if raw[_PROMPT_IDS]), [])
    return Result(index, first[_TEXT], list(first[_TOKENS]), token_logprobs(first[_LOGPROBS], request.logprobs),
                  answer_logprobs, first[_FINISH], error, max(raw[_PROMPT_TOKENS] for raw in raws),
                  sum(raw[_COMPLETION_TOKENS] for raw in raws), max(raw[_MS] for raw in raws), choice_logprobs,
                  error_kind, [completion_output(k, raw, request) for k, raw in enumerate(raws)], request.prompt,
                  prompt_ids, str(index), True)


def image_bytes(image: ImageLike, number: int, max_bytes: int = 64 << 20) -> Tuple[bytes, str]:
    """(encoded bytes, label for error messages). Arrays and PIL images become a lossless 24-bit BMP, which the
    engine decodes exactly. Raises OSError/TypeError/ValueError for this request's Result."""
    if isinstance(image, (bytes, bytearray, memoryview)):
        return bytes(image), f"image #{number} (bytes)"
    if isinstance(image, str) and image[:5].lower() == "data:":
        return data_url_bytes(image), f"image #{number} (data: URL)"
    if isinstance(image, str) and image.split("://", 1)[0].lower() in URL_SCHEMES and "://" in image:
        return b"", image  # the native Batch downloads it (empty bytes + the URL as label)
    if isinstance(image, (str, os.PathLike)):
        path = os.fsdecode(os.fspath(image))
        # Not open(): a FIFO or device would block this call forever; the native reader refuses them.
        return _fovea.read_image_file(path, max_bytes), path
    if hasattr(image, "convert") and hasattr(image, "mode"):  # PIL.Image.Image, without importing PIL
        import numpy as np
        return bmp_from_array(np.asarray(image.convert("RGB"))), f"image #{number} (PIL {image.mode})"
    if hasattr(image, "__array_interface__") or type(image).__module__ == "numpy":
        import numpy as np
        return bmp_from_array(np.asarray(image)), f"image #{number} (array)"
    raise TypeError(f"image #{number}: unsupported type {type(image).__name__} (a path, bytes, a numpy HWC uint8 "
                    "array or a PIL image)")


def data_url_bytes(url: str) -> bytes:
    """The bytes of a base64 data: URL (data:image/png;base64,...), as the OpenAI image_url parts carry them."""
    header, sep, payload = url.partition(",")
    if not sep or not header.lower().endswith(";base64"):
        raise ValueError("a data: URL image must be base64 (data:image/...;base64,...)")
    try:
        return base64.b64decode(payload, validate=False)
    except binascii.Error as e:
        raise ValueError(f"invalid base64 in data: URL: {e}") from None


def bmp_from_array(array) -> bytes:
    """HxWx3 (RGB), HxWx4 (RGBA: alpha dropped, as PIL's convert("RGB")) or HxW (grey) uint8 -> top-down
    24-bit BMP."""
    import numpy as np
    if array.dtype != np.uint8:
        raise ValueError(f"image arrays must be uint8, not {array.dtype}")
    if array.ndim == 2:
        array = np.repeat(array[:, :, None], 3, axis=2)
    if array.ndim != 3 or array.shape[2] not in (3, 4) or array.shape[0] < 1 or array.shape[1] < 1:
        raise ValueError(f"image arrays must be HxWx3, HxWx4 or HxW, not shape {array.shape}")
    height, width = array.shape[:2]
    bgr = array[:, :, 2::-1]
    padding = (-width * 3) % 4
    if padding:
        bgr = np.concatenate([bgr.reshape(height, width * 3), np.zeros((height, padding), np.uint8)], axis=1)
    pixels = np.ascontiguousarray(bgr).tobytes()
    header = struct.pack("<2sIHHI", b"BM", 54 + len(pixels), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, width, -height, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
    return header + info + pixels
