"""Blocking work (an embedder's call), in the caller's thread: the sync interpreter's
thread waits on it as it waits on the store. The hand-written twin of
`_async/worker.py`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, TypeVarTuple

R = TypeVar("R")
Ts = TypeVarTuple("Ts")


def in_worker(fn: Callable[[*Ts], R], *args: *Ts) -> R:
    return fn(*args)
