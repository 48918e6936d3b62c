"""fovea.ray.Predictor on a real local Ray cluster: read_binary_files -> map_batches (2 actors, CPU backend, demo
model) -> write_json writes one row per image, the corrupt images' rows with an error, and the good rows' answers
equal fovea.Engine's on the same images."""
import json
import os

import pytest

np = pytest.importorskip("numpy")
Image = pytest.importorskip("PIL.Image")
fovea = pytest.importorskip("fovea", reason="the fovea Python module is not built (needs nanobind)")
ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")
import fovea.ray  # noqa: E402

PROMPT = "Is there a bed?"
ANSWERS = ["yes", "no"]
GOOD, CORRUPT = 95, 5


def test_ray_data_batch(demo_model, tmp_path):
    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(GOOD):
        Image.new("RGB", (32 + i % 17, 24 + i % 11), ((29 * i) % 256, (71 * i) % 256, 90)).save(folder / f"{i:03d}.png")
    for i in range(CORRUPT):
        (folder / f"bad{i}.jpg").write_bytes(b"\xff\xd8\xff\xe0" + bytes(range(i + 10)))
    engine_options = {"model": str(demo_model), "backend": "cpu", "prompt": PROMPT, "answers": ANSWERS,
                      "max_tiles": 1, "kv_blocks": 256, "preprocess_threads": 1}

    # Ray's workers import fovea from where this process did.
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(fovea.__file__)))
    paths = [package_dir] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    ray.init(num_cpus=4, include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}},
             log_to_driver=False)
    try:
        ds = ray.data.read_binary_files(str(folder), include_paths=True)
        ds = ds.map_batches(fovea.ray.Predictor, fn_constructor_kwargs=engine_options, concurrency=2, batch_size=8,
                            num_cpus=1)
        ds.write_json(str(tmp_path / "out"))
    finally:
        ray.shutdown()

    rows = [json.loads(line) for f in sorted((tmp_path / "out").iterdir()) for line in f.read_text().splitlines()]
    by_name = {os.path.basename(r["path"]): r for r in rows}
    assert len(rows) == GOOD + CORRUPT and len(by_name) == len(rows), "every image exactly once"
    assert all("bytes" not in r for r in rows)
    bad = [r for r in rows if r["error"]]
    assert sorted(os.path.basename(r["path"]) for r in bad) == [f"bad{i}.jpg" for i in range(CORRUPT)]
    assert all(r["answer"] is None and r["error_kind"] == "invalid_image" for r in bad)

    # The same answers as the Python API on the same images, log-prob for log-prob.
    options = {k: v for k, v in engine_options.items() if k not in ("model", "prompt", "answers")}
    with fovea.Engine(demo_model, **options) as llm:
        names = sorted(n for n in by_name if not n.startswith("bad"))
        expected = llm.generate([fovea.Request(image=folder / n, prompt=PROMPT, answers=ANSWERS) for n in names])
    for name, result in zip(names, expected):
        row = by_name[name]
        assert row["answer"] == result.text, name
        assert json.loads(row["answer_logprobs"]) == result.answer_logprobs, name
        assert (row["finish_reason"], row["prompt_tokens"], row["completion_tokens"]) == \
            (result.finish_reason, result.prompt_tokens, result.completion_tokens), name
