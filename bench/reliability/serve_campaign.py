#!/usr/bin/env python3
"""Load and fault campaign against `fovea serve` on the CPU demo model, loopback only (run by hand; figures go to
bench/results/). CLIENTS concurrent clients, each sending requests back to back for SECONDS: 80% good chat
requests (a small image and a question; a quarter streamed), 10% malformed (broken JSON, a bad request line,
an undecodable image, a lying Content-Length, a deep JSON nest, an over-long prompt, a wrong API key), 10%
abandoned (the client hangs up before its answer). When the time is up, clients still waiting hang up too
(counted as cut-at-end). A warm-up round of the same mix comes first; its end is the
RSS reference. Afterwards the server must answer /health, show 0 KV blocks and 0 requests running, and its
RSS must be within 10% of the reference.

usage: serve_campaign.py --fovea build/fovea [--clients 1000] [--seconds 60] [--warmup-seconds 15] [--json OUT]
"""
import argparse
import asyncio
import base64
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "python"))
from serve_util import metrics, rss_kib, start_server, stop  # noqa: E402

from PIL import Image  # noqa: E402

API_KEY = "campaign-key"


def png_data_url(seed):
    buf = io.BytesIO()
    Image.new("RGB", (24 + seed % 40, 24 + seed % 23), (seed % 256, 90, 200 - seed % 100)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def http_request(body, key=API_KEY, length=None, extra=b""):
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: campaign\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + key.encode() + b"\r\n" + extra +
            b"Content-Length: %d\r\n\r\n" % (len(body) if length is None else length))
    return head + body


def good_body(rng):
    seed = rng.randrange(1 << 20)
    return json.dumps({"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": png_data_url(seed)}},
        {"type": "text", "text": f"What is in picture {seed}?"}]}],
        "max_tokens": rng.randint(1, 4), "stream": rng.random() < 0.25}).encode()


def malformed_request(rng):
    """(kind, bytes to send, whether the client half-closes after sending)."""
    kind = rng.choice(["json", "request-line", "image", "short-body", "deep", "context", "key"])
    if kind == "json":
        return kind, http_request(b'{"messages": [{"role": "user", "content": '), False
    if kind == "request-line":
        return kind, b"POST /v1/chat/completions HTTP/9\r\n\r\n", False
    if kind == "image":
        body = json.dumps({"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA"}}]}]})
        return kind, http_request(body.encode()), False
    if kind == "short-body":  # announces more than it sends, then hangs up
        return kind, http_request(b'{"messages": []}', length=5000), True
    if kind == "deep":
        body = b'{"messages": [{"role": "user", "content": "hi"}], "x": ' + b"[" * 200 + b"]" * 200 + b"}"
        return kind, http_request(body), False
    if kind == "context":
        words = " ".join(f"w{i}" for i in range(12000))
        return kind, http_request(json.dumps({"messages": [{"role": "user", "content": words}]}).encode()), False
    return kind, http_request(good_body(rng), key="wrong-key"), False


async def read_status(reader, timeout):
    line = await asyncio.wait_for(reader.readline(), timeout)
    if not line:
        return "closed"
    status = int(line.split()[1])
    # Read to the end of the response: Content-Length or chunked until the terminator, or until close.
    length, chunked = None, False
    while True:
        h = await asyncio.wait_for(reader.readline(), timeout)
        if h in (b"\r\n", b""):
            break
        name, _, value = h.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
        if name.lower() == "transfer-encoding" and "chunked" in value.lower():
            chunked = True
    if length is not None:
        await asyncio.wait_for(reader.readexactly(length), timeout)
    elif chunked:
        while True:
            size = int((await asyncio.wait_for(reader.readline(), timeout)).split(b";")[0], 16)
            await asyncio.wait_for(reader.readexactly(size + 2), timeout)
            if size == 0:
                break
    return status


async def client(port, rng, stop_at, tally, latencies):
    while time.time() < stop_at:
        roll = rng.random()
        t0 = time.time()
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 30)
        except (OSError, asyncio.TimeoutError):
            tally["connect-failed"] += 1
            await asyncio.sleep(0.1)
            continue
        try:
            if roll < 0.1:
                kind, data, half_close = malformed_request(rng)
                writer.write(data)
                await writer.drain()
                if half_close:
                    writer.close()
                    tally["malformed-" + kind + "-hung-up"] += 1
                    continue
                status = await read_status(reader, max(1.0, stop_at - time.time()))
                tally[f"malformed-{kind}-{status}"] += 1
            elif roll < 0.2:
                writer.write(http_request(good_body(rng)))
                await writer.drain()
                await asyncio.sleep(rng.uniform(0.0, 0.5))
                tally["abandoned"] += 1
            else:
                writer.write(http_request(good_body(rng)))
                await writer.drain()
                status = await read_status(reader, max(1.0, stop_at - time.time()))
                tally[f"good-{status}"] += 1
                if status == 200:
                    latencies.append(time.time() - t0)
        except asyncio.TimeoutError:
            # The round is over: every client still waiting hangs up, which the server must cancel.
            tally["cut-at-end"] += 1
        except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as e:
            tally[f"{'malformed' if roll < 0.1 else 'good'}-{type(e).__name__}"] += 1
        finally:
            writer.close()


async def round_of(port, clients, seconds, seed):
    tally, latencies = Counter(), []
    stop_at = time.time() + seconds
    await asyncio.gather(*(client(port, random.Random(seed * 100003 + i), stop_at, tally, latencies)
                           for i in range(clients)))
    return tally, latencies


def settle(port, timeout=300):
    """Waits until nothing runs or waits and no KV block is in use; returns the metrics then."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = metrics(port)
        if m["fovea_running_requests"] == 0 and m["fovea_queue_depth"] == 0 and m["fovea_kv_blocks_used"] == 0:
            return m
        time.sleep(0.5)
    return metrics(port)


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))] if values else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fovea", required=True)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--warmup-seconds", type=float, default=15)
    ap.add_argument("--json")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fovea_campaign_"))
    subprocess.run([args.fovea, "make-demo-model", "--out", str(work / "model")], check=True, capture_output=True)
    proc, port = start_server(args.fovea, work / "model",
                              ["--api-key", API_KEY, "--max-tiles", "1", "--max-connections", str(args.clients + 100)],
                              work / "serve.log")
    report = {"clients": args.clients, "seconds": args.seconds, "warmup_seconds": args.warmup_seconds,
              "rss_kib_loaded": rss_kib(proc.pid)}
    try:
        warm, _ = asyncio.run(round_of(port, args.clients, args.warmup_seconds, 1))
        settle(port)
        report["rss_kib_reference"] = rss_kib(proc.pid)
        t0 = time.time()
        tally, latencies = asyncio.run(round_of(port, args.clients, args.seconds, 2))
        report["wall_s"] = round(time.time() - t0, 1)
        after = settle(port)
        report["rss_kib_after"] = rss_kib(proc.pid)
        health = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", f"http://127.0.0.1:{port}/health"],
                                capture_output=True, text=True).stdout
        report.update({
            "warmup_outcomes": dict(warm), "outcomes": dict(sorted(tally.items())),
            "good_200": tally["good-200"], "good_latency_p50_s": percentile(latencies, 50),
            "good_latency_p99_s": percentile(latencies, 99), "health_after": health,
            "kv_blocks_used_after": after["fovea_kv_blocks_used"], "running_after": after["fovea_running_requests"],
            "cancelled_total": after["fovea_requests_cancelled_total"],
            "rss_change_pct": round(100.0 * (report["rss_kib_after"] / report["rss_kib_reference"] - 1), 2),
        })
        good_failures = sum(v for k, v in tally.items() if k.startswith("good-") and k != "good-200")
        report["good_not_200"] = good_failures
        report["pass"] = (health == "200" and after["fovea_kv_blocks_used"] == 0 and
                          after["fovea_running_requests"] == 0 and abs(report["rss_change_pct"]) <= 10 and
                          good_failures == 0 and tally["good-200"] > 0)
    finally:
        report["exit_code"] = stop(proc, timeout=60)
    print(json.dumps(report, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0 if report["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
