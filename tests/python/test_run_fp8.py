"""fovea run --quantization fp8 (W8A8 E4M3 LLM projections; fp8 = fp8-channel) and its recipes fp8-tensor,
fp8-channel, fp8-block, and fp8-all (the ViT's qkv and fc1 too) on the CPU reference backend: the jobs complete,
their first-token logits stay close to the unquantized run's (E4M3 keeps 3 mantissa bits) and differ from each other,
the per-token recipes give a request bit-identical logits alone and among batch-mates (the per-tensor one does
not), and an unknown quantization is refused before any work with a message naming the choices."""
import json
import os
import subprocess

import pytest

np = pytest.importorskip("numpy")
Image = pytest.importorskip("PIL.Image")
FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")


def run_tasks(model, tmp_path, name, tasks, options):
    """`fovea run` on the CPU backend over `tasks` (dicts; "image" names a PNG of colour task["colour"], 64x48 or
    task["size"], made here) with `options` added; their first-token logits are dumped to tmp_path/<name>_logits
    (read them with row()). Returns (the process, that path)."""
    (tmp_path / "img").mkdir(exist_ok=True)
    lines = []
    for task in tasks:
        task = dict(task)
        Image.new("RGB", task.pop("size", (64, 48)), task.pop("colour")).save(tmp_path / "img" / task["image"])
        task["image"] = "img/" + task["image"]
        lines.append(json.dumps(task))
    path = tmp_path / f"{name}_tasks.jsonl"
    path.write_text("\n".join(lines) + "\n")
    logits = tmp_path / f"{name}_logits"
    proc = subprocess.run([FOVEA_BIN, "run", "--model", str(model), "--input", str(path), "--output",
                           str(tmp_path / f"{name}.jsonl"), "--backend", "cpu", "--max-tiles", "1", "--kv-blocks",
                           "128", "--quiet", *options, "--dump-logits", str(logits)],
                          capture_output=True, text=True, timeout=300)
    return proc, logits


def run_one_task(model, tmp_path, name, options, colour=(120, 30, 200)):
    """run_tasks over one 64x48 image task "a"."""
    task = {"id": "a", "image": "a.png", "colour": colour, "prompt": "Is there a bed?", "max_tokens": 1}
    return run_tasks(model, tmp_path, name, [task], options)


def run(model, tmp_path, name, quantization):
    return run_one_task(model, tmp_path, name, ["--quantization", quantization])


def row(logits, task_id="a"):
    index = json.loads((logits.parent / (logits.name + ".json")).read_text())
    data = np.fromfile(logits.parent / (logits.name + ".f32"), dtype="<f4").reshape(-1, index["vocab"])
    return data[index["rows"][task_id]].astype(np.float64)


def test_fp8_run_stays_close_to_the_unquantized_run(demo_model, tmp_path):
    runs = {q: run(demo_model, tmp_path, q, q) for q in
            ("none", "fp8", "fp8-tensor", "fp8-channel", "fp8-block", "fp8-channel-act128", "fp8-all")}
    for proc, _ in runs.values():
        assert proc.returncode == 0, proc.stderr
    rows = {q: row(logits) for q, (_, logits) in runs.items()}
    plain = rows.pop("none")
    for name, quantized in rows.items():
        assert np.isfinite(quantized).all(), name
        rel = np.linalg.norm(plain - quantized) / np.linalg.norm(plain)
        assert 0 < rel < 0.08, (name, rel)
    assert np.array_equal(rows["fp8"], rows["fp8-channel"])  # the default recipe
    for a, b in (("fp8-tensor", "fp8-channel"), ("fp8-channel", "fp8-block"), ("fp8-block", "fp8-channel-act128"),
                 ("fp8-channel", "fp8-channel-act128"), ("fp8", "fp8-all")):
        assert not np.array_equal(rows[a], rows[b]), (a, b)


# Request "a" alone, then in one job with louder batch-mates (other images and prompts): with per-token scales
# (and unquantized) its first-token logits are bit-identical. The per-tensor recipe's activation scale is taken
# over the whole step, so its result depends on which rows share a's step; whether they do depends on scheduling
# (an image's requests wait for a shared prefix another request computes), so it is not asserted here: the CPU
# op test CpuFp8.PerTokenRecipesAreBatchInvariant shows that dependence on fixed inputs.
def test_per_token_recipes_keep_a_request_independent_of_its_batch_mates(demo_model, tmp_path):
    alone = [{"id": "a", "image": "a.png", "colour": (120, 30, 200), "prompt": "Is there a bed?", "max_tokens": 1}]
    mates = [{"id": "b", "image": "b.png", "colour": (255, 255, 0), "size": (96, 64),
              "prompt": "Describe every object in this photo in great detail, please.", "max_tokens": 1},
             {"id": "c", "image": "c.png", "colour": (0, 0, 0), "prompt": "How many chairs?", "max_tokens": 1}]
    for quantization in ("none", "fp8-channel", "fp8-block", "fp8-channel-act128", "fp8-all"):
        solo, solo_logits = run_tasks(demo_model, tmp_path, quantization + "_solo", alone,
                                      ["--quantization", quantization])
        mixed, mixed_logits = run_tasks(demo_model, tmp_path, quantization + "_mixed", mates[:1] + alone + mates[1:],
                                        ["--quantization", quantization])
        assert solo.returncode == 0 and mixed.returncode == 0, solo.stderr + mixed.stderr
        same = np.array_equal(row(solo_logits).view(np.int64), row(mixed_logits).view(np.int64))
        assert same, quantization


def test_batch_invariant_switch_changes_nothing_on_the_cpu(demo_model, tmp_path):
    """--batch-invariant pins the CUDA kernels' choices (test_ops' InvariantOpsTest and the H200 runs check it);
    the CPU reference is batch-invariant already, so there the switch is accepted and leaves every bit as it was."""
    tasks = [{"id": "a", "image": "a.png", "colour": (120, 30, 200), "prompt": "Is there a bed?", "max_tokens": 1},
             {"id": "b", "image": "b.png", "colour": (0, 90, 0), "prompt": "How many chairs?", "max_tokens": 1}]
    for quantization in ("none", "fp8"):
        plain, plain_logits = run_tasks(demo_model, tmp_path, quantization + "_plain", tasks,
                                        ["--quantization", quantization])
        pinned, pinned_logits = run_tasks(demo_model, tmp_path, quantization + "_pinned", tasks,
                                          ["--quantization", quantization, "--batch-invariant"])
        assert plain.returncode == 0 and pinned.returncode == 0, plain.stderr + pinned.stderr
        for task_id in ("a", "b"):
            assert np.array_equal(row(plain_logits, task_id).view(np.int64), row(pinned_logits, task_id).view(np.int64))


def test_unknown_quantization_is_refused(demo_model, tmp_path):
    proc, _ = run(demo_model, tmp_path, "bad", "int3")
    assert proc.returncode != 0
    assert ("unknown quantization 'int3' (none, fp8, fp8-tensor, fp8-channel, fp8-block, fp8-channel-act128, fp8-all, "
            "w4a16)") in proc.stderr


def test_bench_reports_fp8_and_measures_its_peak_in_fp8(demo_model, tmp_path):
    (tmp_path / "img").mkdir()
    Image.new("RGB", (64, 48), (10, 130, 60)).save(tmp_path / "img" / "a.png")
    out = tmp_path / "bench.json"
    proc = subprocess.run([FOVEA_BIN, "bench", "--model", str(demo_model), "--images", str(tmp_path / "img"),
                           "--backend", "cpu", "--count", "2", "--warmup", "0", "--gemm-seconds", "0.05",
                           "--max-tiles", "1", "--quantization", "fp8", "--json", str(out),
                           "--svg", str(tmp_path / "bench.svg")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["quantization"] == "fp8"
    assert report["gemm_peak"]["dtype"] == "F8_E4M3"
    assert report["failed"] == 0 and report["requests"] == 2
