"""Fault matrix, loop side: a cancel (signal, timeout, or the cancel-at-k driver) at each
phase of a run.

Each cell asserts the typed error (`Cancelled`), that the messages kept are intact and
paired (`is_paired`), that nothing an output processor had not approved is kept (fail
closed), that finished tools keep their real results, and that nothing of the run keeps
running (the hook or tool that waited was cancelled and cleaned up; the model stream
closed).
"""

from __future__ import annotations

from collections.abc import Callable, Generator

import anyio
import anyio.lowlevel
import anyio.to_thread
import msgspec
import pytest

from effects import Continue, Replace
from interpreters.core.cancel import CancelSignal
from interpreters.core.trace import Trace
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.processor import (
    AskModel,
    ModelAnswer,
    OutputResultArgs,
    OutputResultResult,
    OutputStepArgs,
    OutputStepResult,
    Processor,
    StreamArgs,
    StreamResult,
)
from pipeline.tools import make_tool
from pipeline.values.chunks import TextDelta, ToolError, ToolResult
from pipeline.values.messages import Message, MessageList
from pipeline.values.model import ModelRequest
from pipeline.values.pairing import is_paired
from pipeline.values.result import Cancelled, RunResult
from tests.faults.cancel_at import REASON, cancelling_at
from tests.helpers import AsyncTrackedModel

pytestmark = pytest.mark.anyio


def echo(x: int) -> int:
    """Echo."""
    return x


class Stuck:
    """An async hook or tool that waits until cancelled, and records that it was."""

    def __init__(self) -> None:
        self.entered = anyio.Event()
        self.cleaned = False

    async def wait(self) -> None:
        try:
            self.entered.set()
            await anyio.sleep_forever()
        finally:
            self.cleaned = True


async def _run_aborted_when(
    sim: AsyncSimulator, agent: Agent, gate: anyio.Event, prompt: str = "hi"
) -> tuple[RunResult, Trace]:
    signal = CancelSignal()
    trace = Trace()
    box: list[RunResult] = []

    async def go() -> None:
        box.append(await sim.interpreter.run(agent, prompt, signal=signal, trace=trace))

    with anyio.fail_after(10):  # a safety net only
        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await gate.wait()
            signal.cancel("stop")
    return box[0], trace


def _assert_cancelled_and_sound(r: RunResult, reason: str = "stop") -> None:
    assert r.status == "cancelled"
    assert r.error == Cancelled(reason)
    assert is_paired(r.messages.messages)
    msgspec.json.encode(r.messages)  # the history always encodes


# --- process_output_step still deciding -----------------------------------------------


async def test_cancel_in_an_async_output_step_hook_drops_the_unapproved_response() -> None:
    stuck = Stuck()

    class Judge(Processor):
        id = "judge"

        async def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
            await stuck.wait()
            return Continue()

    agent = Agent.create("m", tools=[echo], output_processors=[Judge()])
    sim = AsyncSimulator(ScriptedModel([Say("secret", calls=[call("echo", x=1)])]))
    r, _ = await _run_aborted_when(sim, agent, stuck.entered)
    _assert_cancelled_and_sound(r)
    assert stuck.cleaned
    assert r.text == ""
    assert [m.role for m in r.messages.messages] == ["user"]


async def test_a_timeout_during_a_judge_call_drops_the_unapproved_response() -> None:
    def judged(args: OutputStepArgs[None]) -> Generator[object, object, OutputStepResult[None]]:
        answer = yield AskModel(
            ModelRequest(model="judge", system=(), messages=args.message_list.messages)
        )
        assert isinstance(answer, ModelAnswer)
        return Continue()

    from pipeline.processor import processor

    agent = Agent.create("m", output_processors=[processor("judge", process_output_step=judged)])
    slow_judge = ScriptedModel([Say("ok", latency=60.0)])  # 60 s of virtual time
    sim = AsyncSimulator(ScriptedModel([Say("unchecked")]), models={"judge": slow_judge})
    with anyio.fail_after(10):
        ran = await sim.run(agent, "hi", timeout=0.05)
    r = ran.result
    assert r.status == "cancelled" and isinstance(r.error, Cancelled)
    assert "timed out" in r.error.reason
    assert is_paired(r.messages.messages)
    assert r.text == ""
    assert "unchecked" not in msgspec.json.encode(r.messages).decode()


# --- process_output_result still deciding ---------------------------------------------


async def test_cancel_in_an_async_output_result_hook_drops_the_whole_response() -> None:
    stuck = Stuck()

    class Final(Processor):
        id = "final"

        async def process_output_result(
            self, args: OutputResultArgs[None]
        ) -> OutputResultResult[None]:
            await stuck.wait()
            return Continue()

    agent = Agent.create("m", tools=[echo], output_processors=[Final()])
    sim = AsyncSimulator(ScriptedModel([Say("a", calls=[call("echo", x=1)]), Say("b")]))
    r, _ = await _run_aborted_when(sim, agent, stuck.entered)
    _assert_cancelled_and_sound(r)
    assert stuck.cleaned
    assert r.text == ""
    assert r.messages.response == ()  # as when the processor crashes or blocks


# --- the model stream -------------------------------------------------------------------


async def test_cancel_mid_stream_with_an_output_step_processor_keeps_no_partial() -> None:
    class Judge(Processor):
        id = "judge"

        def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
            return Continue()

    model = AsyncTrackedModel([Say(["Hello", " wor", "ld"])], block=(0, 3))
    sim = AsyncSimulator(model.inner)
    sim.interpreter._resolve = lambda _m: model
    r, trace = await _run_aborted_when(sim, Agent.create("m", output_processors=[Judge()]),
                                       model.blocked)
    _assert_cancelled_and_sound(r)
    # the consumer saw what streamed; the history keeps nothing the judge never approved
    assert "".join(c.text for c in trace.chunks if isinstance(c, TextDelta)) == "Hello wor"
    assert r.text == "" and [m.role for m in r.messages.messages] == ["user"]
    assert model.closed_early == 1


async def test_cancel_in_an_async_stream_hook_does_not_deliver_the_chunk_it_held() -> None:
    stuck = Stuck()

    class Redact(Processor):
        id = "redact"

        async def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
            if isinstance(args.part, TextDelta) and args.part.text == "secret":
                await stuck.wait()
            return Continue()

    sim = AsyncSimulator(ScriptedModel([Say(["ok ", "secret", " more"])]))
    r, trace = await _run_aborted_when(sim, Agent.create("m", output_processors=[Redact()]),
                                       stuck.entered)
    _assert_cancelled_and_sound(r)
    assert stuck.cleaned
    streamed = "".join(c.text for c in trace.chunks if isinstance(c, TextDelta))
    assert streamed == "ok " and r.text == "ok "
    assert r.messages.messages[-1].incomplete


# --- tools ------------------------------------------------------------------------------


async def test_cancel_while_tools_run_keeps_the_real_results_of_finished_calls() -> None:
    stuck = Stuck()
    ran: list[str] = []

    async def quick(x: int) -> int:
        """Returns at once."""
        ran.append("quick")
        return x * 10

    async def slow(x: int) -> int:
        """Waits until cancelled."""
        await stuck.wait()
        return x

    agent = Agent.create(
        "m", tools=[make_tool(quick, name="quick"), make_tool(slow, name="slow")]
    )
    sim = AsyncSimulator(ScriptedModel([
        Say("working", calls=[call("quick", x=1), call("slow", x=2), call("quick", x=3)]),
        Say("never"),
    ]))
    r, trace = await _run_aborted_when(sim, agent, stuck.entered)
    _assert_cancelled_and_sound(r)
    assert stuck.cleaned and ran == ["quick", "quick"]
    results = r.messages.messages[-1].tool_results()
    assert [(p.tool_name, p.result, p.is_error) for p in results] == [
        ("quick", 10, False), ("slow", "tool call cancelled: stop", True), ("quick", 30, False),
    ]
    # the stream tells the consumer what each call became
    told = [(type(c).__name__, c.tool_name) for c in trace.chunks
            if isinstance(c, ToolResult | ToolError)]
    assert sorted(told) == [("ToolError", "slow"), ("ToolResult", "quick"), ("ToolResult", "quick")]
    assert len(sim.model.requests) == 1


async def test_cancel_during_the_second_model_call_gives_no_call_a_second_result() -> None:
    model = AsyncTrackedModel(
        [Say("a", calls=[call("echo", x=1), call("echo", x=2)]), Say(["b", "c"])],
        block=(1, 2),
    )
    sim = AsyncSimulator(model.inner)
    sim.interpreter._resolve = lambda _m: model
    r, trace = await _run_aborted_when(sim, Agent.create("m", tools=[echo]), model.blocked)
    _assert_cancelled_and_sound(r)
    results = [p for m in r.messages.messages for p in m.tool_results()]
    assert [(p.result, p.is_error) for p in results] == [(1, False), (2, False)]
    assert not [c for c in trace.chunks if isinstance(c, ToolError)]
    assert r.text == "ab"
    assert model.closed_early == 1


# --- every phase, under the sync simulator, through the cancel-at-k driver --------------


def _judged_agent() -> Agent:
    """A stream processor, a judge (output step) and a final check, each marking what it
    approved: Replace with a tagged chunk / message."""

    def tag(args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta):
            return Replace(TextDelta(args.part.id, f"[{args.part.text}]"))
        return Continue()

    def judge(args: OutputStepArgs[None]) -> Generator[object, object, OutputStepResult[None]]:
        yield AskModel(ModelRequest(model="judge", system=(), messages=args.message_list.messages))
        return Replace(_mark(args.message_list, "step_ok", last_only=True))

    def final(args: OutputResultArgs[None]) -> OutputResultResult[None]:
        return Replace(_mark(args.message_list, "final", last_only=False))

    from pipeline.processor import processor

    return Agent.create(
        "m",
        tools=[echo],
        output_processors=[
            processor("tag", process_output_stream=tag),
            processor("judge", process_output_step=judge),
            processor("final", process_output_result=final),
        ],
    )


def _mark(ml: MessageList, key: str, *, last_only: bool) -> MessageList:
    msgs = list(ml.messages)
    idx = [i for i, s in enumerate(ml.sources) if s == "response" and msgs[i].role == "assistant"]
    for i in idx[-1:] if last_only else idx:
        msgs[i] = msgspec.structs.replace(msgs[i], metadata={**(msgs[i].metadata or {}), key: True})
    return ml.replace_messages(msgs)


def _approved(m: Message, key: str) -> bool:
    return bool(m.metadata and m.metadata.get(key))


def test_sync_cancel_at_every_command_keeps_only_approved_output() -> None:
    def sim() -> Simulator:
        return Simulator(
            ScriptedModel([Say(["a", "b"], calls=[call("echo", x=1)]), Say(["c"])]),
            models={"judge": ScriptedModel(lambda _r: Say("yes"))},
        )

    full = sim().run(_judged_agent(), "hi")
    assert full.result.status == "finished" and full.result.text == "[a][b][c]"
    n = len(full.trace.commands)
    assert n > 10
    for k in range(n):
        with cancelling_at(k):
            ran = sim().run(_judged_agent(), "hi")
        r = ran.result
        # (a cancel at the last Publish or at Finish comes after the run is decided)
        assert r.status == ("cancelled" if k < n - 2 else "finished"), k
        if r.status == "cancelled":
            assert r.error == Cancelled(REASON)
        else:
            assert r.text == "[a][b][c]"
        assert is_paired(r.messages.messages), k
        response = [m for m in r.messages.response if m.role == "assistant"]
        final_asked = bool(ran.trace.effects_of("final"))
        for m in response:
            assert _approved(m, "step_ok"), (k, m)
        if final_asked:
            assert all(_approved(m, "final") for m in response), k
        streamed = [c.text for c in ran.trace.chunks if isinstance(c, TextDelta)]
        assert all(t.startswith("[") and t.endswith("]") for t in streamed), k
        msgspec.json.encode(r.messages)


async def test_a_cancelled_run_is_over_before_run_returns() -> None:
    """Nothing keeps running: a tool cancelled mid-call was cleaned up by then."""
    stuck = Stuck()

    async def slow(x: int) -> int:
        """Waits."""
        await stuck.wait()
        return x

    sim = AsyncSimulator(ScriptedModel([Say("", calls=[call("slow", x=1)])]))
    r, _ = await _run_aborted_when(
        sim, Agent.create("m", tools=[make_tool(slow, name="slow")]), stuck.entered
    )
    _assert_cancelled_and_sound(r)
    assert stuck.cleaned



def test_a_generator_hook_cancelled_while_it_waits_for_its_judge_is_closed_at_once() -> None:
    cleaned: list[str] = []

    def judge(args: OutputStepArgs[None]) -> Generator[object, object, OutputStepResult[None]]:
        try:
            yield AskModel(ModelRequest(model="judge", system=(), messages=()))
        finally:
            cleaned.append("judge")
        return Continue()

    from effects import Perform
    from pipeline.processor import processor

    agent = Agent.create("m", output_processors=[processor("judge", process_output_step=judge)])

    def sim() -> Simulator:
        return Simulator(ScriptedModel([Say("x")]), models={"judge": ScriptedModel([Say("y")])})

    full = sim().run(agent, "hi")
    k = next(i for i, c in enumerate(full.trace.commands) if isinstance(c, Perform))
    cleaned.clear()
    with cancelling_at(k):
        ran = sim().run(agent, "hi")
    assert ran.result.status == "cancelled" and ran.result.text == ""
    assert cleaned == ["judge"]  # before run() returned, not at garbage collection


async def test_a_tool_in_a_worker_thread_that_finishes_after_the_cancel_keeps_its_result() -> None:
    import threading

    started, go = threading.Event(), threading.Event()

    def blocking(x: int) -> int:
        """Blocks its worker thread until the test lets it go."""
        started.set()
        go.wait(10)
        return x * 100

    agent = Agent.create("m", tools=[make_tool(blocking, name="blocking")])
    sim = AsyncSimulator(
        ScriptedModel(
            [Say("", calls=[call("blocking", x=1), call("blocking", x=2)]),
             Say("never", latency=60.0)],
            async_sleep=anyio.sleep,  # the next call waits (a checkpoint) if reached
        ),
        tools_in_threads=True,
    )
    signal = CancelSignal()
    box: list[RunResult] = []

    async def go_run() -> None:
        box.append(await sim.interpreter.run(agent, "hi", signal=signal))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(go_run)
            await anyio.to_thread.run_sync(started.wait, 10)
            signal.cancel("stop")
            go.set()  # the threads finish after the cancel: their side effects happened
    r = box[0]
    _assert_cancelled_and_sound(r)
    assert [(p.result, p.is_error) for p in r.messages.messages[-1].tool_results()] == [
        (100, False), (200, False)
    ]


# --- a cancel while any of the six hooks waits ----------------------------------------------

PHASES = (
    "process_input", "process_input_step", "process_api_error",
    "process_output_stream", "process_output_step", "process_output_result",
)


@pytest.mark.parametrize("hook", PHASES)
async def test_a_cancel_while_each_hook_waits(hook: str) -> None:
    """Whichever hook is deciding when the signal fires: a typed cancel, a paired history
    with nothing the output processors did not approve, the hook cleaned up, the model
    stream closed and no further model call."""
    from effects import Continue as Go
    from interpreters.testing import Fail

    stuck = Stuck()
    waited: list[int] = []

    async def wait(args: object) -> object:
        if not waited:  # the first call waits; any later one passes
            waited.append(1)
            await stuck.wait()
        return Go()

    from pipeline.processor import BaseProcessor, processor

    make: Callable[..., BaseProcessor] = processor  # the hook is chosen by name
    p = make("waiter", **{hook: wait})
    script: list[Say | Fail] = [Say(["a", "b"], calls=[call("echo", x=1)]), Say("c")]
    if hook == "process_api_error":
        script.insert(0, Fail(status=400))
    model = AsyncTrackedModel(script)
    sim = AsyncSimulator(model.inner)
    sim.interpreter._resolve = lambda _m: model
    kind = (
        "input_processors" if hook.startswith("process_input")
        else "error_processors" if hook == "process_api_error" else "output_processors"
    )
    create: Callable[..., Agent] = Agent.create
    agent = create("m", tools=[echo], **{kind: [p]})
    r, trace = await _run_aborted_when(sim, agent, stuck.entered)
    _assert_cancelled_and_sound(r)
    assert stuck.cleaned
    assert model.opened == model.closed  # no model stream left open
    calls_before = len(model.requests)
    assert calls_before <= 2
    streamed = "".join(c.text for c in trace.chunks if isinstance(c, TextDelta))
    if hook in ("process_output_step", "process_output_result"):
        assert r.text == ""  # the waiting check never approved it
    if hook == "process_output_stream":
        assert streamed == "" and r.text == ""  # the first chunk was held by the hook
