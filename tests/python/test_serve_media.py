"""fovea serve fetching image_url over https:// (only with --allow-remote-media; a self-signed certificate
trusted through --ca-file), with a size limit; a URL where nothing listens and an s3:// URL without
--allow-s3-media fail with a clear message. (S3 itself: test_fetch_remote.py.)"""
import functools
import http.server
import io
import os
import signal
import socket
import ssl
import subprocess
import threading
import time

import pytest

openai = pytest.importorskip("openai")
Image = pytest.importorskip("PIL.Image")
FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_remote_media(tmp_path, self_signed_cert):
    model = tmp_path / "model"
    subprocess.run([FOVEA_BIN, "make-demo-model", "--out", str(model)], check=True, capture_output=True, timeout=300)
    media = tmp_path / "www"
    media.mkdir()
    Image.new("RGB", (64, 48), (10, 200, 30)).save(media / "small.png")
    (media / "big.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(300_000))  # over the limit: never decoded

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(media)))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*self_signed_cert)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    httpd.handle_error = lambda *args: None  # the server hanging up on the oversize body is expected
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"https://127.0.0.1:{httpd.server_address[1]}"
    port = free_port()
    proc = subprocess.Popen([FOVEA_BIN, "serve", "--model", str(model), "--port", str(port), "--backend", "cpu",
                             "--max-tiles", "1", "--kv-blocks", "512", "--allow-remote-media",
                             "--max-media-bytes", "200000", "--remote-timeout-ms", "5000",
                             "--ca-file", str(self_signed_cert[0])],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=60)
        deadline = time.time() + 120
        while True:
            assert proc.poll() is None and time.time() < deadline, "server did not start"
            try:
                client.models.list()
                break
            except (openai.APIConnectionError, openai.InternalServerError, openai.APIStatusError):
                time.sleep(0.2)

        def ask(url):
            return client.chat.completions.create(
                model=client.models.list().data[0].id, max_tokens=2,
                messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                       {"type": "text", "text": "colour?"}]}])

        assert ask(f"{base}/small.png").usage.completion_tokens >= 1
        with pytest.raises(openai.BadRequestError, match="404"):
            ask(f"{base}/missing.png")
        with pytest.raises(openai.BadRequestError, match="limit"):
            ask(f"{base}/big.png")
        with pytest.raises(openai.BadRequestError, match="https://127.0.0.1:1/x.png"):
            ask("https://127.0.0.1:1/x.png")
        with pytest.raises(openai.BadRequestError, match="--allow-s3-media"):
            ask("s3://bucket/x.png")
        with pytest.raises(openai.BadRequestError):  # local paths stay refused without --allowed-media-dir
            ask(str(media / "small.png"))
    finally:
        httpd.shutdown()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
