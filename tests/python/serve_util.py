"""Starting and probing `fovea serve` from tests and the reliability campaign: a free port, waiting for /health,
reading /metrics, stopping with SIGTERM."""
import http.client
import os
import signal
import socket
import subprocess
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(binary, model, args, log_path, timeout=120):
    """Starts `fovea serve` on a free loopback port with the CPU backend; returns (process, port) once healthy."""
    port = free_port()
    log = open(log_path, "w")
    proc = subprocess.Popen([binary, "serve", "--model", str(model), "--port", str(port), "--backend", "cpu"] + args,
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"fovea serve exited early: {open(log_path).read()[-2000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return proc, port
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("fovea serve did not become healthy")


def metrics(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    values = {}
    for line in conn.getresponse().read().decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def stop(proc, timeout=30):
    """SIGTERM, then the exit code (or None when it had to be killed after `timeout` seconds)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return None
    return proc.returncode
