"""A test driver that cancels a run at its k-th command, under any interpreter.

`cancelling_at(k)` patches where the interpreters make a run's agent loop, so that each
run's loop is wrapped: the loop's commands go out as usual until the k-th (0-based), at which
`RunCancelled` is thrown into the loop instead of carrying the command out, as an
interpreter does on a cancel or a timeout. So a test can hit every phase of a run in
turn, deterministically, on the sync and the async interpreters alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any
from unittest.mock import patch

import interpreters.observers.observe
import interpreters.run.common
from effects import AwaitHook, Done
from pipeline.loop import agent_loop
from pipeline.protocol import AgentLoop, RunCancelled, discard

REASON = "cut by the test"


def cancel_at(loop: AgentLoop, k: int, reason: str = REASON) -> AgentLoop:
    """`loop`, cancelled at its k-th command (never, if the run has fewer)."""
    n = 0
    cmd = next(loop)
    try:
        while True:
            if isinstance(cmd, Done):
                yield cmd
                return cmd.result
            if n == k:
                n += 1
                if isinstance(cmd, AwaitHook):
                    discard(cmd.awaitable)  # never awaited
                cmd = loop.throw(RunCancelled(reason))
                continue
            n += 1
            try:
                reply = yield cmd
            except GeneratorExit:
                raise
            except BaseException as e:
                cmd = loop.throw(e)
            else:
                cmd = loop.send(reply)
    finally:
        loop.close()


@contextmanager
def cancelling_at(k: int, reason: str = REASON) -> Iterator[None]:
    """Within the block, every run an interpreter starts is cancelled at
    its k-th command. (A run's trace records every command: `len(trace.commands)` runs
    cover every index.)"""

    def wrapped(*args: Any, **kwargs: Any) -> AgentLoop:
        return cancel_at(agent_loop(*args, **kwargs), k, reason)

    with ExitStack() as stack:
        stack.enter_context(patch.object(interpreters.run.common, "agent_loop", wrapped))
        stack.enter_context(patch.object(interpreters.observers.observe, "agent_loop", wrapped))
        yield
