"""fovea serve against the official openai client, on CPU with the demo model: chat completions with an image
(streamed and not), logprobs, models, and the status codes of bad requests."""
import base64
import http.client
import io
import json
import os
import signal
import socket
import subprocess
import time

import pytest

openai = pytest.importorskip("openai")
Image = pytest.importorskip("PIL.Image")

FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")
API_KEY = "test-key"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def png_bytes(w=64, h=48, color=(200, 40, 90)):
    buf = io.BytesIO()
    Image.new("RGB", (w, h), color).save(buf, format="PNG")
    return buf.getvalue()


def data_url(data, mime="image/png"):
    return f"data:{mime};base64," + base64.b64encode(data).decode()


def wait_health(port, proc, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, "fovea serve exited early"
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("fovea serve did not become healthy")


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    model = root / "model"
    subprocess.run([FOVEA_BIN, "make-demo-model", "--out", str(model)], check=True, capture_output=True, timeout=300)
    media = root / "media"
    media.mkdir()
    (media / "ok.png").write_bytes(png_bytes())
    (root / "outside.png").write_bytes(png_bytes())
    port = free_port()
    log = open(root / "serve.log", "w")
    proc = subprocess.Popen(
        [FOVEA_BIN, "serve", "--model", str(model), "--port", str(port), "--backend", "cpu", "--max-tiles", "1", "--kv-blocks", "1024",
         "--api-key", API_KEY, "--allowed-media-dir", str(media), "--max-body-bytes", "200000"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_health(port, proc)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=API_KEY, max_retries=0, timeout=120)
        model_id = client.models.list().data[0].id
        yield {"port": port, "proc": proc, "client": client, "model": model_id, "root": root, "media": media}
    finally:
        stop(proc)
        log.close()


def image_message(url, text="What is in the picture?"):
    return [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                         {"type": "text", "text": text}]}]


def test_chat_completion_with_image(server):
    client = server["client"]
    r = client.chat.completions.create(model=server["model"], messages=image_message(data_url(png_bytes())),
                                       max_tokens=4, temperature=0)
    assert r.object == "chat.completion"
    choice = r.choices[0]
    assert choice.message.role == "assistant"
    assert isinstance(choice.message.content, str)
    assert choice.finish_reason in ("stop", "length")
    assert 1 <= r.usage.completion_tokens <= 4
    assert r.usage.prompt_tokens > 0
    # Greedy decoding is deterministic: the same request gives the same answer.
    again = client.chat.completions.create(model=server["model"], messages=image_message(data_url(png_bytes())),
                                           max_tokens=4, temperature=0)
    assert again.choices[0].message.content == choice.message.content


def test_streamed_chat_completion(server):
    client = server["client"]
    messages = image_message(data_url(png_bytes()))
    plain = client.chat.completions.create(model=server["model"], messages=messages, max_tokens=5)
    stream = client.chat.completions.create(model=server["model"], messages=messages, max_tokens=5, stream=True,
                                            stream_options={"include_usage": True})
    text, finish, usage = "", None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    assert finish in ("stop", "length")
    assert usage is not None and usage.completion_tokens == plain.usage.completion_tokens
    assert text == plain.choices[0].message.content


def test_logprobs_and_local_media(server):
    client = server["client"]
    r = client.chat.completions.create(model=server["model"], messages=image_message("ok.png"), max_tokens=3,
                                       logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for item in content:
        assert item.logprob <= 0.0
        assert len(item.top_logprobs) == 2
        assert item.top_logprobs[0].logprob >= item.top_logprobs[1].logprob


def test_bad_requests_get_the_right_codes(server):
    client, model = server["client"], server["model"]
    good = image_message(data_url(png_bytes()))
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=client.base_url, api_key="wrong", max_retries=0).chat.completions.create(
            model=model, messages=good, max_tokens=1)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=good, max_tokens=1)
    with pytest.raises(openai.BadRequestError) as bad_param:
        client.chat.completions.create(model=model, messages=good, max_tokens=1, temperature=5)
    assert bad_param.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError):  # not an image at all
        client.chat.completions.create(model=model, messages=image_message(data_url(b"garbage" * 10)), max_tokens=1)
    with pytest.raises(openai.BadRequestError):  # a truncated PNG
        client.chat.completions.create(model=model, messages=image_message(data_url(png_bytes()[:40])), max_tokens=1)
    with pytest.raises(openai.BadRequestError):  # outside --allowed-media-dir
        client.chat.completions.create(model=model, messages=image_message(str(server["root"] / "outside.png")),
                                       max_tokens=1)
    with pytest.raises(openai.BadRequestError):  # remote media not enabled
        client.chat.completions.create(model=model, messages=image_message("http://127.0.0.1:9/x.png"), max_tokens=1)

    def raw(method, path, body=b"", headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", server["port"], timeout=30)
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, data

    auth = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}
    status, body = raw("POST", "/v1/chat/completions", b"{not json", auth)
    assert status == 400 and "message" in json.loads(body)["error"]
    status, body = raw("POST", "/v1/chat/completions", b" " * 300000, auth)
    assert status == 413 and json.loads(body)["error"]["message"]
    assert raw("GET", "/nowhere")[0] == 404
    assert raw("GET", "/health")[0] == 200
    status, body = raw("GET", "/metrics")
    assert status == 200 and b"fovea_kv_blocks_used" in body and b"fovea_completion_tokens_total" in body


def test_sigterm_drains_and_exits(server):
    # Last in the module: it stops the server. A request in flight when the signal arrives still completes.
    client = server["client"]
    import threading
    result = {}

    def call():
        try:
            r = client.chat.completions.create(model=server["model"], messages=image_message(data_url(png_bytes())),
                                               max_tokens=8)
            result["text"] = r.choices[0].message.content
        except Exception as e:  # noqa: BLE001 - reported below
            result["error"] = repr(e)

    def submitted():
        conn = http.client.HTTPConnection("127.0.0.1", server["port"], timeout=10)
        conn.request("GET", "/metrics")
        for line in conn.getresponse().read().decode().splitlines():
            if line.startswith("fovea_requests_submitted_total "):
                return float(line.split()[1])
        return 0.0

    before = submitted()
    t = threading.Thread(target=call)
    t.start()
    deadline = time.time() + 30
    while submitted() == before and "error" not in result and time.time() < deadline:
        time.sleep(0.01)
    server["proc"].send_signal(signal.SIGTERM)  # the request is in the engine (or already answered)
    t.join(timeout=120)
    assert server["proc"].wait(timeout=60) == 0
    assert "text" in result, result
