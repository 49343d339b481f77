"""The cancel signal: a handle the caller holds to cancel runs from outside.

    signal = CancelSignal()
    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(interp.run, agent, "hi", signal=signal))
        ...
        signal.cancel("the user left")     # the run ends promptly, status "cancelled"

It is also how a watcher task stops a stream another task iterates (`aclose()` is for
the iterating task): the stream's `async for` then receives the final chunks and ends.

One signal may be given to many runs; `cancel()` cancels every one of them that is
running and every later one at its start. `cancel()` may be called from any thread: a
run's scope is cancelled on its own event loop's thread (from another thread, the call
waits until that loop has done it).

Vocabulary: a caller *cancels* a run (this signal, a timeout, closing the stream); a
processor *aborts* one (`Abort`, `abort(...)`: a tripwire).
"""

from __future__ import annotations

import contextlib
import threading

import anyio
import anyio.from_thread
import anyio.lowlevel


class CancelSignal:
    """Cancels the runs it is given to. Cancelling twice keeps the first reason."""

    __slots__ = ("_lock", "_reason", "_scopes")

    def __init__(self) -> None:
        self._reason: str | None = None
        # Each watched scope with the thread and event loop it lives on.
        self._scopes: dict[anyio.CancelScope, tuple[int, anyio.lowlevel.EventLoopToken]] = {}
        self._lock = threading.Lock()

    @property
    def cancelled(self) -> bool:
        return self._reason is not None

    @property
    def reason(self) -> str | None:
        """Why it was cancelled; None while it was not."""
        return self._reason

    def cancel(self, reason: str = "cancelled by the caller") -> None:
        """Cancel every run this signal was given to, now and later (from any thread)."""
        with self._lock:
            if self._reason is not None:
                return
            self._reason = reason
            scopes = tuple(self._scopes.items())
        here = threading.get_ident()
        for scope, (thread, token) in scopes:
            if thread == here:
                scope.cancel()
                continue
            # A cancel scope is cancelled on its own loop's thread; a loop that has
            # closed (RuntimeError) ran its run to the end already.
            with contextlib.suppress(RuntimeError):
                anyio.from_thread.run_sync(scope.cancel, token=token)

    # --- for interpreters --------------------------------------------------------------
    def watch(self, scope: anyio.CancelScope) -> None:
        """Cancel `scope` on cancel (at once when already cancelled) until `unwatch`;
        called on the scope's event loop."""
        with self._lock:
            if self._reason is None:
                self._scopes[scope] = (threading.get_ident(), anyio.lowlevel.current_token())
                return
        scope.cancel()

    def unwatch(self, scope: anyio.CancelScope) -> None:
        with self._lock:
            self._scopes.pop(scope, None)

    def __repr__(self) -> str:
        state = f"cancelled: {self._reason!r}" if self._reason is not None else "not cancelled"
        return f"CancelSignal({state})"
