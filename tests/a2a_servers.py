"""Agents served over A2A (`interpreters.a2a.a2a_app`) by uvicorn on 127.0.0.1, a port
of their own, for the tests that talk to them over loopback; and the model pace the
tests hold (`Hold`)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from tests.asgi_server import WAIT, Hold

pytest.importorskip("a2a", reason="the a2a extra")
uvicorn = pytest.importorskip("uvicorn")

from starlette.applications import Starlette  # noqa: E402

__all__ = ["WAIT", "Hold", "rpc", "serve_a2a"]


@contextmanager
def serve_a2a(build: Callable[[str], Starlette]) -> Iterator[str]:
    """The app `build(url)` makes for its own URL, under uvicorn: that URL."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{listening.getsockname()[1]}"
    srv = uvicorn.Server(uvicorn.Config(build(url), log_level="critical", lifespan="on"))
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
        yield url
    finally:
        srv.should_exit = True
        thread.join(WAIT)
        listening.close()


def rpc(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One JSON-RPC call (as A2A 0.3 clients make them): its response object."""
    r = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                   timeout=WAIT)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body
