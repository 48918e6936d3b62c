"""The Python package (fovea.Engine): results equal `fovea run`'s token for token and log-prob for log-prob; a
corrupt image fails only its own Result; images as paths, bytes, numpy arrays and PIL images give the same
answer; chat messages mean what they mean to `fovea serve`; other Python threads and the asyncio loop run while
the engine works; stream and asyncio forms return every request once."""
import asyncio
import io
import json
import math
import os
import subprocess
import threading
import time

import pytest

np = pytest.importorskip("numpy")
Image = pytest.importorskip("PIL.Image")
fovea = pytest.importorskip("fovea", reason="the fovea Python module is not built (needs nanobind)")
FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")

PROMPT = "Is there a bed?"
ANSWERS = ["yes", "no", "bed"]
ENGINE_OPTIONS = dict(backend="cpu", max_tiles=1, kv_blocks=512)


def write_images(folder, count):
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        image = Image.new("RGB", (40 + 7 * i, 30 + 3 * i), ((41 * i) % 256, (97 * i) % 256, 150))
        image.paste((255 - 20 * i % 256, 30, 60), (3, 4, 20, 18))
        paths.append(folder / f"img{i:02d}.png")
        image.save(paths[-1])
    return paths


def noise_requests(count, seed=0):
    """Distinct noise images: no prefix or vision cache hits, so the engine has real work."""
    rng = np.random.default_rng(seed)
    return [fovea.Request(image=rng.integers(0, 256, (300, 400, 3), np.uint8), prompt=PROMPT, max_tokens=8)
            for _ in range(count)]


def coverage(ticks, start, end, bin_s=0.25):
    """The share of bin_s-long bins of [start, end] in which another thread or task ticked at least once. Held
    GIL (or a blocked loop) for the whole call gives ~0; a loaded CI machine may starve a few bins of CPU."""
    bins = max(1, math.ceil((end - start) / bin_s))
    covered = len({int((t - start) / bin_s) for t in ticks if start <= t <= end})
    print(f"{end - start:.2f} s, {covered}/{bins} bins with a tick")
    return covered / bins


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
    # Decoded by the engine: invalid_image; refused in Python before it (no file, a bad array): invalid_request.
    assert [r.error_kind for r in results] == [None, "invalid_image", None, "invalid_request", "invalid_image",
                                               "invalid_request", None]
    alone = llm.generate([requests[0], requests[2], requests[6]])
    assert [r.tokens for r in alone] == [results[0].tokens, results[2].tokens, results[6].tokens]
    with pytest.raises(ValueError):
        llm.generate([fovea.Request(image=images[0], prompt=PROMPT, max_tokens=0)])


def test_image_forms_give_the_same_answer(llm, images):
    path = images[3]
    pil = Image.open(path)
    forms = [str(path), path, path.read_bytes(), np.asarray(pil.convert("RGB")), pil,
             np.asarray(pil.convert("RGBA"))]
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
    requests = noise_requests(8)
    ticks, stop = [], threading.Event()

    def spin():  # pure Python: runs only while nobody holds the GIL
        while not stop.is_set():
            ticks.append(time.monotonic())
            x = 0
            for i in range(2000):
                x += i

    worker = threading.Thread(target=spin)
    worker.start()
    start = time.monotonic()
    results = llm.generate(requests)
    end = time.monotonic()
    stop.set()
    worker.join()
    assert all(r.ok for r in results)
    assert end - start > 0.5, "too little work to tell"
    assert coverage(ticks, start, end) >= 0.6, "another Python thread stalled while generate() ran"


def test_stream_and_asyncio_forms(llm, images):
    requests = [fovea.Request(image=p, prompt=PROMPT, max_tokens=2, answers=ANSWERS) for p in images]
    expected = [(r.tokens, r.answer_logprobs) for r in llm.generate(requests)]
    streamed = list(llm.stream(requests))
    assert sorted(r.index for r in streamed) == list(range(len(requests)))
    assert all((r.tokens, r.answer_logprobs) == expected[r.index] for r in streamed)

    async def main():
        ticks = []

        async def ticker():
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.005)

        task = asyncio.create_task(ticker())
        gathered = await llm.agenerate(requests)
        seen = [r async for r in llm.astream(requests)]
        start = time.monotonic()
        slow = await llm.agenerate(noise_requests(16, seed=1))  # real work: images not seen before
        end = time.monotonic()
        task.cancel()
        return gathered, seen, slow, end - start, coverage(ticks, start, end)

    gathered, seen, slow, seconds, covered = asyncio.run(main())
    assert [(r.tokens, r.answer_logprobs) for r in gathered] == expected
    assert sorted(r.index for r in seen) == list(range(len(requests)))
    assert all(r.ok for r in slow) and seconds > 0.5
    assert covered >= 0.6, "the event loop stalled while the engine worked"

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
    for key in ("requests_finished", "prompt_tokens", "prefill_tokens", "completion_tokens"):
        assert sum(e[key] for e in stats["engines"]) == stats[key], key
