"""fovea run over an OpenAI Batch file: the input format is detected, the output is OpenAI's batch output format
(as vllm run-batch writes it), every custom_id appears once, answers equal the tasks format's on the same
images, bad lines become error records, and a resumed run only runs what is missing."""
import base64
import json
import os
import subprocess

import pytest

Image = pytest.importorskip("PIL.Image")
FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")

PROMPT = "Is there a bed?"


def chat_line(custom_id, image_url, max_tokens=3, **body):
    content = [{"type": "image_url", "image_url": {"url": image_url}}, {"type": "text", "text": PROMPT}]
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}],
                     "max_tokens": max_tokens, **body}}


@pytest.fixture()
def batch(tmp_path):
    for i in range(6):
        Image.new("RGB", (44 + 4 * i, 33 + 3 * i), ((71 * i) % 256, 140, (23 * i) % 256)).save(tmp_path / f"p{i}.png")
    data_url = "data:image/png;base64," + base64.b64encode((tmp_path / "p5.png").read_bytes()).decode()
    lines = [chat_line(f"req-{i}", f"p{i}.png", temperature=0) for i in range(5)]
    lines.append(chat_line("req-data", data_url, logprobs=True, top_logprobs=2))
    lines.append(chat_line("req-abs", f"file://{tmp_path}/p1.png"))
    lines.append({"custom_id": "req-url", "method": "POST", "url": "/v1/embeddings", "body": {"input": "x"}})
    lines.append(chat_line("req-missing", "nope.png"))
    (tmp_path / "batch.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
    return tmp_path, [l["custom_id"] for l in lines]


def run(model, folder, out, *extra):
    return subprocess.run([FOVEA_BIN, "run", "--model", str(model), "--input", str(folder / "batch.jsonl"),
                           "--output", str(out), "--backend", "cpu", "--max-tiles", "1", "--kv-blocks", "256",
                           "--quiet", *extra], capture_output=True, text=True, timeout=300)


def read(out):
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_openai_batch_round_trip_and_resume(demo_model, batch, tmp_path):
    folder, ids = batch
    out = tmp_path / "out.jsonl"
    proc = run(demo_model, folder, out)
    assert proc.returncode == 1, proc.stderr  # two bad lines
    records = read(out)
    assert sorted(r["custom_id"] for r in records) == sorted(ids)
    by_id = {r["custom_id"]: r for r in records}
    for r in records:
        assert list(r.keys()) == ["id", "custom_id", "response", "error"]
        assert r["id"].startswith("batch_req_")
        assert r["response"]["request_id"]
    ok = by_id["req-0"]
    assert ok["error"] is None and ok["response"]["status_code"] == 200
    body = ok["response"]["body"]
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert body["choices"][0]["finish_reason"] in ("length", "stop")
    assert body["usage"]["completion_tokens"] <= 3 and body["usage"]["prompt_tokens"] > 0
    lp = by_id["req-data"]["response"]["body"]["choices"][0]["logprobs"]["content"]
    assert len(lp[0]["top_logprobs"]) == 2
    assert by_id["req-abs"]["response"]["body"]["choices"][0]["message"]["content"] == \
        by_id["req-1"]["response"]["body"]["choices"][0]["message"]["content"]
    bad = by_id["req-url"]
    assert bad["response"]["status_code"] == 400 and "/v1/embeddings" in bad["error"]["message"]
    missing = by_id["req-missing"]
    assert missing["response"]["status_code"] == 400 and missing["error"]["code"] == "invalid_image"

    # The same images through the tasks format give the same text and tokens.
    tasks = [{"id": f"req-{i}", "image": f"p{i}.png", "prompt": PROMPT, "max_tokens": 3} for i in range(5)]
    (folder / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    plain = tmp_path / "plain.jsonl"
    subprocess.run([FOVEA_BIN, "run", "--model", str(demo_model), "--input", str(folder / "tasks.jsonl"), "--output",
                    str(plain), "--backend", "cpu", "--max-tiles", "1", "--kv-blocks", "256", "--quiet"],
                   check=True, capture_output=True, timeout=300)
    for r in read(plain):
        assert by_id[r["id"]]["response"]["body"]["choices"][0]["message"]["content"] == r["text"]

    # Resume: drop some records (as a kill would have left them unwritten); only those run again.
    kept = [r for r in records if r["custom_id"] not in ("req-2", "req-data")]
    out.write_text("".join(json.dumps(r) + "\n" for r in kept))
    proc = run(demo_model, folder, out, "--replicas", "2")
    assert "resume: 7 of 9 records already" in proc.stderr, proc.stderr
    again = read(out)
    assert sorted(r["custom_id"] for r in again) == sorted(ids)
    assert again[:len(kept)] == kept
    assert {r["custom_id"]: r for r in again}["req-2"]["response"]["body"]["choices"][0]["message"] == \
        ok_message(by_id["req-2"])


def ok_message(record):
    return record["response"]["body"]["choices"][0]["message"]
