"""The Market Analyst web app's memory under an oversized request body, on every route
that takes one.

Starts the app (`examples/market_analyst.py --web --offline`) in a process of its own on
a loopback port, then sends each POST/PUT route one body of `--megabytes` (200 MB by
default) over a plain socket, declared in its Content-Length, and reads the answer. The
server's resident memory (VmRSS) and its peak (VmHWM) come from /proc before and after.
A server that reads bodies whole grows by about the body's size; one that refuses them
by their declared length answers before the body is sent and stays where it started.

    .venv/bin/python bench/web_body.py [--megabytes 200]
"""

from __future__ import annotations

import argparse
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import describe

ROOT = Path(__file__).resolve().parents[1]
ROUTES = (
    ("POST", "/api/runs"),
    ("POST", "/api/runs/ma-none/decision"),
    ("PUT", "/api/profile"),
    ("POST", "/api/runs/ma-none/trade"),
    ("POST", "/api/trades/tr-none/decision"),
)
CHUNK = 1 << 20


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of `pid` in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss, peak = (re.search(rf"^{k}:\s+(\d+) kB", status, re.M) for k in ("VmRSS", "VmHWM"))
    assert rss is not None and peak is not None
    return int(rss[1]) / 1024, int(peak[1]) / 1024


def send(port: int, method: str, path: str, megabytes: int) -> tuple[str, float, int]:
    """Send one body of `megabytes`; (status line, seconds, MB actually sent)."""
    size = megabytes * CHUNK
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {size}\r\n\r\n"
    ).encode()
    chunk = b'{"request": "' + b"x" * (CHUNK - 13)
    filler = b"x" * CHUNK
    start, sent = time.perf_counter(), 0
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sock.sendall(head)
        try:
            while sent < size:
                ready, _, _ = select.select([sock], [], [], 0)
                if ready:  # the server answered before the body was all sent
                    break
                piece = chunk if sent == 0 else filler
                if sent + len(piece) >= size:
                    piece = piece[: size - sent - 2] + b'"}'
                sock.sendall(piece)
                sent += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = sock.recv(4096).decode(errors="replace")
    status = answer.splitlines()[0] if answer else "(connection closed, no answer)"
    return status, time.perf_counter() - start, sent // CHUNK


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=200)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    command = [sys.executable, str(ROOT / "examples" / "market_analyst.py"), "--web"]
    with tempfile.TemporaryDirectory() as state:
        server = subprocess.Popen(
            [*command, "--offline", "--latency", "0"],
            cwd=state,
            env={**env, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            found = None
            while found is None:
                line = server.stdout.readline()
                assert line, "the web app did not start"
                found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
            port = int(found[1])
            time.sleep(0.5)
            print(describe())
            print(f"\nOne {args.megabytes} MB body per route, declared in Content-Length.\n")
            print("| route | answer | MB sent | seconds | RSS after, MB | peak RSS, MB |")
            print("|---|---|--:|--:|--:|--:|")
            rss, peak = memory_mb(server.pid)
            print(f"| (idle, before) | | | | {rss:.0f} | {peak:.0f} |")
            for method, path in ROUTES:
                status, seconds, sent = send(port, method, path, args.megabytes)
                rss, peak = memory_mb(server.pid)
                cells = [f"{method} {path}", status, sent, f"{seconds:.2f}", f"{rss:.0f}"]
                print("| " + " | ".join(map(str, [*cells, f"{peak:.0f}"])) + " |", flush=True)
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
