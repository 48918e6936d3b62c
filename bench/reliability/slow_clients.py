#!/usr/bin/env python3
"""Slow and idle clients against an HTTP server on loopback, then /health probes: how many answer, how fast.
Used for the HTTP server decision (fovea serve against cpp-httplib, httplib_probe_server.cc).

usage: slow_clients.py --port P [--slow 300] [--idle 1024] [--probes 20] [--key KEY]
  --slow N   connections that send a POST head announcing a 100 kB body, then one body byte per second
  --idle N   connections that send nothing
"""
import argparse
import http.client
import json
import socket
import threading
import time


def hold(port, slow, stop, opened):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError:
        return
    opened.append(s)
    if not slow:
        return
    try:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100000\r\n\r\n{")
        while not stop.is_set():
            s.sendall(b" ")
            stop.wait(1.0)
    except OSError:
        pass


def probe(port, timeout):
    t0 = time.time()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("GET", "/health")
        status = c.getresponse().status
    except (OSError, http.client.HTTPException) as e:
        return type(e).__name__, time.time() - t0
    return status, time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--slow", type=int, default=300)
    ap.add_argument("--idle", type=int, default=1024)
    ap.add_argument("--probes", type=int, default=20)
    ap.add_argument("--probe-timeout", type=float, default=5)
    args = ap.parse_args()
    stop, opened, threads = threading.Event(), [], []
    for i in range(args.slow + args.idle):
        t = threading.Thread(target=hold, args=(args.port, i < args.slow, stop, opened), daemon=True)
        t.start()
        threads.append(t)
    time.sleep(3)  # let every connection arrive and the slow ones start trickling
    results = [probe(args.port, args.probe_timeout) for _ in range(args.probes)]
    stop.set()
    ok = [t for s, t in results if s == 200]
    report = {"slow": args.slow, "idle": args.idle, "connections_opened": len(opened), "probes": args.probes,
              "health_200": len(ok), "outcomes": sorted({str(s) for s, _ in results}),
              "health_max_s": round(max(ok), 3) if ok else None}
    print(json.dumps(report))
    for s in opened:
        s.close()


if __name__ == "__main__":
    main()
