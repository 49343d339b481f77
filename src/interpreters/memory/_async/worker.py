"""Blocking work (an embedder's call) in a worker thread, so the event loop never waits
on it. The hand-written twin of `_sync/worker.py`, which calls it in the caller's
thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, TypeVarTuple

import anyio.to_thread

R = TypeVar("R")
Ts = TypeVarTuple("Ts")


async def in_worker(fn: Callable[[*Ts], R], *args: *Ts) -> R:
    return await anyio.to_thread.run_sync(fn, *args)
