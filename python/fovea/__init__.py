"""Fovea: a fast inference engine for InternVL vision-language models, from Python.

    import fovea
    llm = fovea.Engine("path/to/model", backend="auto")
    results = llm.generate([fovea.Request(image="a.jpg", prompt="Is there a bed?", max_tokens=1)])
    print(results[0].text, results[0].error)

`fovea.ray.Predictor` runs it on a Ray cluster through Ray Data's map_batches (`pip install "fovea[ray]"`).
"""
from ._engine import Engine
from ._request import Request, Result, TokenLogprob
from . import ray  # fovea.ray.Predictor after a plain `import fovea`; it imports Ray itself only when used

__all__ = ["Engine", "Request", "Result", "TokenLogprob"]
__version__ = "0.1.0"
