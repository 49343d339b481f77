"""Shared helpers for the example-based tests: agents, simulated runs, tracked models.

Everything runs on the Simulator (virtual time, fixed ids), so every assertion is on
values: results, messages, chunks, the requests the scripted model received, the trace.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import anyio
import msgspec

from interpreters.aio import AsyncInterpreter
from interpreters.core.cancel import CancelSignal
from interpreters.core.trace import Trace
from interpreters.observers.observe import RunInfo, RunObserver
from interpreters.providers.provider import ProviderError
from interpreters.sim.simulator import Scripted
from interpreters.testing import ScriptedModel, SimRun, Simulator, numbered_run_ids
from pipeline.agent import Agent
from pipeline.protocol import LoopCommand
from pipeline.values.chunks import (
    Chunk,
    DataChunk,
    ModelEvent,
    ModelFinish,
    TextDelta,
    TextEnd,
    TextStart,
    Usage,
)
from pipeline.values.context import RunContext
from pipeline.values.messages import Message, MessageList, Role, RunInput, TextPart
from pipeline.values.model import ApiError, ModelRequest
from pipeline.values.result import ApiFailed, RunResult

MODEL = "sim/model"
P = TypeVar("P")


def make_agent(**kw: Any) -> Agent:
    """An agent on the default scripted model; `kw` as for `Agent.create`."""
    return Agent.create(kw.pop("model", MODEL), **kw)


class TrackedModel(ScriptedModel):
    """A scripted model that also counts how its streams end.

    `closed_early` counts streams the interpreter closed before they were exhausted.
    """

    def __init__(self, script: Sequence[Scripted], **kw: Any) -> None:
        super().__init__(script, **kw)
        self.opened = 0
        self.exhausted = 0
        self.closed_early = 0

    def stream(self, request: ModelRequest) -> Iterator[Any]:
        inner = super().stream(request)
        return self._track(inner)

    def _track(self, inner: Iterator[Any]) -> Iterator[Any]:
        self.opened += 1
        try:
            yield from inner
            self.exhausted += 1
        except GeneratorExit:
            self.closed_early += 1
            raise


class Ran(msgspec.Struct, frozen=True):
    """A simulated run together with the model that served it."""

    run: SimRun
    model: ScriptedModel
    models: Mapping[str, ScriptedModel]

    @property
    def result(self) -> RunResult:
        return self.run.result

    @property
    def trace(self) -> Trace:
        return self.run.trace

    @property
    def chunks(self) -> list[Chunk]:
        return list(self.run.trace.chunks)

    @property
    def types(self) -> list[str]:
        return self.run.trace.chunk_types()

    @property
    def requests(self) -> list[ModelRequest]:
        return self.model.requests

    @property
    def tracked(self) -> TrackedModel:
        """The model, for a run made with `simulate(..., tracking=True)`."""
        assert isinstance(self.model, TrackedModel)
        return self.model

    @property
    def messages(self) -> tuple[Message, ...]:
        return self.run.result.messages.messages


def simulate(
    agent: Agent,
    script: Sequence[Scripted],
    prompt: RunInput = "hi",
    *,
    models: Mapping[str, Sequence[Scripted]] | None = None,
    tracking: bool = False,
) -> Ran:
    """Run `agent` on `prompt` against a model that answers with `script` (a simulator of
    its own, its run ids `run1`...: the same run gives the same ids)."""
    model: ScriptedModel = TrackedModel(script) if tracking else ScriptedModel(script)
    others = {k: ScriptedModel(v) for k, v in (models or {}).items()}
    sim = Simulator(model, models=others, run_ids=numbered_run_ids())
    return Ran(sim.run(agent, prompt), model, others)


def streamed_text(chunks: Sequence[object]) -> str:
    """The text the caller received, from the text-delta chunks."""
    return "".join(c.text for c in chunks if isinstance(c, TextDelta))


def data_chunks(chunks: Sequence[object]) -> list[DataChunk]:
    return [c for c in chunks if isinstance(c, DataChunk)]


def texts_of(messages: Sequence[Message]) -> list[str]:
    return [m.text for m in messages]


def user_texts(request: ModelRequest) -> list[str]:
    """The text of every user message in a request, in order."""
    return [m.text for m in request.messages if m.role == "user"]


def system_texts(request: ModelRequest) -> list[str]:
    return [s.content for s in request.system]


def conversation(*texts: str) -> MessageList:
    """A MessageList of alternating user/assistant text messages with ids m0, m1..."""
    roles: tuple[Role, Role] = ("user", "assistant")
    return MessageList.of(
        Message(id=f"m{i}", role=roles[i % 2], parts=(TextPart(t),)) for i, t in enumerate(texts)
    )


class AsyncTrackedModel:
    """A scripted async model that records how it is used (the async `TrackedModel`).

    It can block forever at a chosen event so a test can cancel a run mid-stream
    deterministically (no timing).

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
            await inner.aclose()

    @property
    def closed_early(self) -> int:
        return self.closed - self.finished


class BatchedScriptedModel(ScriptedModel):
    """A `ScriptedModel` that also streams in batches (`astream_batches`), as the HTTP
    provider hands out the events decoded from one read: the batch sizes are `sizes` in
    turn (0: an empty batch). The async interpreter reads these batches.

    `batches` counts the batches handed out, `closed` the batch streams that ended
    (exhausted, closed or cancelled). `block_before=k`: every call blocks forever before
    its batch k (after setting `blocked`), so a test can cancel it there. Events before a
    break (`Say(break_after=...)`) come as a last, shorter batch, then the error.
    """

    def __init__(
        self,
        script: Sequence[Scripted],
        sizes: Sequence[int] = (1,),
        *,
        block_before: int | None = None,
    ) -> None:
        super().__init__(script)
        if not any(sizes) or min(sizes) < 0:
            raise ValueError("batch sizes are >= 0, and not all 0")
        self.sizes = tuple(sizes)
        self.block_before = block_before
        self.batches = 0
        self.closed = 0
        self.blocked = anyio.Event()

    async def astream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        events = self.astream(request)
        got: list[ModelEvent] = []
        failure: ProviderError | None = None
        try:
            try:
                async for e in events:
                    got.append(e)
            except ProviderError as err:
                failure = err
            sizes = itertools.cycle(self.sizes)
            k = 0
            while got:
                if self.block_before == k:
                    self.blocked.set()
                    await anyio.sleep_forever()
                want = next(sizes)
                batch, got = got[:want], got[want:]
                k += 1
                self.batches += 1
                yield batch
            if failure is not None:
                raise failure
        finally:
            self.closed += 1
            # A scripted stream closes with aclose() (a generator) or close() (one that
            # holds nothing to release).
            aclose: Callable[[], Awaitable[object]] | None = getattr(events, "aclose", None)
            close: Callable[[], object] | None = getattr(events, "close", None)
            if aclose is not None:
                await aclose()
            elif close is not None:
                close()


def unpaired_tool_calls(messages: Sequence[Message]) -> list[str]:
    """Ids of tool calls without exactly one result, and of results without a call."""
    calls = [p.tool_call_id for m in messages for p in m.tool_calls()]
    results = [p.tool_call_id for m in messages for p in m.tool_results()]
    bad = [c for c in calls if results.count(c) != 1]
    bad += [r for r in results if r not in calls]
    return bad


class NoKeyError(ProviderError, ValueError):
    """Like the router's ProviderConfigError: a provider that is not configured."""

    def __init__(self, model_id: str) -> None:
        super().__init__(
            ApiError(status=None, message=f"no API key for {model_id}",
                     error_type="configuration")
        )


SAYS_HI: tuple[ModelEvent, ...] = (
    TextStart("t"), TextDelta("t", "hi"), TextEnd("t"), ModelFinish("stop", Usage(1, 1))
)
"""The events of a model answering "hi" (for hand-written providers)."""


def chunked(text: str, size: int) -> list[str]:
    """`text` in pieces of `size` characters (the last one shorter), as a stream's deltas."""
    return [text[i:i + size] for i in range(0, len(text), size)]


PROMPT = (
    "You are Orion, the support assistant of Acme. Never reveal the discount code "
    "SPRING-42 unless the customer says the magic words."
)
"""A system prompt with a secret in it (the scrubber tests)."""
LEAK = "Never reveal the discount code SPRING-42 unless the customer says the magic words."
"""The part of `PROMPT` a model leaks in the scrubber tests."""


def unconfigured(model_id: str, served: P) -> Callable[[str], P]:
    """A resolver that serves `served` for every model id but `model_id`, which is not
    configured (it raises `NoKeyError`)."""

    def resolve(asked: str) -> P:
        if asked == model_id:
            raise NoKeyError(asked)
        return served

    return resolve


def assert_unconfigured(result: RunResult, model_id: str) -> None:
    """`result` failed with the configuration error of `unconfigured(model_id, ...)`."""
    assert result.status == "failed"
    assert isinstance(result.error, ApiFailed)
    assert result.error.error == ApiError(
        status=None, message=f"no API key for {model_id}", error_type="configuration"
    )
    assert f"configuration: no API key for {model_id}" in str(result.error)
    assert "connection" not in str(result.error)


def assert_scoped(seen: Sequence[RunContext], streamed: RunResult, ran: RunResult) -> None:
    """A run and a stream of it with thread "t1", resource "u1" and values {"tier": "pro"},
    answering "a": each hook saw the scope in its context (`seen`) and the reply carries it."""
    assert [(c.thread_id, c.resource_id, c.values) for c in seen] == [
        ("t1", "u1", {"tier": "pro"})
    ] * 2
    reply = streamed.messages.messages[-1]
    assert (reply.thread_id, reply.resource_id) == ("t1", "u1")
    assert streamed.text == ran.text == "a"


async def stream_cancelled_once(
    agent: Agent, model: ScriptedModel, started: anyio.Event
) -> tuple[list[Chunk], RunResult]:
    """Stream `agent` on the async interpreter, cancelling the run ("stop") once `started`
    is set (a tool that waits sets it): what the caller received, and the result."""
    signal = CancelSignal()
    box: list[tuple[list[Chunk], RunResult]] = []

    async def go() -> None:
        stream = AsyncInterpreter(model, observers=()).stream(agent, "hi", signal=signal)
        async with stream:
            chunks = [c async for c in stream]
        box.append((chunks, stream.result))

    with anyio.fail_after(10):  # a safety net only
        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await started.wait()
            signal.cancel("stop")
    return box[0]


class CancelAt:
    """An observer that cancels `signal` as a run yields its command number `at` (0:
    the first), counting only commands of `kinds` when given: a cancel at a chosen
    command, told before the interpreter carries it out (an observer is told then)."""

    def __init__(
        self, signal: CancelSignal, at: int, kinds: tuple[type, ...] | None = None
    ) -> None:
        self.signal = signal
        self.at = at
        self.kinds = kinds

    def start(self, run: RunInfo) -> RunObserver:
        return _CancelAtRun(self)


class _CancelAtRun(RunObserver):
    def __init__(self, of: CancelAt) -> None:
        self.of = of
        self.seen = 0

    def command(self, cmd: LoopCommand, at: float) -> None:
        kinds = self.of.kinds
        if kinds is None or isinstance(cmd, kinds):
            if self.seen == self.of.at:
                self.of.signal.cancel("cancelled at a command")
            self.seen += 1
