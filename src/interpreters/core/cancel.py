"""The cancel signal: a handle the caller holds to cancel runs from outside.

    signal = CancelSignal()
    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(interp.run, agent, "hi", signal=signal))
        ...
        signal.cancel("the user left")     # the run ends promptly, status "cancelled"

It is also how a watcher task stops a stream another task iterates (`aclose()` is for
the iterating task): the stream's `async for` then receives the final chunks and ends.

One signal may be given to many runs; `cancel()` cancels every one of them that is
running and every later one at its start. Call `cancel()` from the event loop's thread
(from another thread: `anyio.from_thread.run_sync(signal.cancel, reason)`).

Vocabulary: a caller *cancels* a run (this signal, a timeout, closing the stream); a
processor *aborts* one (`Abort`, `abort(...)`: a tripwire).
"""

from __future__ import annotations

import anyio


class CancelSignal:
    """Cancels the runs it is given to. Cancelling twice keeps the first reason."""

    __slots__ = ("_reason", "_scopes")

    def __init__(self) -> None:
        self._reason: str | None = None
        self._scopes: set[anyio.CancelScope] = set()

    @property
    def cancelled(self) -> bool:
        return self._reason is not None

    @property
    def reason(self) -> str | None:
        """Why it was cancelled; None while it was not."""
        return self._reason

    def cancel(self, reason: str = "cancelled by the caller") -> None:
        """Cancel every run this signal was given to, now and later."""
        if self._reason is not None:
            return
        self._reason = reason
        for scope in tuple(self._scopes):
            scope.cancel()

    # --- for interpreters --------------------------------------------------------------
    def watch(self, scope: anyio.CancelScope) -> None:
        """Cancel `scope` on cancel (at once when already cancelled) until `unwatch`."""
        if self._reason is not None:
            scope.cancel()
        else:
            self._scopes.add(scope)

    def unwatch(self, scope: anyio.CancelScope) -> None:
        self._scopes.discard(scope)

    def __repr__(self) -> str:
        state = f"cancelled: {self._reason!r}" if self._reason is not None else "not cancelled"
        return f"CancelSignal({state})"
