"""One request model, every door (issue 24): one table of cases (an image by path, URL or bytes; a prompt or chat
messages; a system text; sampling with a seed; log-probs; answers; choices; compact tiling; a corrupt and a
missing image) goes through each way into Fovea: `fovea run` with a tasks file (chat messages as a task's
"messages"), `fovea run` with an OpenAI batch file, `fovea serve` over HTTP, the Python Engine and
fovea.ray.Predictor on Ray Data. Each door's output is
compared with the Python Engine's for the same case, on everything that door reports: text, token ids, per-token
log-probs, answer and choice log-probs, token counts, error kinds. The CPU demo model is batch-invariant, so
every number must be equal, not close.

A case a door cannot carry is an xfail(strict=True) in KNOWN_GAPS naming why; when the door learns it, the
test passes unexpectedly and fails, so the mark goes with the fix. Every door carries every case today: the
tasks and OpenAI fields are read by one set of rules (src/requests/request_fields.h), and an image that cannot
be had is "invalid_image" in every door (src/requests/request_images.h)."""
import base64
import functools
import http.client
import http.server
import json
import os
import subprocess
import threading

import pytest

from serve_util import start_server, stop

Image = pytest.importorskip("PIL.Image")
fovea = pytest.importorskip("fovea", reason="the fovea Python module is not built (needs nanobind)")
FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")

PROMPT = "What is in the picture?"
MAX_TILES = 6
ENGINE = dict(backend="cpu", max_tiles=MAX_TILES, kv_blocks=1024)
CHOICES = ["a cat", "a dog", "nothing"]

# name -> the request, in Python's vocabulary. image: which file ("photo", "wide", "corrupt", "missing") and how
# it travels ("path", "url", "bytes"); form: "prompt" or "messages".
CASES = {
    "path": dict(image=("photo", "path"), max_tokens=4),
    "url": dict(image=("photo", "url"), max_tokens=4),
    "bytes": dict(image=("photo", "bytes"), max_tokens=4),
    "messages_system": dict(image=("photo", "path"), form="messages", system="Answer in one word.", max_tokens=4),
    "messages_url": dict(image=("photo", "url"), form="messages", max_tokens=4),
    "sampling_seed": dict(image=("photo", "path"), max_tokens=6, temperature=0.8, top_p=0.9, top_k=40, seed=42),
    "logprobs": dict(image=("photo", "path"), max_tokens=3, logprobs=2),
    "answers": dict(image=("photo", "path"), answers=["yes", "no"]),
    "choices": dict(image=("photo", "path"), choices=CHOICES),
    "compact_tiling": dict(image=("wide", "path"), max_tokens=3, tiling="compact"),
    "max_tiles": dict(image=("wide", "path"), max_tokens=3, max_tiles=2),
    "corrupt_image": dict(image=("corrupt", "path")),
    "missing_image": dict(image=("missing", "path")),
}
SAMPLING_KEYS = ("max_tokens", "temperature", "top_p", "top_k", "seed")
FIELDS = SAMPLING_KEYS + ("system", "answers", "choices", "tiling", "max_tiles", "logprobs")
# The demo model's text barely depends on its input, so every request also carries probes whose numbers do: the
# log-probs of two answers and of the chosen tokens (a door that takes them reports them for every case).
PROBE = dict(answers=["yes", "no"], logprobs=1)


def fields_of(case):
    """The case's request fields plus the probes (none beside choices, which excludes answers)."""
    fields = {k: case[k] for k in FIELDS if k in case}
    if "choices" not in case:
        fields = {**PROBE, **fields}
    return fields

# What each door reports (the others it does not have at all).
REPORTS = {
    "tasks": {"text", "tokens", "token_logprobs", "answer_logprobs", "choice_logprobs", "error_kind"},
    "openai_batch": {"text", "token_logprobs", "answer_logprobs", "choice_logprobs", "error_kind", "finish_reason",
                     "prompt_tokens", "completion_tokens"},
    "serve": {"text", "token_logprobs", "answer_logprobs", "choice_logprobs", "error_kind", "finish_reason",
              "prompt_tokens", "completion_tokens"},
    "ray": {"text", "token_logprobs", "answer_logprobs", "choice_logprobs", "error_kind", "finish_reason",
            "prompt_tokens", "completion_tokens"},
}
# What a case asks for, which a door must then deliver.
ASKS = {"logprobs": "token_logprobs", "answers": "answer_logprobs", "choices": "choice_logprobs"}

# (door, case) -> why that door cannot carry that case. Empty: every door carries every case.
KNOWN_GAPS = {}


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    """The image files, and an HTTP server for their URLs (plain http on loopback)."""
    folder = tmp_path_factory.mktemp("door_media")
    photo = Image.new("RGB", (120, 90), (40, 110, 200))
    photo.paste((230, 200, 30), (20, 15, 70, 60))
    photo.save(folder / "photo.png")
    Image.new("RGB", (640, 480), (90, 160, 60)).save(folder / "wide.png")  # 7 official tiles, 5 compact ones
    (folder / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(folder))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever)
    thread.start()
    yield folder, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    thread.join()


def image_ref(media, case, how_for_bytes="data_url"):
    """The case's image as this door names it: a path, a URL, or bytes (raw, or a data: URL for text formats)."""
    folder, base = media
    name, how = case["image"]
    path = folder / f"{name}.png"
    if how == "url":
        return f"{base}/{name}.png"
    if how == "bytes":
        data = path.read_bytes()
        return data if how_for_bytes == "raw" else "data:image/png;base64," + base64.b64encode(data).decode()
    return str(path)


def chat_body(media, case):
    fields = fields_of(case)
    content = [{"type": "image_url", "image_url": {"url": image_ref(media, case)}}, {"type": "text", "text": PROMPT}]
    messages = ([{"role": "system", "content": case["system"]}] if "system" in case else []) + \
        [{"role": "user", "content": content}]
    body = {"model": "demo", "messages": messages, "max_tokens": case.get("max_tokens", 1), "temperature": 0.0}
    body.update({k: fields[k] for k in SAMPLING_KEYS if k in fields})
    if "logprobs" in fields:
        body.update(logprobs=True, top_logprobs=fields["logprobs"])
    if "choices" in fields:
        body["guided_choice"] = fields["choices"]
    for key in ("answers", "tiling", "max_tiles"):  # Fovea's fields, which OpenAI bodies take too
        if key in fields:
            body[key] = fields[key]
    return body


def from_chat_completion(status, body, case):
    if status != 200:
        error = body.get("error") or {}
        code = error.get("code") or ""
        kind = code if code in ("invalid_image", "context_length_exceeded") else \
            "invalid_request" if error.get("type", "").startswith("invalid_request") or status == 400 else "internal"
        return {"error_kind": kind, "text": None}
    choice = body["choices"][0]
    out = {"text": choice["message"]["content"], "finish_reason": choice["finish_reason"], "error_kind": None,
           "prompt_tokens": body["usage"]["prompt_tokens"], "completion_tokens": body["usage"]["completion_tokens"]}
    if choice.get("logprobs"):
        out["token_logprobs"] = [(e["logprob"], [t["logprob"] for t in e["top_logprobs"]])
                                 for e in choice["logprobs"]["content"]]
    if "choice_logprobs" in choice:
        out["choice_logprobs"] = choice["choice_logprobs"]
    if "answer_logprobs" in choice:
        out["answer_logprobs"] = choice["answer_logprobs"]
    return out


def user_messages(image):
    """The case's question as OpenAI chat messages (its system text travels as the door's own field)."""
    content = [{"type": "image_url", "image_url": {"url": image}}, {"type": "text", "text": PROMPT}]
    return [{"role": "user", "content": content}]


def run_python(model, media):
    with fovea.Engine(model, **ENGINE) as llm:
        requests = []
        for case in CASES.values():
            fields = fields_of(case)
            image = image_ref(media, case, how_for_bytes="raw")
            if case.get("form") == "messages":
                requests.append(fovea.Request(messages=user_messages(image), **fields))
            else:
                requests.append(fovea.Request(image=image, prompt=PROMPT, **fields))
        results = llm.generate(requests)
    out = {}
    for name, r in zip(CASES, results):
        if r.error is not None:
            out[name] = {"error_kind": r.error_kind, "text": None}
            continue
        out[name] = {"text": r.text, "tokens": r.tokens, "error_kind": None, "finish_reason": r.finish_reason,
                     "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
                     "answer_logprobs": r.answer_logprobs or None,
                     "choice_logprobs": [r.choice_logprobs[c] for c in CASES[name].get("choices", ())] or None,
                     "token_logprobs": None if r.logprobs is None else
                     [(lp.logprob, [t.logprob for t in lp.top]) for lp in r.logprobs]}
    return out


def run_tasks(model, media, tmp_path):
    lines = []
    for name, case in CASES.items():
        if case.get("form") == "messages":  # "system" beside "messages" goes first, as in Python
            task = {"id": name, "messages": user_messages(image_ref(media, case))}
        else:
            task = {"id": name, "image": image_ref(media, case), "prompt": PROMPT}
        task.update(fields_of(case))
        lines.append(json.dumps(task))
    (tmp_path / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    records = fovea_run(model, tmp_path / "tasks.jsonl", tmp_path / "tasks_out.jsonl")
    out = {}
    for r in records:
        if r.get("error"):
            out[r["id"]] = {"error_kind": r.get("error_kind"), "text": None}
            continue
        choices = CASES[r["id"]].get("choices", ())
        out[r["id"]] = {"text": r["text"], "tokens": r["tokens"], "error_kind": None,
                        "answer_logprobs": r.get("logprobs"),
                        "token_logprobs": [(e["logprob"], [t["logprob"] for t in e["top"]]) for e in r["token_logprobs"]]
                        if "token_logprobs" in r else None,
                        "choice_logprobs": [r["choice_logprobs"][c] for c in choices] if "choice_logprobs" in r
                        else None}
    return out


def run_openai_batch(model, media, tmp_path):
    lines = [json.dumps({"custom_id": name, "method": "POST", "url": "/v1/chat/completions",
                         "body": chat_body(media, case)}) for name, case in CASES.items()]
    (tmp_path / "batch.jsonl").write_text("\n".join(lines) + "\n")
    records = fovea_run(model, tmp_path / "batch.jsonl", tmp_path / "batch_out.jsonl")
    out = {}
    for r in records:
        response = r["response"]  # an error's body is the server's error JSON
        out[r["custom_id"]] = from_chat_completion(response["status_code"], response["body"], CASES[r["custom_id"]])
    return out


def fovea_run(model, input_path, output_path):
    proc = subprocess.run([FOVEA_BIN, "run", "--model", str(model), "--input", str(input_path), "--output",
                           str(output_path), "--backend", "cpu", "--max-tiles", str(MAX_TILES), "--kv-blocks", "1024",
                           "--quiet"], capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr  # 1: some records failed (the bad images)
    return [json.loads(line) for line in output_path.read_text().splitlines()]


def run_serve(model, media, tmp_path):
    folder, _ = media
    proc, port = start_server(FOVEA_BIN, model, ["--allowed-media-dir", str(folder), "--allow-remote-media",
                                                 "--max-tiles", str(MAX_TILES), "--kv-blocks", "1024"],
                              tmp_path / "serve.log")
    out = {}
    try:
        for name, case in CASES.items():
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            conn.request("POST", "/v1/chat/completions", json.dumps(chat_body(media, case)),
                         {"Content-Type": "application/json"})
            response = conn.getresponse()
            out[name] = from_chat_completion(response.status, json.loads(response.read()), case)
            conn.close()
    finally:
        stop(proc)
    return out


def run_ray(model, media, tmp_path):
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    import fovea.ray  # noqa: F401
    rows = []
    for name, case in CASES.items():
        fields = fields_of(case)
        sampling = {k: fields[k] for k in SAMPLING_KEYS + ("logprobs",) if k in fields}
        # A column holds one type (Arrow makes a str among bytes into bytes): images as text, bytes as data: URLs.
        row = {"case": name, "image": image_ref(media, case), "prompt": PROMPT,
               "system": case.get("system"), "choices": json.dumps(case["choices"]) if "choices" in case else None,
               "sampling": json.dumps(sampling) if sampling else None, "tiling": case.get("tiling"),
               "max_tiles": case.get("max_tiles"), "messages": None,
               "answers": json.dumps(fields["answers"]) if "answers" in fields else None}
        if case.get("form") == "messages":
            row.update(image=None, prompt=None, messages=json.dumps(user_messages(row["image"])))
        rows.append(row)
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(fovea.__file__)))
    paths = [package_dir] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}})
    try:
        ds = ray.data.from_items(rows).map_batches(fovea.ray.Predictor, concurrency=1, batch_size=len(rows), num_cpus=1,
                                                   fn_constructor_kwargs=dict(model=str(model), **ENGINE))
        frame = ds.to_pandas()
    finally:
        ray.shutdown()
    out = {}
    for _, cells in frame.iterrows():
        row = {k: None if not isinstance(v, (list, dict)) and pd_isna(v) else v for k, v in cells.items()}
        name, choices = row["case"], CASES[row["case"]].get("choices", ())
        if row["error"] is not None:
            out[name] = {"error_kind": row["error_kind"], "text": None}
            continue
        out[name] = {"text": row["answer"], "error_kind": None, "finish_reason": row["finish_reason"],
                     "prompt_tokens": int(row["prompt_tokens"]), "completion_tokens": int(row["completion_tokens"]),
                     "answer_logprobs": json.loads(row["answer_logprobs"]) if row["answer_logprobs"] else None,
                     "token_logprobs": [(e["logprob"], [t["logprob"] for t in e["top"]])
                                        for e in json.loads(row["token_logprobs"])] if row["token_logprobs"] else None,
                     "choice_logprobs": [json.loads(row["choice_logprobs"])[c] for c in choices]
                     if row["choice_logprobs"] else None}
    return out


def pd_isna(value):
    import pandas as pd
    return bool(pd.isna(value))


RUNNERS = {"tasks": run_tasks, "openai_batch": run_openai_batch, "serve": run_serve, "ray": run_ray}


@pytest.fixture(scope="module")
def outputs(demo_model, media, tmp_path_factory):
    """Each door's normalised output per case, computed once (a door runs all its cases in one go)."""
    cache = {"python": run_python(demo_model, media)}

    def get(door):
        if door not in cache:
            cache[door] = RUNNERS[door](demo_model, media, tmp_path_factory.mktemp(door))
        return cache[door]
    return get


def test_the_reference_door_answers_every_case(outputs):
    python = outputs("python")
    assert [n for n, o in python.items() if o["error_kind"]] == ["corrupt_image", "missing_image"]
    # A missing file is invalid_image like a corrupt one, in every door (src/requests/request_images.h says why).
    assert python["corrupt_image"]["error_kind"] == python["missing_image"]["error_kind"] == "invalid_image"
    assert python["path"]["tokens"] == python["url"]["tokens"] == python["bytes"]["tokens"]
    assert python["messages_system"]["prompt_tokens"] != python["path"]["prompt_tokens"]  # its own system text
    assert python["choices"]["text"] in CHOICES and len(python["choices"]["choice_logprobs"]) == 3
    # The probes see the input: another image or system text moves them.
    for other in ("messages_system", "compact_tiling", "max_tiles"):
        assert python[other]["answer_logprobs"] != python["path"]["answer_logprobs"], other
        assert python[other]["token_logprobs"] != python["path"]["token_logprobs"], other


def test_compact_tiling_changes_the_prompt(demo_model, media):
    """The compact case is a real one: the wide image tiles differently under the official policy."""
    with fovea.Engine(demo_model, **ENGINE) as llm:
        official, compact = llm.generate([fovea.Request(image=image_ref(media, CASES["compact_tiling"]), prompt=PROMPT,
                                                        tiling=t) for t in ("official", "compact")])
    assert official.prompt_tokens != compact.prompt_tokens


def door_params():
    params = []
    for door in RUNNERS:
        for case in CASES:
            gap = KNOWN_GAPS.get((door, case))
            marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else []
            params.append(pytest.param(door, case, marks=marks, id=f"{door}-{case}"))
    return params


@pytest.mark.parametrize("door,case", door_params())
def test_door_matches_python(outputs, door, case):
    want = outputs("python")[case]
    got = outputs(door)[case]
    assert got["error_kind"] == want["error_kind"], (got, want)
    if want["error_kind"]:
        return
    for field, asked in ASKS.items():
        if field in CASES[case]:
            assert asked in REPORTS[door] and got.get(asked) is not None, f"{door} does not deliver {asked}"
    for field in REPORTS[door]:
        if want.get(field) is not None or got.get(field) is not None:
            assert got.get(field) == want.get(field), field
