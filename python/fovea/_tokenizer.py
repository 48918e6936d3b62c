"""Engine.tokenizer: the model's tokenizer and chat template, as the engine uses them."""
from __future__ import annotations

import json
from typing import Any, Dict, List, Sequence, Union

from . import _fovea


class Tokenizer:
    """Encodes and decodes with the model's own tokenizer (the one the engine runs) and builds its chat prompt.
    Method names and arguments follow Hugging Face tokenizers where the meaning is the same."""

    def __init__(self, model_dir: str):
        self._handle = _fovea.TokenizerHandle(model_dir)

    @property
    def vocab_size(self) -> int:
        return self._handle.vocab_size()

    @property
    def bos_token_id(self):
        bos = self._handle.bos_id()
        return None if bos < 0 else bos

    @property
    def eos_token_ids(self) -> List[int]:
        """The ids that end generation (the model's EOS and the template's end-of-turn)."""
        return list(self._handle.eos_ids())

    def encode(self, text: str, add_special_tokens: bool = False, allow_special: bool = False) -> List[int]:
        """Token ids of `text`. add_special_tokens puts the model's BOS first (when it has one); allow_special
        turns special tokens written in the text ("<|im_end|>") into their ids instead of plain text."""
        ids = list(self._handle.encode(text, allow_special))
        bos = self.bos_token_id
        return [bos] + ids if add_special_tokens and bos is not None else ids

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return self._handle.decode([int(t) for t in token_ids], skip_special_tokens)

    def token_to_id(self, token: str):
        """The id of one vocabulary piece or special token, None when there is none."""
        token_id = self._handle.token_id(token)
        return None if token_id < 0 else token_id

    def apply_chat_template(self, messages: List[Dict[str, Any]], tokenize: bool = True,
                            add_generation_prompt: bool = True) -> Union[str, List[int]]:
        """The prompt the engine builds for OpenAI-style `messages` (system, then the user turn, then the
        assistant's prefix). As text, each image is InternVL's "<image>" placeholder at the start of the user
        turn; as token ids (tokenize=True) only without images, whose token count depends on their tiling (a
        Result's prompt_token_ids has it)."""
        if not add_generation_prompt:
            raise ValueError("Fovea's chat prompts always end with the assistant's prefix (add_generation_prompt)")
        system, user, images = _fovea.chat_parts(json.dumps(messages))
        if tokenize and images:
            raise ValueError("an image's token count depends on its tiling: use tokenize=False, or generate() and "
                             "Result.prompt_token_ids")
        ids = self._handle.chat_ids(system, "<image>\n" * images + user)
        return list(ids) if tokenize else self.decode(ids)
