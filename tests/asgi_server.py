"""An ASGI app served by a real ASGI server (uvicorn) on 127.0.0.1, for the tests that
talk to the examples over loopback."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from examples.asgi_stream import ASGIApp

WAIT = 20.0
"""Seconds the server may take to start or stop."""


@contextmanager
def serve(app: ASGIApp) -> Iterator[str]:
    """`app` under uvicorn on 127.0.0.1 (a port of its own): its base URL."""
    uvicorn = pytest.importorskip("uvicorn")
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    started = threading.Event()
    for _ in range(int(WAIT / 0.05)):
        if srv.started:
            started.set()
            break
        started.wait(0.05)
    assert started.is_set(), "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(WAIT)
        listening.close()
