#!/usr/bin/env python3
"""Hostile inputs at the batch job's doors (issue 25), run by hand on the CPU build with the demo model: each case
builds its reproducer (and variants) in a scratch folder, runs `fovea run` (or `fovea tokenize`, `fovea serve`)
on it with a timeout, and records the outcome of every record it expects:

  answer   the record is an answer          error   the record is an error (its message kept, cut to 160 chars)
  missing  no record                        crash   the process died of a signal
  hang     the timeout passed               refused the process exited non-zero with a message (for a whole input)

plus the exit status, the wall time and whether the run matched what the case expects. A good record sits beside
every hostile one, so a hostile line that took the job down shows up as a missing good record.

usage: hostile_doors_campaign.py --fovea build-cpu/fovea [--json OUT] [--timeout 60] [--only NAME]
(an ASan + UBSan fovea from scripts/build_sanitize.sh fovea works too, with --no-memory-cap: a sanitizer report
counts as a crash)
"""
import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

PROMPT = "Is there a bed?"


def chat_body(content, **extra):
    return {"messages": [{"role": "user", "content": content}], "max_tokens": 2, **extra}


def openai_line(custom_id, body):
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def image_part(url):
    return [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": PROMPT}]


class Campaign:
    def __init__(self, fovea, work, timeout):
        self.fovea, self.work, self.timeout = fovea, work, timeout
        self.model = work / "model"
        subprocess.run([fovea, "make-demo-model", "--out", str(self.model)], check=True, capture_output=True)
        self.image = work / "good.png"
        Image.new("RGB", (40, 30), (120, 80, 160)).save(self.image)
        self.rows = []

    def run_cmd(self, args, stdin=None, preexec=None):
        """(exit status, stderr, seconds); status None after the timeout, negative for a signal or for a report of
        AddressSanitizer / UndefinedBehaviorSanitizer (a sanitizer build exits 1 on one: counted as a crash)."""
        t0 = time.time()
        try:
            proc = subprocess.run(args, capture_output=True, timeout=self.timeout, input=stdin, preexec_fn=preexec)
            stderr = proc.stderr.decode(errors="replace")
            sanitizer = "ERROR: AddressSanitizer" in stderr or "runtime error:" in stderr or "ERROR: LeakSanitizer" in stderr
            return (-1000 if sanitizer else proc.returncode), stderr, time.time() - t0
        except subprocess.TimeoutExpired as e:
            return None, (e.stderr or b"").decode(errors="replace"), time.time() - t0

    def fovea_run(self, name, lines, expect, extra=(), raw=None, preexec=None, key="id", input_path=None):
        """Writes the input (JSON lines, or raw bytes), runs `fovea run`, and compares each expected record."""
        folder = self.work / name
        folder.mkdir(exist_ok=True)
        path = input_path or folder / "input.jsonl"
        if input_path is None:
            data = raw if raw is not None else "".join(json.dumps(l) + "\n" for l in lines).encode()
            path.write_bytes(data)
        out = folder / "out.jsonl"
        rc, stderr, seconds = self.run_cmd(
            [self.fovea, "run", "--model", str(self.model), "--input", str(path), "--output", str(out), "--backend",
             "cpu", "--max-tiles", "1", "--kv-blocks", "256", "--quiet", *extra], preexec=preexec)
        records = {}
        if out.exists():
            for text in out.read_text(errors="replace").splitlines():
                try:
                    r = json.loads(text)
                except ValueError:
                    continue
                ident = r.get("custom_id", r.get("id"))
                records[str(ident)] = r
        outcomes = {}
        if not expect:  # a hazard to the whole input: refused with a message, exit 1
            expect = {"input": "refused"}
            outcomes["input"] = "refused" if rc is not None and rc > 0 else ("hang" if rc is None else f"exit {rc}")
        for ident in (k for k in expect if k != "input"):
            r = records.get(ident)
            if rc is None:
                outcomes[ident] = "hang"
            elif rc < 0:
                outcomes[ident] = "crash"
            elif r is None:
                outcomes[ident] = "missing"
            elif "custom_id" in r:
                outcomes[ident] = "answer" if r["error"] is None else "error"
            else:
                outcomes[ident] = "error" if "error" in r else "answer"
        messages = {}
        for ident, r in records.items():
            if "custom_id" in r and r["error"] is not None:
                messages[ident] = r["error"]["message"]
            elif "custom_id" not in r and "error" in r:
                messages[ident] = r["error"]
        return self.record(name, rc, seconds, stderr, expect, outcomes, messages,
                           {k: len(json.dumps(v)) for k, v in records.items()})

    def record(self, name, rc, seconds, stderr, expect, outcomes, messages=None, record_bytes=None, note=""):
        ok = all(outcomes.get(k) == v for k, v in expect.items())
        row = {"case": name, "exit": "timeout" if rc is None else rc, "seconds": round(seconds, 2),
               "expected": expect, "outcomes": outcomes, "pass": ok,
               "messages": {k: v[:160] for k, v in (messages or {}).items()},
               "largest_record_bytes": max((record_bytes or {0: 0}).values()),
               "stderr_tail": stderr.strip().splitlines()[-3:] if stderr.strip() else [], "note": note}
        self.rows.append(row)
        status = "ok  " if ok else "FAIL"
        print(f"{status} {name:34s} exit={row['exit']!s:8s} {seconds:6.2f}s {outcomes}", flush=True)
        return row


def deep_line_text(custom_id, depth):
    nest = "[" * depth + "]" * depth
    return ('{"custom_id":"%s","method":"POST","url":"/v1/chat/completions","body":{"messages":[],"x":%s}}\n'
            % (custom_id, nest))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fovea", required=True)
    ap.add_argument("--json")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--only")
    ap.add_argument("--no-memory-cap", action="store_true",
                    help="run the /dev/zero input without the 4 GiB address-space cap (ASan cannot start under one)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fovea_hostile_"))
    c = Campaign(os.path.abspath(args.fovea), work, args.timeout)
    good_task = {"id": "good", "image": str(c.image), "prompt": PROMPT, "max_tokens": 2}
    good_line = openai_line("good", chat_body(image_part(str(c.image))))
    want = lambda **kw: kw  # noqa: E731
    cases = {}

    def case(fn):
        cases[fn.__name__] = fn
        return fn

    # 1. deep OpenAI bodies (and a deep task line) beside a good line
    for depth in (30_000, 100_000, 2_000_000):
        def deep_body(depth=depth):
            raw = (deep_line_text("deep", depth) + json.dumps(good_line) + "\n").encode()
            c.fovea_run(f"openai_body_nested_{depth}", None, want(deep="error", good="answer"), raw=raw)
        cases[f"openai_body_nested_{depth}"] = deep_body

    @case
    def task_line_nested_2000000():
        nest = "[" * 2_000_000 + "]" * 2_000_000
        raw = ('{"id":"deep","prompt":"q","x":%s}\n' % nest + json.dumps(good_task) + "\n").encode()
        c.fovea_run("task_line_nested_2000000", None, want(deep="error", good="answer"), raw=raw)

    # 2. FIFOs, links to FIFOs, directories, devices, NULs as image paths, through both formats
    fifo = work / "pipe.png"
    os.mkfifo(fifo)
    (work / "to_pipe.png").symlink_to(fifo)
    hostile_paths = {"fifo": str(fifo), "fifo_link": str(work / "to_pipe.png"), "directory": str(work),
                     "dev_zero": "/dev/zero", "dev_urandom": "/dev/urandom", "nul_in_path": str(c.image) + "\0.txt",
                     "path_1mb": "/" + "a" * 1_000_000}
    for label, path in hostile_paths.items():
        def tasks_door(label=label, path=path):
            c.fovea_run(f"tasks_image_{label}", [{"id": "bad", "image": path, "prompt": PROMPT}, good_task],
                        want(bad="error", good="answer"))
        cases[f"tasks_image_{label}"] = tasks_door

        def openai_door(label=label, path=path):
            c.fovea_run(f"openai_image_{label}", [openai_line("bad", chat_body(image_part(path))), good_line],
                        want(bad="error", good="answer"))
        cases[f"openai_image_{label}"] = openai_door

    # 3. the format is recognised per line: garbage first, mixed formats, forced formats
    @case
    def first_line_garbage_then_openai():
        raw = b"this is not JSON\n" + "".join(json.dumps(l) + "\n" for l in [
            good_line, openai_line("second", chat_body("hi"))]).encode()
        c.fovea_run("first_line_garbage_then_openai", None, want(good="answer", second="answer"), raw=raw)

    @case
    def mixed_tasks_and_openai_lines():
        c.fovea_run("mixed_tasks_and_openai_lines", [good_line, {"id": "task", "prompt": "hi", "max_tokens": 2}],
                    want(good="answer", task="answer"))

    @case
    def forced_openai_on_a_tasks_line():
        c.fovea_run("forced_openai_on_a_tasks_line", [good_line, {"id": "task", "prompt": "hi"}], want(good="answer"),
                    extra=("--input-format", "openai"))

    # 4. ids made from "prompts" against the user's own ids
    @case
    def prompt_ids_collide_with_user_ids():
        lines = [{"id": "a", "image": str(c.image), "prompts": ["q0", "q1"]}, {"id": "a#1", "prompt": "q"},
                 {"id": "7#0", "prompt": "q"}, {"id": 7, "prompts": ["q0"]}]
        row = c.fovea_run("prompt_ids_collide_with_user_ids", lines, want(**{"a#0": "answer", "a#1": "answer",
                                                                             "7#0": "answer"}))
        named = [l for l in row["stderr_tail"] if "already used by" in l]
        row["note"] = f"{len(named)} collision lines on stderr naming both lines; exit {row['exit']} (1 expected)"
        row["pass"] = row["pass"] and row["exit"] == 1 and len(named) >= 1

    # 5. choices: empty, over-long
    @case
    def choices_empty_and_huge():
        lines = [{"id": "empty", "prompt": "q", "choices": []}, {"id": "huge", "prompt": "q", "choices": ["x" * 1_000_000]},
                 openai_line("o_empty", chat_body("q", guided_choice=[])),
                 openai_line("o_huge", chat_body("q", guided_choice=["y" * 1_000_000])),
                 openai_line("o_choice", chat_body("q", guided_choice=["yes", "no"])), good_task]
        row = c.fovea_run("choices_empty_and_huge", lines, want(empty="error", huge="error", o_empty="error",
                                                               o_huge="error", o_choice="answer", good="answer"))
        row["pass"] = row["pass"] and row["largest_record_bytes"] < 4096

    # 6. whole-input hazards
    @case
    def input_dev_zero_under_memory_cap():
        cap = None if args.no_memory_cap else lambda: resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
        c.fovea_run("input_dev_zero_under_memory_cap", None, {}, input_path=Path("/dev/zero"), preexec=cap)

    @case
    def input_is_a_directory():
        c.fovea_run("input_is_a_directory", None, {}, input_path=work)

    @case
    def input_line_2mb_garbage():
        raw = b"x" * 2_000_000 + b"\n" + (json.dumps(good_task) + "\n").encode()
        c.fovea_run("input_line_2mb_garbage", None, want(good="answer"), raw=raw)

    @case
    def retry_failed_on_a_full_disk():
        folder = work / "retry_failed_on_a_full_disk"
        folder.mkdir(exist_ok=True)
        out = folder / "out.jsonl"
        lines = [{"id": f"t{i}", "prompt": "q", "max_tokens": 1} for i in range(300)]
        lines.append({"id": "bad", "image": str(work / "missing.png"), "prompt": "q"})
        (folder / "input.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
        base = [c.fovea, "run", "--model", str(c.model), "--input", str(folder / "input.jsonl"), "--output", str(out),
                "--backend", "cpu", "--kv-blocks", "256", "--quiet"]
        c.run_cmd(base)
        before = out.read_bytes()
        # RLIMIT_FSIZE below the kept records' size: the rewrite fails as on a full disk (EFBIG).
        small = lambda: (signal.signal(signal.SIGXFSZ, signal.SIG_IGN),  # noqa: E731
                         resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)))
        rc, stderr, seconds = c.run_cmd(base + ["--retry-failed"], preexec=small)
        leftover = (folder / "out.jsonl.tmp").exists()
        outcomes = {"exit_nonzero": rc is not None and rc > 0, "tmp_left": leftover, "results_kept": out.read_bytes() == before}
        c.record("retry_failed_on_a_full_disk", rc, seconds, stderr,
                 {"exit_nonzero": True, "tmp_left": False, "results_kept": True}, outcomes)

    # 7. URLs through the OpenAI format: s3:// with the job's own endpoint, an unreachable http:// URL
    @case
    def openai_image_urls_use_fetch_options():
        lines = [openai_line("s3", chat_body(image_part("s3://bucket/key.png"))),
                 openai_line("http", chat_body(image_part("http://127.0.0.1:1/a.png"))), good_line]
        row = c.fovea_run("openai_image_urls_use_fetch_options", lines, want(s3="error", http="error", good="answer"),
                          extra=("--s3-endpoint", "http://127.0.0.1:1", "--fetch-retries", "0"))
        row["pass"] = row["pass"] and not any("--allow" in m for m in row["messages"].values())

    # 8. other doors
    @case
    def tokenize_decode_out_of_vocabulary():
        outcomes = {}
        for ids in ("-1", "2147483647", "5"):
            rc, stderr, seconds = c.run_cmd([c.fovea, "tokenize", "--tokenizer", str(c.model), "--decode"],
                                            stdin=ids.encode())
            outcomes[ids] = "refused" if rc and rc > 0 else ("answer" if rc == 0 else str(rc))
        c.record("tokenize_decode_out_of_vocabulary", 0, seconds, stderr,
                 {"-1": "refused", "2147483647": "refused", "5": "answer"}, outcomes)

    @case
    def serve_request_line_with_bare_lf():
        port = free_port()
        server = subprocess.Popen([c.fovea, "serve", "--model", str(c.model), "--backend", "cpu", "--port", str(port),
                                   "--kv-blocks", "256"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 60
            while time.time() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.2)
            t0 = time.time()
            s = socket.create_connection(("127.0.0.1", port), timeout=40)
            s.sendall(b"GET /health HTTP/1.1\nHost: x\n\n")
            reply = s.recv(4096).decode(errors="replace")
            seconds = time.time() - t0
            status = reply.split(" ")[1] if reply.startswith("HTTP/1.1 ") else "none"
            c.record("serve_request_line_with_bare_lf", 0, seconds, "", {"status": "400"}, {"status": status},
                     note="400 at once; was 408 after 30 s")
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)

    @case
    def checkpoint_layers_fewer_than_weights():
        bad = work / "model_fewer_layers"
        subprocess.run(["cp", "-r", str(c.model), str(bad)], check=True)
        config = json.loads((bad / "config.json").read_text())
        llm = config.get("llm_config", config.get("text_config", config))
        llm["num_hidden_layers"] = max(1, llm["num_hidden_layers"] - 1)
        (bad / "config.json").write_text(json.dumps(config))
        folder = work / "checkpoint_layers_fewer_than_weights"
        folder.mkdir(exist_ok=True)
        (folder / "input.jsonl").write_text(json.dumps(good_task) + "\n")
        rc, stderr, seconds = c.run_cmd([c.fovea, "run", "--model", str(bad), "--input", str(folder / "input.jsonl"),
                                         "--output", str(folder / "out.jsonl"), "--backend", "cpu", "--quiet"])
        named = "num_hidden_layers" in stderr
        c.record("checkpoint_layers_fewer_than_weights", rc, seconds, stderr, {"load": "refused naming the key"},
                 {"load": "refused naming the key" if rc and rc > 0 and named else f"exit {rc}"})

    @case
    def checkpoint_eos_outside_vocabulary():
        bad = work / "model_bad_eos"
        subprocess.run(["cp", "-r", str(c.model), str(bad)], check=True)
        path = bad / "tokenizer_config.json"
        config = json.loads(path.read_text()) if path.exists() else {}
        config.setdefault("added_tokens_decoder", {})["999999"] = {"content": "<|bad_eos|>", "special": True}
        config["eos_token"] = "<|bad_eos|>"
        path.write_text(json.dumps(config))
        folder = work / "checkpoint_eos_outside_vocabulary"
        folder.mkdir(exist_ok=True)
        (folder / "input.jsonl").write_text(json.dumps(good_task) + "\n")
        rc, stderr, seconds = c.run_cmd([c.fovea, "run", "--model", str(bad), "--input", str(folder / "input.jsonl"),
                                         "--output", str(folder / "out.jsonl"), "--backend", "cpu", "--quiet"])
        c.record("checkpoint_eos_outside_vocabulary", rc, seconds, stderr, {"load": "refused"},
                 {"load": "refused" if rc and rc > 0 and "vocabulary" in stderr else f"exit {rc}"})

    for name, fn in cases.items():
        if args.only and args.only not in name:
            continue
        try:
            fn()
        except Exception as e:  # a case that cannot run is a finding too
            c.record(name, None, 0.0, repr(e), {"case": "ran"}, {"case": f"raised {type(e).__name__}: {e}"})
    passed = sum(r["pass"] for r in c.rows)
    print(f"{passed}/{len(c.rows)} cases as expected; scratch folder {work}")
    if args.json:
        Path(args.json).write_text(json.dumps({"fovea": args.fovea, "timeout_s": args.timeout, "cases": c.rows},
                                              indent=1) + "\n")
    return 0 if passed == len(c.rows) else 1


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


if __name__ == "__main__":
    sys.exit(main())
