"""An ASGI app served by a real ASGI server (uvicorn) on 127.0.0.1, for the tests that
talk to the examples over loopback; the demo of examples/asgi_stream.py resumable, its
model's pace held by the test (`serve_held_demo`)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

import anyio.to_thread
import pytest

from examples.asgi_stream import (
    ASGIApp,
    Message,
    Receive,
    Scope,
    Send,
    chat_app,
    demo_agent,
    demo_script,
)
from interpreters import AsyncInterpreter
from interpreters.testing import ScriptedModel
from pipeline.values.result import RunResult

WAIT = 20.0
"""Seconds the server may take to start or stop, and a held model waits at most."""


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


class Runs:
    """The runs an app ended (as its `on_result`, called on the server's thread)."""

    def __init__(self) -> None:
        self.results: list[RunResult] = []
        self._ended = threading.Semaphore(0)
        self._seen = 0

    def __call__(self, result: RunResult) -> None:
        self.results.append(result)
        self._ended.release()

    def ended(self, runs: int) -> list[RunResult]:
        """The runs ended, once `runs` have (a response may end before its run hands its
        result over)."""
        while self._seen < runs:
            assert self._ended.acquire(timeout=WAIT), f"{runs} runs did not end"
            self._seen += 1
        return list(self.results)


class Hold:
    """A scripted model's pace (its `async_sleep`): `free` chunks go at once, the others
    once the test `release()`s them (or `WAIT` passed)."""

    def __init__(self, free: int) -> None:
        self.free = free
        self.released = threading.Event()

    async def sleep(self, seconds: float) -> None:
        if self.free > 0:
            self.free -= 1
            return
        await anyio.to_thread.run_sync(self.released.wait, WAIT, abandon_on_cancel=True)

    def release(self) -> None:
        self.released.set()


class HeldDemo(NamedTuple):
    url: str
    runs: Runs
    hold: Hold
    left: threading.Event
    """Set once the server saw a `POST`'s client go away."""


def _watched(app: ASGIApp, left: threading.Event) -> ASGIApp:
    async def watched(scope: Scope, receive: Receive, send: Send) -> None:
        async def receive_() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and scope.get("method") == "POST":
                left.set()
            return message
        await app(scope, receive_, send)
    return watched


@contextmanager
def serve_held_demo(free: int) -> Iterator[HeldDemo]:
    """The demo agent in a resumable app (`chat_app(..., resumable=True)`) under uvicorn,
    its scripted model held after `free` chunks."""
    hold, runs, left = Hold(free), Runs(), threading.Event()
    model = ScriptedModel(demo_script, async_sleep=hold.sleep)
    app = chat_app(demo_agent(), AsyncInterpreter(model), resumable=True, timeout=WAIT,
                   on_result=runs)
    try:
        with serve(_watched(app, left)) as url:
            yield HeldDemo(url, runs, hold, left)
            hold.release()  # (a test that failed leaves no run waiting)
    finally:
        hold.release()
