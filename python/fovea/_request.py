"""What one generation asks for (Request) and gives back (Result), and how Python images become encoded bytes."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

# A path (str or PathLike), an http://, https:// or s3://bucket/key URL (downloaded ahead of the engine with
# retries; TLS roots from FOVEA_CA_BUNDLE, S3 keys and endpoint from the usual AWS_* variables or ~/.aws), the
# encoded file's bytes, a numpy HWC uint8 array (RGB, RGBA or HW grey) or a PIL image.
ImageLike = Any

TILINGS = ("official", "compact")
URL_SCHEMES = ("http", "https", "s3")


@dataclasses.dataclass
class Request:
    """One generation: images, a prompt (or OpenAI-style chat messages) and sampling parameters.

    Names follow vLLM's SamplingParams where the meaning is the same. `answers` asks for the log-probability of
    each given answer's first token (e.g. ["yes", "no"]); `logprobs=n` returns the n most likely tokens at each
    generated position. `tiling` ("official" or "compact") and `max_tiles` override the Engine's defaults.
    """

    image: Optional[ImageLike] = None
    prompt: Optional[str] = None
    images: Sequence[ImageLike] = ()
    messages: Optional[List[Dict[str, Any]]] = None
    system: Optional[str] = None
    max_tokens: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    stop: Union[str, Sequence[str], None] = None
    logprobs: Optional[int] = None
    answers: Optional[Sequence[str]] = None
    # The answer is the most likely of these (each scored over all its tokens as a continuation of the prompt);
    # Result.choice_logprobs has every choice's total log-probability (vLLM's guided choice, scored exactly).
    choices: Optional[Sequence[str]] = None
    tiling: Optional[str] = None
    max_tiles: Optional[int] = None

    def validate(self) -> None:
        """Raises ValueError for parameters no engine could run (bad images only fail their own Result)."""
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        if not (self.temperature >= 0 and math.isfinite(self.temperature)):
            raise ValueError("temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if self.logprobs is not None and self.logprobs < 0:
            raise ValueError("logprobs must be >= 0")
        if self.tiling is not None and self.tiling not in TILINGS:
            raise ValueError(f"tiling must be one of {TILINGS}")
        if self.max_tiles is not None and self.max_tiles < 1:
            raise ValueError("max_tiles must be at least 1")
        if self.messages is not None and self.prompt is not None:
            raise ValueError("give a prompt or messages, not both")
        if self.seed < 0:
            raise ValueError("seed must be >= 0")

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
    decoded), and `error_kind` says whose fault: "invalid_request" (also any input rejected before the engine),
    "invalid_image", "context_length_exceeded" (retrying it unchanged fails the same way), "engine_failed" (the
    device failed; another engine may serve it) or "internal". `index` is the request's position in the call's
    input. `answer_logprobs` maps each of the
    request's `answers` to its log-probability (-inf where it is not a single known token); `logprobs` is None
    unless the request asked for it."""

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

    @property
    def ok(self) -> bool:
        return self.error is None


def make_result(raw: Tuple, request: Request) -> Result:
    """A Result from the native tuple (python/bindings.cc, Batch::convert)."""
    (index, text, tokens, logprobs, answers, finish_reason, error, prompt_tokens, completion_tokens, ms,
     choices, error_kind) = raw
    token_logprobs = None
    if request.logprobs is not None:
        token_logprobs = [TokenLogprob(token, token_text, value,
                                       [TokenLogprob(t, s, v) for t, s, v in top[:request.logprobs]])
                          for token, token_text, value, top in logprobs]
    answer_logprobs = {a: answers.get(a, -math.inf) for a in (request.answers or ())} if error is None else {}
    choice_logprobs = dict(zip(request.choices or (), choices)) if error is None else {}
    return Result(index, text, tokens, token_logprobs, answer_logprobs, finish_reason, error, prompt_tokens,
                  completion_tokens, ms, choice_logprobs, error_kind)


def image_bytes(image: ImageLike, number: int) -> Tuple[bytes, str]:
    """(encoded bytes, label for error messages). Arrays and PIL images become a lossless 24-bit BMP, which the
    engine decodes exactly. Raises OSError/TypeError/ValueError for this request's Result."""
    if isinstance(image, (bytes, bytearray, memoryview)):
        return bytes(image), f"image #{number} (bytes)"
    if isinstance(image, str) and image.split("://", 1)[0].lower() in URL_SCHEMES and "://" in image:
        return b"", image  # the native Batch downloads it (empty bytes + the URL as label)
    if isinstance(image, (str, os.PathLike)):
        path = os.fspath(image)
        with open(path, "rb") as f:
            return f.read(), path
    if hasattr(image, "convert") and hasattr(image, "mode"):  # PIL.Image.Image, without importing PIL
        import numpy as np
        return bmp_from_array(np.asarray(image.convert("RGB"))), f"image #{number} (PIL {image.mode})"
    if hasattr(image, "__array_interface__") or type(image).__module__ == "numpy":
        import numpy as np
        return bmp_from_array(np.asarray(image)), f"image #{number} (array)"
    raise TypeError(f"image #{number}: unsupported type {type(image).__name__} (a path, bytes, a numpy HWC uint8 "
                    "array or a PIL image)")


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
