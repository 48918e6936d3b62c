"""A replica failing mid-batch loses no Python request: a request whose engine failed runs again on the other
one (Engine(engine_failure_retries=1), the default), with the answer a single healthy engine gives; a token
stream says which samples start over. With retries off the same failure reaches the Results as engine_failed,
so the test would see the retry missing. The fault comes from the test-only Engine option
_inject_engine_failure=(K, S): engine K fails as if its device had, after S scheduler steps."""
import pytest

Image = pytest.importorskip("PIL.Image")
fovea = pytest.importorskip("fovea", reason="the fovea Python module is not built (needs nanobind)")

OPTIONS = dict(backend="cpu", max_tiles=1, kv_blocks=512)


def requests():
    out = []
    for i in range(24):
        image = Image.new("RGB", (40 + i, 30 + 2 * i), ((37 * i) % 256, (91 * i) % 256, 120))
        out.append(fovea.Request(image=image, prompt="What is it?", max_tokens=4, ignore_eos=True,
                                 answers=["yes", "no"]))
    return out


@pytest.fixture(scope="module")
def reference(demo_model):
    with fovea.Engine(demo_model, **OPTIONS) as llm:
        return llm.generate(requests())


def failing_engine(demo_model, monkeypatch, **options):
    return fovea.Engine(demo_model, replicas=2, concurrency=8, _inject_engine_failure=(1, 2), **OPTIONS, **options)


def test_a_failing_replica_loses_no_request(demo_model, reference, monkeypatch):
    with failing_engine(demo_model, monkeypatch) as llm:
        results = llm.generate(requests())
        stats = llm.stats()
    assert [e["failed"] for e in stats["engines"]] == [False, True], "the fault was injected"
    for got, want in zip(results, reference):
        assert got.error is None, got.error
        assert (got.tokens, got.answer_logprobs) == (want.tokens, want.answer_logprobs)


def test_token_stream_restarts_a_retried_sample(demo_model, reference, monkeypatch):
    with failing_engine(demo_model, monkeypatch) as llm:
        events = list(llm.stream(requests(), deltas=True))
    text, restarted = {}, set()
    for e in events:
        if e.restart:
            restarted.add(e.index)
            text[e.index] = ""
        elif not e.finished:
            text[e.index] = text.get(e.index, "") + e.text
    assert restarted, "some request was streaming on the engine that failed"
    finals = {e.index: e.result for e in events if e.finished}
    for i, want in enumerate(reference):
        assert finals[i].error is None and finals[i].text == want.text == text.get(i, "")


def test_without_retries_the_failure_reaches_the_results(demo_model, monkeypatch):
    with failing_engine(demo_model, monkeypatch, engine_failure_retries=0) as llm:
        results = llm.generate(requests())
    failed = [r for r in results if r.error is not None]
    assert failed and all(r.error_kind == "engine_failed" for r in failed)


def test_a_ray_predictor_on_a_failing_replica_loses_no_row(demo_model, reference):
    """The Ray actor's engine is a fovea.Engine: the same dispatcher retry (predict() is __call__'s blocking form)."""
    import json

    np = pytest.importorskip("numpy")
    import fovea.ray
    images = [np.asarray(r.image.convert("RGB")) for r in requests()]
    predictor = fovea.ray.Predictor(str(demo_model), prompt="What is it?", max_tokens=4, answers=["yes", "no"],
                                    sampling={"ignore_eos": True}, replicas=2, concurrency=8,
                                    _inject_engine_failure=(1, 2), **OPTIONS)
    try:
        out = predictor.predict({"image": images})
        stats = predictor.engine.stats()
    finally:
        predictor.engine.close()
    assert [e["failed"] for e in stats["engines"]] == [False, True], "the fault was injected"
    assert list(out["error"]) == [None] * len(images)
    for i, want in enumerate(reference):
        assert out["answer"][i] == want.text
        assert json.loads(out["answer_logprobs"][i]) == want.answer_logprobs
