"""Helpers for the async interpreter's tests (imported by tests/test_aio*.py).

`anyio_backend` runs every `@pytest.mark.anyio` test on asyncio and on trio.
`TrackedModel` is a scripted async model that counts what it produced, how its streams
ended, and can block forever at a chosen event so a test can cancel a run mid-stream
deterministically (no timing).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import anyio
import pytest

from interpreters.simulator import Scripted, ScriptedModel
from pipeline.chunks import ModelEvent, ModelFinish
from pipeline.messages import Message
from pipeline.model import ModelRequest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class TrackedModel:
    """A scripted async model that records how it is used.

    `block=(n, k)`: call number n (0-based) blocks forever before its event k, after
    setting `blocked`. `produced` counts the events handed out over all calls, `closed`
    the streams whose generator ended (exhausted, closed or cancelled), `finished` those
    that handed out their finish event; `closed_early` the others.
    """

    def __init__(self, script: Sequence[Scripted], *, block: tuple[int, int] | None = None):
        self.inner = ScriptedModel(script)
        self.block = block
        self.produced = 0
        self.opened = 0
        self.closed = 0
        self.finished = 0
        self._blocked: anyio.Event | None = None

    @property
    def requests(self) -> list[ModelRequest]:
        return self.inner.requests

    @property
    def blocked(self) -> anyio.Event:
        if self._blocked is None:
            self._blocked = anyio.Event()
        return self._blocked

    async def astream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        n = len(self.inner.requests)
        self.opened += 1
        inner = self.inner.astream(request)
        try:
            k = 0
            async for e in inner:
                if self.block == (n, k):
                    self.blocked.set()
                    await anyio.sleep_forever()
                self.produced += 1
                k += 1
                if isinstance(e, ModelFinish):
                    self.finished += 1
                yield e
        finally:
            self.closed += 1
            await inner.aclose()  # type: ignore[attr-defined]

    @property
    def closed_early(self) -> int:
        return self.closed - self.finished


def unpaired_tool_calls(messages: Sequence[Message]) -> list[str]:
    """Ids of tool calls without exactly one result, and of results without a call."""
    calls = [p.tool_call_id for m in messages for p in m.tool_calls()]
    results = [p.tool_call_id for m in messages for p in m.tool_results()]
    bad = [c for c in calls if results.count(c) != 1]
    bad += [r for r in results if r not in calls]
    return bad
