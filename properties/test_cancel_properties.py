"""A cancel never lets unapproved output through, whatever command it lands on.

For generated scripts (text, tool calls over several steps) and an agent with a stream
processor, a generator output-step hook that asks a judge model (`AskModel`), and a final
output-result check (async hooks where the interpreter is async), each run is cancelled
at every command index in turn (`tests.faults.cancel_at`: `RunCancelled` thrown in at
the k-th command, as an interpreter does on a cancel or a timeout), on the sync
`Simulator` and on the `AsyncSimulator` (asyncio and trio); and, through the real
cancel path, a consumer of the async stream aborts its `CancelSignal` after every j-th
chunk in turn. Every processor marks what it
approved (the stream one brackets each text chunk, the judge and the final check tag the
assistant messages); whatever the cancel point:

- the consumer's stream holds only chunks the stream processor passed;
- `result.messages` holds only assistant messages the judge approved (no partial,
  unjudged text), and once the final check was asked, only what it approved (nothing, if
  it was cut off while deciding); `result.text` is made of approved chunks only;
- the history is paired and encodes, and the status is "cancelled" with `Cancelled`
  (or "finished", for a cancel after the run was decided).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Generator, Sequence

import anyio
import anyio.lowlevel
import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from effects import Continue, Replace
from interpreters.core.cancel import CancelSignal
from interpreters.core.trace import Trace
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, SimRun, Simulator, call
from pipeline.agent import Agent
from pipeline.processor import (
    AskModel,
    OutputResultArgs,
    OutputResultResult,
    OutputStepArgs,
    OutputStepResult,
    StreamArgs,
    StreamResult,
    processor,
)
from pipeline.values.chunks import TextDelta
from pipeline.values.messages import MessageList
from pipeline.values.model import ModelRequest
from pipeline.values.pairing import is_paired
from pipeline.values.result import Cancelled
from tests.faults.cancel_at import REASON, cancelling_at
from tests.helpers import BatchedScriptedModel

APPROVED_TEXT = re.compile(r"(\[[a-z ]*\])*")


def echo(x: int) -> int:
    """Echo."""
    return x


def _mark(ml: MessageList, key: str, *, last_only: bool) -> MessageList:
    msgs = list(ml.messages)
    idx = [i for i, s in enumerate(ml.sources) if s == "response" and msgs[i].role == "assistant"]
    for i in idx[-1:] if last_only else idx:
        meta = {**(msgs[i].metadata or {}), key: True}
        msgs[i] = msgspec.structs.replace(msgs[i], metadata=meta)
    return ml.replace_messages(msgs)


def _agent(asked: list[str], *, is_async: bool) -> Agent:
    def tag(args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta):
            return Replace(TextDelta(args.part.id, f"[{args.part.text}]"))
        return Continue()

    async def atag(args: StreamArgs[None]) -> StreamResult[None]:
        await anyio.lowlevel.checkpoint()
        return tag(args)

    def judge(args: OutputStepArgs[None]) -> Generator[object, object, OutputStepResult[None]]:
        yield AskModel(ModelRequest(model="judge", system=(), messages=args.message_list.messages))
        return Replace(_mark(args.message_list, "step_ok", last_only=True))

    def final_now(args: OutputResultArgs[None]) -> OutputResultResult[None]:
        return Replace(_mark(args.message_list, "final", last_only=False))

    async def final_later(args: OutputResultArgs[None]) -> OutputResultResult[None]:
        await anyio.lowlevel.checkpoint()
        return final_now(args)

    def final(
        args: OutputResultArgs[None],
    ) -> OutputResultResult[None] | Awaitable[OutputResultResult[None]]:
        asked.append("final")  # asked: from now on only what it approves may be kept
        return final_later(args) if is_async else final_now(args)

    return Agent.create(
        "m",
        tools=[echo],
        output_processors=[
            processor("tag", process_output_stream=atag if is_async else tag),
            processor("judge", process_output_step=judge),
            processor("final", process_output_result=final),
        ],
    )


def _check(ran: SimRun, asked: list[str], full_text: str) -> None:
    r = ran.result
    assert r.status in ("cancelled", "finished")
    if r.status == "cancelled":
        assert r.error == Cancelled(REASON)
    else:
        assert r.text == full_text
    assert is_paired(r.messages.messages)
    msgspec.json.encode(r.messages)
    response = [m for m in r.messages.response if m.role == "assistant"]
    for m in response:
        assert m.metadata is not None and m.metadata.get("step_ok"), m
        assert not m.incomplete
    if asked:
        final_done = any(e.processor_id == "final" for e in ran.trace.effects)
        if final_done:
            assert all(m.metadata and m.metadata.get("final") for m in response)
        else:  # cut off while deciding: nothing of the response is kept
            assert r.messages.response == ()
    assert APPROVED_TEXT.fullmatch(r.text), r.text
    streamed = [c.text for c in ran.trace.chunks if isinstance(c, TextDelta)]
    assert all(APPROVED_TEXT.fullmatch(t) and t for t in streamed), streamed


pieces = st.lists(st.sampled_from(["a", "b", "c d"]), max_size=3)
scripts = st.lists(
    st.tuples(pieces, st.integers(0, 2)), min_size=0, max_size=2
).flatmap(
    lambda tool_steps: pieces.map(
        lambda last: [
            Say(text, calls=[call("echo", x=i) for i in range(n)]) for text, n in tool_steps
        ] + [Say(last)]
    )
)


def _models(
    script: Sequence[Say], sizes: Sequence[int] | None = None
) -> tuple[ScriptedModel, dict[str, ScriptedModel]]:
    """The agent's model and the judge; with `sizes`, a model that streams in batches
    of those sizes (as the HTTP provider does), read by the async interpreter."""
    model = ScriptedModel(list(script)) if sizes is None else BatchedScriptedModel(script, sizes)
    return model, {"judge": ScriptedModel(lambda _r: Say("yes"))}


@settings(max_examples=50)
@given(scripts)
def test_a_cancel_at_any_command_keeps_only_approved_output_sync(script: list[Say]) -> None:
    """Sync simulator: cancelled at every command index, only approved output is kept."""
    model, models = _models(script)
    full = Simulator(model, models=models).run(_agent([], is_async=False), "hi")
    assert full.result.status == "finished"
    for k in range(len(full.trace.commands)):
        asked: list[str] = []
        model, models = _models(script)
        with cancelling_at(k):
            ran = Simulator(model, models=models).run(_agent(asked, is_async=False), "hi")
        _check(ran, asked, full.result.text)


def _async_every_k(script: list[Say], backend: str, sizes: Sequence[int] | None = None) -> None:
    async def go() -> None:
        model, models = _models(script, sizes)
        full = await AsyncSimulator(model, models=models).run(_agent([], is_async=True), "hi")
        assert full.result.status == "finished"
        for k in range(len(full.trace.commands)):
            asked: list[str] = []
            model, models = _models(script, sizes)
            with cancelling_at(k):
                ran = await AsyncSimulator(model, models=models).run(
                    _agent(asked, is_async=True), "hi"
                )
            _check(ran, asked, full.result.text)

    anyio.run(go, backend=backend)


@settings(max_examples=50)
@given(scripts, st.sampled_from(["asyncio", "trio"]))
def test_a_cancel_at_any_command_keeps_only_approved_output_async(
    script: list[Say], backend: str
) -> None:
    """Async simulator (asyncio and trio, async hooks): the same at every command index."""
    _async_every_k(script, backend)



def _async_signal_after_each_chunk(
    script: list[Say], backend: str, sizes: Sequence[int] | None = None
) -> None:
    async def go() -> None:
        model, models = _models(script, sizes)
        full = await AsyncSimulator(model, models=models).run(_agent([], is_async=True), "hi")
        for j in range(len(full.trace.chunks) + 1):
            asked: list[str] = []
            model, models = _models(script, sizes)
            sim = AsyncSimulator(model, models=models)
            signal = CancelSignal()
            trace = Trace()
            got: list[object] = []
            async with sim.stream(_agent(asked, is_async=True), "hi", signal=signal,
                                  trace=trace) as stream:
                async for c in stream:
                    got.append(c)
                    if len(got) == j:
                        signal.cancel(REASON)  # the real path: the next pull cancels
            assert got == trace.chunks  # the consumer got exactly what the trace says
            _check(SimRun(stream.result, trace, 0.0), asked, full.result.text)

    anyio.run(go, backend=backend)


@settings(max_examples=20)
@given(scripts, st.sampled_from(["asyncio", "trio"]))
def test_an_abort_signal_after_any_chunk_keeps_only_approved_output(
    script: list[Say], backend: str
) -> None:
    """The real cancel path: a consumer aborts the run's signal after its j-th chunk, for
    every j; the stream and the result hold only approved output."""
    _async_signal_after_each_chunk(script, backend)


batch_sizes = st.lists(st.integers(0, 3), min_size=1, max_size=3).filter(any)


@settings(max_examples=20)
@given(scripts, st.sampled_from(["asyncio", "trio"]), batch_sizes)
def test_a_cancel_at_any_command_keeps_only_approved_output_on_batches(
    script: list[Say], backend: str, sizes: list[int]
) -> None:
    """The same, with the model's events handed out in batches (as the HTTP provider's
    of one read): the async interpreter sends a batch's events without an await."""
    _async_every_k(script, backend, sizes)


@settings(max_examples=10)
@given(scripts, st.sampled_from(["asyncio", "trio"]), batch_sizes)
def test_an_abort_signal_after_any_chunk_keeps_only_approved_output_on_batches(
    script: list[Say], backend: str, sizes: list[int]
) -> None:
    """The real cancel path with the model's events in batches."""
    _async_signal_after_each_chunk(script, backend, sizes)
