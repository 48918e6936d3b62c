"""What generate() and stream() accept, turned into Requests: fovea Requests, plain prompt strings and vLLM-style
prompt dicts ({"prompt": ..., "multi_modal_data": {"image": PIL image or a list}}), with one SamplingParams for
all or one per input, as vLLM's LLM.generate takes them."""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Union

from ._request import Request
from ._sampling import SamplingParams

PromptLike = Union[str, Dict[str, Any], Request]
Prompts = Union[PromptLike, Sequence[PromptLike]]
Sampling = Union[SamplingParams, Sequence[SamplingParams], None]

_LEADING_IMAGE_TAGS = re.compile(r"^(?:<image>\s*)+")
_DICT_KEYS = {"prompt", "multi_modal_data"}


def as_requests(prompts: Prompts, sampling: Sampling) -> List[Request]:
    """Requests in input order. A Request keeps its own generation fields unless `sampling` is given; strings and
    dicts take `sampling`, or vLLM's SamplingParams() defaults."""
    items = [prompts] if isinstance(prompts, (str, dict, Request)) else list(prompts)
    if isinstance(sampling, (list, tuple)):
        if len(sampling) != len(items):
            raise ValueError(f"{len(sampling)} SamplingParams for {len(items)} prompts")
        per_item: List[Optional[SamplingParams]] = list(sampling)
    else:
        per_item = [sampling] * len(items)
    requests = []
    for item, params in zip(items, per_item):
        if params is not None and not isinstance(params, SamplingParams):
            raise TypeError(f"sampling_params must be fovea.SamplingParams, not {type(params).__name__}")
        if isinstance(item, Request):
            requests.append(item if params is None else item.with_sampling(params))
        else:
            requests.append(_from_vllm_prompt(item).with_sampling(params or SamplingParams()))
    return requests


def _from_vllm_prompt(item: Union[str, Dict[str, Any]]) -> Request:
    if isinstance(item, str):
        prompt, images = item, []
    elif isinstance(item, dict):
        unknown = set(item) - _DICT_KEYS
        if unknown:
            raise ValueError(f"prompt dict keys {sorted(unknown)} are not supported (Fovea takes {sorted(_DICT_KEYS)})")
        prompt = item.get("prompt")
        if not isinstance(prompt, str):
            raise ValueError("a prompt dict needs a \"prompt\" string")
        media = item.get("multi_modal_data") or {}
        if set(media) - {"image"}:
            raise ValueError(f"multi_modal_data keys {sorted(set(media) - {'image'})} are not supported (images only)")
        image = media.get("image")
        images = [] if image is None else list(image) if isinstance(image, (list, tuple)) else [image]
    else:
        raise TypeError(f"a prompt must be a str, a dict or a fovea.Request, not {type(item).__name__}")
    return Request(images=images, prompt=_user_text(prompt, len(images)))


def _user_text(prompt: str, images: int) -> str:
    """The user's text of a vLLM-style prompt. Fovea applies the model's chat template itself and puts images at
    the start of the user turn (as InternVL's chat() does), so leading "<image>" placeholders are dropped and
    anything else that belongs to the template is refused rather than templated twice."""
    if "<|im_start|>" in prompt:
        raise ValueError("this prompt already holds a chat template (<|im_start|>); Fovea applies the model's "
                         "template itself: pass the user's text, or a Request with messages=")
    text = _LEADING_IMAGE_TAGS.sub("", prompt, count=1) if images else prompt
    if "<image>" in text:
        raise ValueError("'<image>' placeholders must lead the prompt, one per image (Fovea places images at the "
                         "start of the user turn)")
    return text
