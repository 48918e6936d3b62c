"""Fovea: a fast inference engine for InternVL vision-language models, from Python.

    import fovea
    llm = fovea.Engine("path/to/model", backend="auto")
    results = llm.generate([fovea.Request(image="a.jpg", prompt="Is there a bed?", max_tokens=1)])
    print(results[0].text, results[0].error)

vLLM's offline API reads the same (`from fovea import Engine as LLM, SamplingParams`;
`llm.generate(["prompt", ...], SamplingParams(temperature=0.8, top_p=0.95))`; `out.outputs[0].text`).
`fovea.ray.Predictor` runs it on a Ray cluster through Ray Data's map_batches (`pip install "fovea[ray]"`).
"""
from ._engine import Engine
from ._request import Request, Result, TokenLogprob
from ._sampling import CompletionOutput, Logprob, SamplingParams, StreamDelta
from ._tokenizer import Tokenizer
from . import ray  # fovea.ray.Predictor after a plain `import fovea`; it imports Ray itself only when used

LLM = Engine  # vLLM's name

__all__ = ["Engine", "LLM", "Request", "Result", "TokenLogprob", "SamplingParams", "CompletionOutput", "Logprob",
           "StreamDelta", "Tokenizer"]
__version__ = "0.1.0"
