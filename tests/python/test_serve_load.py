"""200 concurrent clients against fovea serve on CPU with the demo model: every request is answered (200) or
cleanly refused (429), clients that hang up midway are cancelled, the server stays up, and the KV cache is
empty again afterwards (read from /metrics)."""
import base64
import http.client
import io
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

Image = pytest.importorskip("PIL.Image")
FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")
CLIENTS = 200


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def chat_body(i):
    buf = io.BytesIO()
    Image.new("RGB", (40 + i % 7, 30 + i % 5), (i % 256, 100, 200 - i % 100)).save(buf, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    return json.dumps({"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": f"question {i}"}]}],
        "max_tokens": 2 + i % 3, "stream": i % 4 == 0}).encode()


def one_client(port, i):
    """Returns the HTTP status, or 'hung-up' for the clients that leave before the answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        conn.request("POST", "/v1/chat/completions", body=chat_body(i), headers={"Content-Type": "application/json"})
        if i % 10 == 9:
            time.sleep(0.05)
            conn.sock.close()  # a client that goes away: its request must be cancelled, its KV freed
            return "hung-up"
        resp = conn.getresponse()
        body = resp.read()
        if resp.status == 200 and b"[DONE]" not in body and b"chat.completion\"" not in body:
            return "bad-body"
        if resp.status not in (200, 429):
            return f"{resp.status}: {body[:200]!r}"
        if resp.status == 429 and json.loads(body)["error"]["code"] != "rate_limit_exceeded":
            return "bad-429"
        return resp.status
    finally:
        conn.close()


def test_200_concurrent_clients(tmp_path):
    model = tmp_path / "model"
    subprocess.run([FOVEA_BIN, "make-demo-model", "--out", str(model)], check=True, capture_output=True, timeout=300)
    port = free_port()
    log = open(tmp_path / "serve.log", "w")
    # A queue smaller than the crowd, so that some requests are refused with 429 and that path is exercised.
    proc = subprocess.Popen([FOVEA_BIN, "serve", "--model", str(model), "--port", str(port), "--backend", "cpu",
                             "--max-tiles", "1", "--max-queue", "48", "--kv-blocks", "4096", "--threads", "256"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 120
        while True:
            assert proc.poll() is None, "server exited"
            assert time.time() < deadline, "server never became healthy"
            try:
                if metrics(port).get("fovea_model_loaded") == 1.0:
                    break
            except OSError:
                pass
            time.sleep(0.2)

        with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
            outcomes = list(pool.map(lambda i: one_client(port, i), range(CLIENTS)))
        print(Counter(outcomes))
        unexpected = [o for o in outcomes if o not in (200, 429, "hung-up")]
        assert not unexpected, unexpected[:5]
        assert outcomes.count(200) > 0
        assert proc.poll() is None, "the server died under load"

        # Everything finished or cancelled: no KV block stays in use, nothing waits.
        deadline = time.time() + 60
        while True:
            m = metrics(port)
            if m["fovea_kv_blocks_used"] == 0 and m["fovea_queue_depth"] == 0 and m["fovea_running_requests"] == 0:
                break
            assert time.time() < deadline, f"KV not freed: {m}"
            time.sleep(0.2)
        assert m["fovea_kv_blocks_total"] > 0
        assert m['fovea_http_responses_total{code="200"}'] >= outcomes.count(200)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/health")
        assert conn.getresponse().status == 200
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
