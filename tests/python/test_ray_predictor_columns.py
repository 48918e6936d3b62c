"""fovea.ray.Predictor without Ray: per-row columns (messages, system, choices, sampling) mean what the same
fields of a fovea.Request mean, the output columns (finish reason, token counts, error kind, choice log-probs,
samples) come from the Results, a bad row fails alone, and `__call__` is a coroutine whose calls overlap: a
second batch is served while the first is still in the engine (observed through the requests an image server
answers and the engine's counters, not through time), which is what keeps an actor's engine full across batches
under Ray Data."""
import asyncio
import http.server
import inspect
import json
import threading

import pytest

np = pytest.importorskip("numpy")
pd = pytest.importorskip("pandas")
Image = pytest.importorskip("PIL.Image")
fovea = pytest.importorskip("fovea", reason="the fovea Python module is not built (needs nanobind)")
import fovea.ray  # noqa: E402

PROMPT = "Is there a bed?"
OPTIONS = dict(backend="cpu", max_tiles=1, kv_blocks=512)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rows")
    paths = []
    for i in range(6):
        paths.append(folder / f"{i}.png")
        Image.new("RGB", (36 + 5 * i, 28 + 3 * i), ((53 * i) % 256, 120, (17 * i) % 256)).save(paths[-1])
    return paths


@pytest.fixture(scope="module")
def predictor(demo_model):
    return fovea.ray.Predictor(str(demo_model), prompt=PROMPT, answers=["yes", "no"], **OPTIONS)


def test_row_columns_mean_what_request_fields_mean(predictor, images):
    image_url = {"type": "image_url", "image_url": {"url": str(images[4])}}
    batch = {
        "image": np.array([p.read_bytes() for p in images[:4]] + [None, images[5].read_bytes()], dtype=object),
        "prompt": np.array(["What is it?", PROMPT, PROMPT, PROMPT, None, PROMPT], dtype=object),
        "system": np.array([None, "Answer briefly.", None, None, None, None], dtype=object),
        "choices": np.array([None, None, json.dumps(["yes", "no", "maybe"]), None, None, None], dtype=object),
        "messages": np.array([None, None, None, None, [{"role": "user", "content": [image_url, {"type": "text",
                                                                                               "text": "Why?"}]}],
                              None], dtype=object),
        "sampling": np.array([{"max_tokens": 3, "temperature": 0.0}, None, None,
                              json.dumps({"n": 2, "temperature": 1.0, "seed": 5, "max_tokens": 4}), None,
                              {"top_k": -7}], dtype=object),
    }
    out = asyncio.run(predictor(batch))
    assert list(out) == [c for c in batch if c != "image"] + list(fovea.ray.OUTPUT_COLUMNS)
    assert out["error"][5] is not None and "top_k" in out["error"][5] and out["error_kind"][5] == "invalid_request"
    assert all(e is None for e in out["error"][:5]), out["error"]

    llm = predictor.engine
    expected = llm.generate([
        fovea.Request(image=images[0], prompt="What is it?", max_tokens=3, answers=["yes", "no"]),
        fovea.Request(image=images[1], prompt=PROMPT, system="Answer briefly.", answers=["yes", "no"]),
        fovea.Request(image=images[2], prompt=PROMPT, choices=["yes", "no", "maybe"]),
        fovea.Request(image=images[3], prompt=PROMPT, n=2, temperature=1.0, seed=5, max_tokens=4,
                      answers=["yes", "no"]),
        fovea.Request(messages=[{"role": "user", "content": [image_url, {"type": "text", "text": "Why?"}]}],
                      answers=["yes", "no"]),
    ])
    for i, want in enumerate(expected):
        assert out["answer"][i] == want.text, i
        if i != 2:  # a choices row has choice_logprobs instead
            assert json.loads(out["answer_logprobs"][i]) == want.answer_logprobs, i
        assert out["finish_reason"][i] == want.finish_reason
        assert out["prompt_tokens"][i] == want.prompt_tokens and out["completion_tokens"][i] == want.completion_tokens
    assert json.loads(out["choice_logprobs"][2]) == expected[2].choice_logprobs and out["choice_logprobs"][0] is None
    assert json.loads(out["samples"][3]) == [o.text for o in expected[3].outputs] and out["samples"][0] is None
    assert out["prompt_tokens"][1] != out["prompt_tokens"][2], "the system text changed the prompt"
    assert out["completion_tokens"].dtype == np.int64

    frame = predictor.predict(pd.DataFrame({"image": [images[0].read_bytes()], "prompt": ["What is it?"]}))
    one, = llm.generate([fovea.Request(image=images[0], prompt="What is it?", answers=["yes", "no"])])
    assert list(frame["answer"]) == [one.text] and out["answer_logprobs"][2] is None
    assert list(frame.columns) == ["prompt"] + list(fovea.ray.OUTPUT_COLUMNS)


class GatedImages:
    """Serves one PNG, holding every answer until `release` is set: requests for these images cannot reach the
    engine before then."""

    def __init__(self, png):
        self.png, self.release = png, threading.Event()
        gate = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                gate.release.wait(timeout=120)
                self.send_response(200)
                self.send_header("Content-Length", str(len(gate.png)))
                self.end_headers()
                self.wfile.write(gate.png)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.thread.join()


def test_calls_overlap_so_the_engine_never_drains(demo_model, images):
    """Ray Data runs an async __call__ several batches at a time on one actor. Batch A's images are held by the
    server; batch B, submitted after A, finishes while A's requests are still unanswered, and the engine's
    counters show B's requests in it before A's were. A synchronous __call__ would have served A first."""
    assert inspect.iscoroutinefunction(fovea.ray.Predictor.__call__)
    gate = GatedImages(images[0].read_bytes())
    try:
        predictor = fovea.ray.Predictor(str(demo_model), prompt=PROMPT, fetch_retries=0, **OPTIONS)
        batch_a = {"image": np.array([f"{gate.base}/a{i}.png" for i in range(4)], dtype=object)}
        batch_b = {"image": np.array([p.read_bytes() for p in images[1:5]], dtype=object)}

        async def main():
            first = asyncio.create_task(predictor(batch_a))
            second = await predictor(batch_b)  # A's call is running: its images are being fetched
            stats = predictor.engine.stats()
            assert not first.done(), "A cannot finish before its images are released"
            assert stats["requests_finished"] == 4 and stats["requests_submitted"] == 4, stats
            gate.release.set()
            return await first, second

        out_a, out_b = asyncio.run(main())
    finally:
        gate.close()
    assert all(e is None for e in out_b["error"]) and all(e is None for e in out_a["error"]), list(out_a["error"])
    assert predictor.engine.stats()["requests_finished"] == 8
