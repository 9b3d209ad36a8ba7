"""Serve the web app on 127.0.0.1: a free port unless one is given, printed when ready.

`.venv/bin/python examples/market_analyst.py --web` (or `make web`) comes here through the command
line, which has already built the model clients and set the tools' latency, as for a
run. Only loopback is bound: the app has no log-in, so it must not face a network.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import uvicorn
from starlette.applications import Starlette

from market_analyst.models import Clients
from market_analyst.store import AnalystStore
from market_analyst.web.app import create_app

HOST = "127.0.0.1"


def bind(port: int = 0) -> socket.socket:
    """A listening socket on 127.0.0.1 (`port=0`: one the system picks that is free)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def url(sock: socket.socket) -> str:
    return f"http://{HOST}:{sock.getsockname()[1]}/"


def server(app: Starlette, *, quiet: bool = False) -> uvicorn.Server:
    """A uvicorn server for `app` (HTTP/1.1, no websockets); `quiet` logs only errors.

    A page watching a run keeps its connection open until the run ends; on Ctrl-C the
    server waits two seconds for such pages, then stops the runs still in flight (each
    is resumable from the command line).
    """
    config = uvicorn.Config(
        app,
        ws="none",
        lifespan="on",
        log_level="error" if quiet else "warning",
        access_log=False,
        timeout_graceful_shutdown=2,
    )
    return uvicorn.Server(config)


def serve_store(
    store: AnalystStore,
    clients: Clients,
    *,
    port: int = 0,
    user: str | None = None,
    say: Callable[[str], None] = print,
) -> int:
    """Serve the app over `store` until Ctrl-C; returns the exit code. `say` is told the
    address once the port is bound, or why it cannot be."""
    try:
        sock = bind(port)
    except OSError as exc:
        say(f"Cannot serve on {HOST}:{port}: {exc.strerror or exc}")
        return 2
    say(f"Market Analyst web app on {url(sock)}  (Ctrl-C to stop)")
    try:
        server(create_app(store, clients, user=user)).run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn stops on Ctrl-C, then raises the signal again
        pass
    finally:
        sock.close()
    return 0
