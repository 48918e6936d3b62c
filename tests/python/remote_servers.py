"""Servers on loopback for the URL-image tests (test_fetch_remote.py, test_python_api_remote.py); conftest.py
makes them the `https_server` and `s3_server` fixtures."""
import contextlib
import functools
import http.server
import os
import socket
import ssl
import subprocess
import threading
import time

BUCKET = "fovea-test"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so connection reuse shows
    failed_once = set()
    connections = 0
    requests = 0

    def setup(self):
        Handler.connections += 1
        super().setup()

    def do_GET(self):
        Handler.requests += 1
        if self.path == "/flaky.png" and self.path not in Handler.failed_once:  # 503 once, then the file
            Handler.failed_once.add(self.path)
            self.send_error(503)
            return
        if self.path == "/flaky.png":
            self.path = "/img.png"
        super().do_GET()

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def https_server(tmp_path, self_signed_cert):
    """Serves tmp_path/www over HTTPS with the (cert, key) given; yields (base URL, www, cert)."""
    www = tmp_path / "www"
    www.mkdir()
    Handler.failed_once, Handler.connections, Handler.requests = set(), 0, 0
    cert, key = self_signed_cert
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(www)))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    httpd.handle_error = lambda *args: None  # fovea hanging up on the oversize body is expected
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}", www, cert
    finally:
        httpd.shutdown()


@contextlib.contextmanager
def s3_server(boto3):  # the module, imported by the caller (a test skips without it)
    """moto on loopback with signature checks on (after the first 5 unauthenticated set-up calls); yields
    (endpoint, access key, secret key) of an IAM user allowed to read the bucket."""
    port = free_port()
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="5")
    proc = subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.time() < deadline, "moto_server did not start"
                time.sleep(0.1)
        kw = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="setup",
                  aws_secret_access_key="setup")
        yield endpoint, boto3.client("s3", **kw), boto3.client("iam", **kw)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
