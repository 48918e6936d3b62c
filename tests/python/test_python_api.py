"""The Python package (fovea.Engine): results equal `fovea run`'s token for token and log-prob for log-prob; a
corrupt image fails only its own Result; images as paths, bytes, numpy arrays and PIL images give the same
answer; chat messages mean what they mean to `fovea serve`; other Python threads and the asyncio loop run while
the engine works; stream and asyncio forms return every request once."""
import asyncio
import base64
import contextlib
import http.server
import io
import json
import math
import os
import subprocess
import threading

import pytest

np = pytest.importorskip("numpy")
Image = pytest.importorskip("PIL.Image")
fovea = pytest.importorskip("fovea", reason="the fovea Python module is not built (needs nanobind)")
FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")

PROMPT = "Is there a bed?"
ANSWERS = ["yes", "no", "bed"]
ENGINE_OPTIONS = dict(backend="cpu", max_tiles=1, kv_blocks=512, fetch_timeout=10, fetch_retries=0)


def write_images(folder, count):
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        image = Image.new("RGB", (40 + 7 * i, 30 + 3 * i), ((41 * i) % 256, (97 * i) % 256, 150))
        image.paste((255 - 20 * i % 256, 30, 60), (3, 4, 20, 18))
        paths.append(folder / f"img{i:02d}.png")
        image.save(paths[-1])
    return paths


class ImageServer:
    """An HTTP server for one PNG whose handler runs in Python, on another thread (`threaded`) or as a task of
    the asyncio loop. A URL image can only load while the engine call that fetches it lets that Python code run:
    `served` counts the requests answered, events that prove the overlap without reading a clock."""

    def __init__(self, png: bytes):
        self.png, self.served = png, 0

    def response(self, path: str) -> bytes:
        if not path.startswith("/img"):
            return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        self.served += 1
        return (b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nConnection: close\r\nContent-Length: "
                + str(len(self.png)).encode() + b"\r\n\r\n" + self.png)

    @contextlib.contextmanager
    def threaded(self):
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.wfile.write(server.response(self.path))

            def log_message(self, *args):
                pass

        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=httpd.serve_forever)
        thread.start()
        try:
            yield f"http://127.0.0.1:{httpd.server_address[1]}"
        finally:
            httpd.shutdown()
            thread.join()

    async def start_async(self):
        async def handle(reader, writer):
            head = await reader.readuntil(b"\r\n\r\n")
            writer.write(self.response(head.split(b" ")[1].decode()))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return write_images(tmp_path_factory.mktemp("api_images"), 10)


@pytest.fixture(scope="module")
def llm(demo_model):
    with fovea.Engine(demo_model, **ENGINE_OPTIONS) as engine:
        yield engine


def test_results_equal_fovea_run(llm, demo_model, images, tmp_path):
    tasks = [{"id": i, "image": str(p), "prompt": PROMPT, "max_tokens": 1 + i % 3, "answers": ANSWERS}
             for i, p in enumerate(images)]
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    out = tmp_path / "results.jsonl"
    run = subprocess.run([FOVEA_BIN, "run", "--model", str(demo_model), "--input", str(tmp_path / "tasks.jsonl"),
                          "--output", str(out), "--backend", "cpu", "--max-tiles", "1", "--kv-blocks", "512",
                          "--quiet"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}

    results = llm.generate([fovea.Request(image=t["image"], prompt=PROMPT, max_tokens=t["max_tokens"],
                                          answers=ANSWERS) for t in tasks])
    assert [r.index for r in results] == list(range(len(tasks)))
    for result, task in zip(results, tasks):
        record = records[task["id"]]
        assert result.error is None and "error" not in record
        assert result.tokens == record["tokens"] and result.text == record["text"]
        assert list(result.answer_logprobs) == ANSWERS
        for answer in ANSWERS:
            expected = record["logprobs"][answer]
            got = result.answer_logprobs[answer]
            assert (got == expected) if expected is not None else got == -math.inf, (task["id"], answer)
        assert result.completion_tokens == len(result.tokens) and result.prompt_tokens > 0
        assert result.finish_reason in ("stop", "length")
    assert len({json.dumps(r.answer_logprobs) for r in results}) > 1, "different images give different log-probs"


def test_block_size_changes_no_answer(llm, demo_model, images, tmp_path):
    """--block-size (KV positions per cache block) changes where the cache keeps positions, not what attention
    computes: `fovea run` with 8- and 64-position blocks gives the tokens and answer log-probs of the default 16."""
    tasks = [{"id": i, "image": str(p), "prompt": PROMPT, "max_tokens": 3, "answers": ANSWERS}
             for i, p in enumerate(images)]
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    want = llm.generate([fovea.Request(image=t["image"], prompt=PROMPT, max_tokens=3, answers=ANSWERS) for t in tasks])
    for block_size in (8, 64):
        out = tmp_path / f"results{block_size}.jsonl"
        run = subprocess.run([FOVEA_BIN, "run", "--model", str(demo_model), "--input", str(tmp_path / "tasks.jsonl"),
                              "--output", str(out), "--backend", "cpu", "--max-tiles", "1", "--kv-blocks", "512",
                              "--block-size", str(block_size), "--quiet"], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
        for result, task in zip(want, tasks):
            record = records[task["id"]]
            assert record["tokens"] == result.tokens, (block_size, task["id"])
            assert record["logprobs"] == {a: (v if v != -math.inf else None) for a, v in result.answer_logprobs.items()}
    with pytest.raises(RuntimeError, match="--block-size must be 8, 16, 32 or 64, got 12"):
        fovea.Engine(demo_model, backend="cpu", max_tiles=1, kv_blocks=64, block_size=12)


def test_corrupt_and_missing_images_fail_only_their_request(llm, images, tmp_path):
    corrupt = tmp_path / "corrupt.png"
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40)
    requests = [fovea.Request(image=images[0], prompt=PROMPT, max_tokens=2),
                fovea.Request(image=corrupt, prompt=PROMPT),
                fovea.Request(image=images[1], prompt=PROMPT, max_tokens=2),
                fovea.Request(image=tmp_path / "missing.png", prompt=PROMPT),
                fovea.Request(image=b"not an image", prompt=PROMPT),
                fovea.Request(image=np.zeros((4, 4, 2), np.uint8), prompt=PROMPT),
                fovea.Request(image=images[2], prompt=PROMPT, max_tokens=2)]
    results = llm.generate(requests)
    assert [r.ok for r in results] == [True, False, True, False, False, False, True]
    assert "corrupt.png" in results[1].error
    assert "missing.png" in results[3].error
    assert "image #1 (bytes)" in results[4].error and "shape" in results[5].error
    # An image that cannot be read (no file), converted (a bad array) or decoded (by the engine) is invalid_image,
    # as in every door (tests/python/test_doors.py).
    assert [r.error_kind for r in results] == [None, "invalid_image", None, "invalid_image", "invalid_image",
                                               "invalid_image", None]
    alone = llm.generate([requests[0], requests[2], requests[6]])
    assert [r.tokens for r in alone] == [results[0].tokens, results[2].tokens, results[6].tokens]
    with pytest.raises(ValueError):
        llm.generate([fovea.Request(image=images[0], prompt=PROMPT, max_tokens=0)])


def test_fifo_directory_and_device_paths_fail_their_request_at_once(llm, images, tmp_path):
    """A FIFO path used to block open() in Python forever; the native local-file reader refuses it at once."""
    os.mkfifo(tmp_path / "pipe.png")
    requests = [fovea.Request(image=tmp_path / "pipe.png", prompt=PROMPT),
                fovea.Request(image=tmp_path, prompt=PROMPT),
                fovea.Request(image="/dev/zero", prompt=PROMPT),
                fovea.Request(image=str(images[0]) + "\0x", prompt=PROMPT),
                fovea.Request(image=images[0], prompt=PROMPT, max_tokens=2)]
    results = llm.generate(requests)
    assert [r.ok for r in results] == [False, False, False, False, True]
    assert "is not a regular file (a FIFO)" in results[0].error
    assert "is a directory" in results[1].error
    assert "not a regular file (a character device)" in results[2].error
    assert "NUL" in results[3].error
    # An image file that cannot be read is invalid_image, in every door (src/requests/request_images.h).
    assert all(r.error_kind == "invalid_image" for r in results[:4])


def test_image_forms_give_the_same_answer(llm, images):
    path = images[3]
    pil = Image.open(path)
    forms = [str(path), path, path.read_bytes(), np.asarray(pil.convert("RGB")), pil,
             np.asarray(pil.convert("RGBA")), "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()]
    results = llm.generate([fovea.Request(image=f, prompt=PROMPT, max_tokens=3, answers=ANSWERS) for f in forms])
    assert all(r.ok for r in results), [r.error for r in results]
    assert len({(tuple(r.tokens), json.dumps(r.answer_logprobs)) for r in results}) == 1
    odd = np.asarray(Image.open(images[4]).convert("RGB"))[:, :-1]  # a width whose BMP rows need padding
    grey = np.asarray(Image.open(images[4]).convert("L"))
    png = io.BytesIO()
    Image.fromarray(odd).save(png, "PNG")
    grey_png = io.BytesIO()
    Image.fromarray(grey).convert("RGB").save(grey_png, "PNG")
    pairs = llm.generate([fovea.Request(image=x, prompt=PROMPT, answers=ANSWERS)
                          for x in (odd, png.getvalue(), grey, grey_png.getvalue())])
    assert pairs[0].answer_logprobs == pairs[1].answer_logprobs and pairs[0].ok
    assert pairs[2].answer_logprobs == pairs[3].answer_logprobs and pairs[2].ok


def test_chat_messages_and_logprobs(llm, images):
    plain = fovea.Request(image=images[5], prompt=PROMPT, max_tokens=3, logprobs=2)
    chat = fovea.Request(messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": str(images[5])}}, {"type": "text", "text": PROMPT}]}],
        max_tokens=3, logprobs=2)
    bad_chat = fovea.Request(messages=[{"role": "robot", "content": "hi"}])
    a, b, bad = llm.generate([plain, chat, bad_chat])
    assert a.ok and b.ok and a.tokens == b.tokens
    assert "role" in bad.error and bad.error_kind == "invalid_request"
    assert [lp.token for lp in a.logprobs] == a.tokens
    for lp, lp_chat in zip(a.logprobs, b.logprobs):
        assert lp.logprob == lp_chat.logprob and lp.logprob <= 0 and len(lp.top) == 2
        assert lp.top[0].logprob >= lp.top[1].logprob and lp.top[0].logprob >= lp.logprob
    assert "".join(lp.text for lp in a.logprobs) == a.text or a.finish_reason == "stop"


def test_generate_releases_the_gil(llm, images):
    """generate() fetches URL images from a server whose handler is Python code on another thread: had the call
    held the GIL, no image could load (each would fail after its fetch timeout)."""
    server = ImageServer(images[6].read_bytes())
    with server.threaded() as base:
        urls = [f"{base}/img{i}.png" for i in range(4)]
        results = llm.generate([fovea.Request(image=u, prompt=PROMPT, max_tokens=2, answers=ANSWERS) for u in urls])
    assert [r.error for r in results] == [None] * 4
    assert server.served == 4, "every image came from the other Python thread while generate() ran"
    local, = llm.generate([fovea.Request(image=images[6], prompt=PROMPT, max_tokens=2, answers=ANSWERS)])
    assert all((r.tokens, r.answer_logprobs) == (local.tokens, local.answer_logprobs) for r in results)


def test_stream_and_asyncio_forms(llm, images):
    requests = [fovea.Request(image=p, prompt=PROMPT, max_tokens=2, answers=ANSWERS) for p in images]
    expected = [(r.tokens, r.answer_logprobs) for r in llm.generate(requests)]
    streamed = list(llm.stream(requests))
    assert sorted(r.index for r in streamed) == list(range(len(requests)))
    assert all((r.tokens, r.answer_logprobs) == expected[r.index] for r in streamed)

    async def main():
        gathered = await llm.agenerate(requests)
        seen = [r async for r in llm.astream(requests)]
        # The image server is a task of this event loop: the call can only succeed if the loop keeps running.
        server = ImageServer(images[7].read_bytes())
        tcp, base = await server.start_async()
        async with tcp:
            fetched = await llm.agenerate([fovea.Request(image=f"{base}/img{i}.png", prompt=PROMPT, max_tokens=2)
                                           for i in range(3)])
        return gathered, seen, fetched, server.served

    gathered, seen, fetched, served = asyncio.run(main())
    assert [(r.tokens, r.answer_logprobs) for r in gathered] == expected
    assert sorted(r.index for r in seen) == list(range(len(requests)))
    assert [r.error for r in fetched] == [None] * 3 and served == 3, "the event loop stalled while the engine worked"

    # Leaving a stream early cancels what has not started; the engine goes on serving.
    many = [fovea.Request(image=images[i % len(images)], prompt=PROMPT, max_tokens=4) for i in range(60)]
    for result in llm.stream(many):
        break
    assert llm.generate(requests[:1])[0].tokens == expected[0][0]


def test_engine_arguments(tmp_path):
    with pytest.raises(RuntimeError):
        fovea.Engine(tmp_path / "no_model", backend="cpu")
    with pytest.raises(TypeError, match="kv_blokcs"):
        fovea.Engine(tmp_path, backend="cpu", kv_blokcs=4)
    with pytest.raises(ValueError):
        fovea.Engine(tmp_path, backend="tpu")


def test_stats_report_every_counter_and_each_replica(demo_model, images):
    """Engine.stats() carries every EngineStats field (engine/stats_json.h), and behind the data-parallel
    dispatcher each engine's own counters, which add up to the totals."""
    requests = [fovea.Request(image=str(path), prompt=PROMPT, max_tokens=2) for path in images[:6]]
    with fovea.Engine(demo_model, replicas=2, **ENGINE_OPTIONS) as llm:
        results = llm.generate(requests)
        stats = llm.stats()
    assert all(r.error is None for r in results)
    assert stats["requests_finished"] == 6 and stats["requests_failed"] == 0
    assert stats["prompt_tokens"] == stats["prefill_tokens"] + stats["prefix_cache_hit_tokens"] > 0
    assert stats["completion_tokens"] == 12 and stats["kv_blocks_total"] > 0 and stats["kv_blocks_used"] == 0
    assert stats["failed"] is False and stats["llm_ms"] > 0
    assert [e["engine"] for e in stats["engines"]] == ["cpu#0", "cpu#1"]
    # Every field of the one EngineStats table (engine/stats_fields.h), for the total and for each engine.
    from fovea import _fovea
    names = [name for name, _, _ in _fovea.stats_fields()]
    assert list(stats) == names + ["engines"]
    assert all(list(e) == names + ["engines"] for e in stats["engines"])
    for key in ("requests_finished", "prompt_tokens", "prefill_tokens", "completion_tokens"):
        assert sum(e[key] for e in stats["engines"]) == stats[key], key


def test_type_stubs_match_the_native_module():
    """_fovea.pyi declares what python/bindings.cc defines: every stub name exists natively and every public
    native name has a stub (a stale stub misleads type checkers and readers)."""
    import ast
    from fovea import _fovea
    stub = ast.parse(open(os.path.join(os.path.dirname(fovea.__file__), "_fovea.pyi")).read())
    declared = {}
    for node in stub.body:
        if isinstance(node, ast.ClassDef):
            names = {m.name if isinstance(m, ast.FunctionDef) else m.target.id for m in node.body
                     if isinstance(m, (ast.FunctionDef, ast.AnnAssign))}
            declared[node.name] = {n for n in names if not n.startswith("_")}
        elif isinstance(node, ast.FunctionDef):
            declared[node.name] = None
    native = {n for n in dir(_fovea) if not n.startswith("_")}
    assert set(declared) == native
    for name, members in declared.items():
        if members is not None:
            public = {m for m in dir(getattr(_fovea, name)) if not m.startswith("_")}
            assert members == public, name
