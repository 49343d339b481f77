"""Per-processor state, tripwires and failures from every hook, output_result, broken streams."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest

from effects import Abort, Continue, Emit, Out, Replace, Retry, Skip
from interpreters.sim.simulator import Scripted
from interpreters.testing import Fail, Say, ScriptedModel, Simulator, call
from pipeline.processor import (
    ApiErrorArgs,
    ApiErrorResult,
    BaseProcessor,
    InputArgs,
    InputResult,
    InputStepArgs,
    InputStepResult,
    OutputResultArgs,
    OutputResultResult,
    OutputStepArgs,
    OutputStepResult,
    Processor,
    ProcessorPlacementWarning,
    StatefulProcessor,
    StreamArgs,
    StreamResult,
    processor,
)
from pipeline.tools import tool
from pipeline.values.chunks import DataChunk, ErrorChunk, TextDelta, Tripwire
from pipeline.values.messages import Message, TextPart
from pipeline.values.pairing import is_paired
from pipeline.values.result import ProcessorFailed, StreamFailed
from tests.helpers import data_chunks, make_agent, simulate, streamed_text

REJECT = Fail(status=400, message="rejected")
_tool_runs: list[str] = []
"""Appended to by the tools below; read through the `tool_runs` fixture."""


@pytest.fixture
def tool_runs() -> Iterator[list[str]]:
    """What the tools ran in this test (empty at its start)."""
    _tool_runs.clear()
    yield _tool_runs
    _tool_runs.clear()


@tool
def lookup(query: str) -> str:
    """Look something up."""
    _tool_runs.append(query)
    return f"found {query}"


# --- state ---------------------------------------------------------------------------------


class Journal(StatefulProcessor[tuple[str, ...]]):
    """Implements all six hooks; its state is the list of hooks it ran, in order."""

    def __init__(self, id: str = "journal") -> None:
        self.id = id
        self.final: list[tuple[str, ...]] = []

    def initial_state(self) -> tuple[str, ...]:
        return ()

    def process_input(self, args: InputArgs[tuple[str, ...]]) -> InputResult[tuple[str, ...]]:
        return Out(Continue(), (*args.state, "input"))

    def process_input_step(
        self, args: InputStepArgs[tuple[str, ...]]
    ) -> InputStepResult[tuple[str, ...]]:
        return Out(Continue(), (*args.state, f"input_step{args.step_number}"))

    def process_api_error(
        self, args: ApiErrorArgs[tuple[str, ...]]
    ) -> ApiErrorResult[tuple[str, ...]]:
        return Out(Retry(), (*args.state, "api_error"))

    def process_output_stream(
        self, args: StreamArgs[tuple[str, ...]]
    ) -> StreamResult[tuple[str, ...]]:
        if isinstance(args.part, TextDelta):
            return Out(Continue(), (*args.state, f"delta:{args.part.text}"))
        return Continue()  # a bare effect keeps the state

    def process_output_step(
        self, args: OutputStepArgs[tuple[str, ...]]
    ) -> OutputStepResult[tuple[str, ...]]:
        return Out(Continue(), (*args.state, f"output_step{args.step_number}"))

    def process_output_result(
        self, args: OutputResultArgs[tuple[str, ...]]
    ) -> OutputResultResult[tuple[str, ...]]:
        self.final.append(args.state)
        return Continue()


def test_state_persists_across_all_hooks_and_chunks_of_a_run() -> None:
    j = Journal()
    agent = make_agent(
        tools=[lookup], input_processors=[j], output_processors=[j], error_processors=[j]
    )
    ran = simulate(agent, [Say(["a", "b"], calls=[call("lookup", query="q")]), REJECT, Say("c")])
    assert ran.result.status == "finished"
    assert j.final == [
        (
            "input",
            "input_step0",
            "delta:a",
            "delta:b",
            "output_step0",
            "input_step1",
            "api_error",
            "delta:c",
            "output_step1",
        )
    ]


@pytest.mark.filterwarnings("ignore::pipeline.ProcessorPlacementWarning")  # placed so on purpose
def test_state_is_isolated_between_processors() -> None:
    a, b = Journal("a"), Journal("b")
    agent = make_agent(input_processors=[a], output_processors=[a, b])
    simulate(agent, [Say("x")])
    assert a.final == [("input", "input_step0", "delta:x", "output_step0")]
    assert b.final == [("delta:x", "output_step0")]


@pytest.mark.filterwarnings("ignore::pipeline.ProcessorPlacementWarning")  # placed so on purpose
def test_state_is_isolated_between_runs() -> None:
    j = Journal()
    agent = make_agent(output_processors=[j])
    sim = Simulator(ScriptedModel([Say("one"), Say("two")]))
    sim.run(agent, "first")
    sim.run(agent, "second")
    assert j.final == [("delta:one", "output_step0"), ("delta:two", "output_step0")]


def test_a_function_processor_starts_each_run_from_its_initial_state() -> None:
    seen: list[int] = []

    def count(args: StreamArgs[int]) -> StreamResult[int]:
        seen.append(args.state)
        return Out(Continue(), args.state + 1)

    agent = make_agent(output_processors=[processor("n", state=100, process_output_stream=count)])
    sim = Simulator(ScriptedModel([Say("x"), Say("y")]))
    sim.run(agent, "a")
    first = list(seen)
    seen.clear()
    sim.run(agent, "b")
    assert first == seen
    assert seen[0] == 100 and seen == list(range(100, 100 + len(seen)))


# --- hooks skipped and effects recorded ------------------------------------------------------


def test_processors_without_a_hook_are_skipped_for_it() -> None:
    stream_only = processor("stream-only", process_output_stream=lambda a: Continue())
    result_only = processor("result-only", process_output_result=lambda a: Continue())
    ran = simulate(make_agent(output_processors=[stream_only, result_only]), [Say("x")])
    hooks = {(e.processor_id, e.hook) for e in ran.trace.effects}
    assert hooks == {
        ("stream-only", "process_output_stream"),
        ("result-only", "process_output_result"),
    }


def test_output_hooks_of_an_input_processor_do_not_run() -> None:
    j = Journal()
    with pytest.warns(ProcessorPlacementWarning, match="'journal' is in input_processors only"):
        agent = make_agent(input_processors=[j])  # said at construction
    simulate(agent, [Say("x")])
    assert j.final == []  # process_output_result is an output hook; j is only an input processor


# --- tripwires from every hook -----------------------------------------------------------------

META = {"k": "v"}


def _aborting(hook: str, retry: bool = False) -> BaseProcessor:
    def abort_now(args: Any) -> Any:
        if hook == "process_output_stream" and not isinstance(args.part, TextDelta):
            return Continue()
        return Abort(f"stop in {hook}", retry=retry, metadata=META)

    return processor("tripper", **{hook: abort_now})  # type: ignore[call-overload,no-any-return]


def _agent_with(p: BaseProcessor, hook: str) -> Any:
    if hook in ("process_input", "process_input_step"):
        return make_agent(input_processors=[p])
    if hook == "process_api_error":
        return make_agent(error_processors=[p])
    return make_agent(output_processors=[p])


def _script_for(hook: str) -> list[Scripted]:
    return [REJECT, Say("x")] if hook == "process_api_error" else [Say("x"), Say("y")]


ALL_HOOKS = [
    "process_input",
    "process_input_step",
    "process_api_error",
    "process_output_stream",
    "process_output_step",
    "process_output_result",
]


@pytest.mark.parametrize("hook", ALL_HOOKS)
def test_abort_from_each_hook_trips_the_run_in_result_and_stream(hook: str) -> None:
    ran = simulate(_agent_with(_aborting(hook), hook), _script_for(hook))
    r = ran.result
    assert r.status == "tripped"
    assert r.finish_reason == "tripwire"
    assert r.error is None
    expected = Tripwire(f"stop in {hook}", False, "tripper", META)
    assert r.tripwire == expected
    assert ran.chunks[-1] == expected
    assert sum(isinstance(c, Tripwire) for c in ran.chunks) == 1
    assert "finish" not in ran.types


@pytest.mark.parametrize(
    "hook",
    [
        "process_input",
        "process_input_step",
        "process_api_error",
        "process_output_stream",
        "process_output_result",
    ],
)
def test_abort_with_retry_outside_output_step_is_a_plain_abort(hook: str) -> None:
    ran = simulate(_agent_with(_aborting(hook, retry=True), hook), _script_for(hook))
    r = ran.result
    assert r.status == "tripped"
    assert r.retry_count == 0
    assert r.tripwire is not None and r.tripwire.processor_id == "tripper"
    assert not any(m.metadata and "feedback_from" in m.metadata for m in ran.messages)
    assert len(ran.requests) <= 1


# --- failures from every hook ------------------------------------------------------------------


def _crashing(hook: str) -> BaseProcessor:
    def crash(args: Any) -> Any:
        if hook == "process_output_stream" and not isinstance(args.part, TextDelta):
            return Continue()
        raise KeyError(f"bug in {hook}")

    return processor("crasher", **{hook: crash})  # type: ignore[call-overload,no-any-return]


# The messages each failing run must still hold: nothing lost, nothing half-applied, and
# (failing closed) no response whose check crashed.
EXPECTED_ROLES = {
    "process_input": ["user"],
    "process_input_step": ["user"],
    "process_api_error": ["user"],
    "process_output_stream": ["user"],
    "process_output_step": ["user"],
    "process_output_result": ["user"],
}


@pytest.mark.parametrize("hook", ALL_HOOKS)
def test_an_exception_in_any_hook_fails_the_run_naming_processor_and_hook(hook: str) -> None:
    ran = simulate(_agent_with(_crashing(hook), hook), _script_for(hook))
    r = ran.result
    assert r.status == "failed"
    assert r.finish_reason == "error"
    assert r.tripwire is None
    err = r.error
    assert isinstance(err, ProcessorFailed)
    assert (err.processor_id, err.hook, err.error_type) == ("crasher", hook, "KeyError")
    assert f"bug in {hook}" in err.message
    assert "crasher" in str(err) and hook in str(err)
    last = ran.chunks[-1]
    assert isinstance(last, ErrorChunk) and last.kind == "ProcessorFailed"
    assert [m.role for m in ran.messages] == EXPECTED_ROLES[hook]
    assert ran.messages[0].text == "hi"
    assert "finish" not in ran.types


ILLEGAL: dict[str, object] = {
    "process_input": Skip(),
    "process_input_step": Retry(),
    "process_api_error": Replace(None),
    "process_output_stream": Retry(),
    "process_output_step": Skip(),
    "process_output_result": Emit(()),
}


@pytest.mark.parametrize("hook", ALL_HOOKS)
def test_an_illegal_effect_fails_the_run_naming_processor_and_hook(hook: str) -> None:
    bad = ILLEGAL[hook]

    def illegal(args: Any) -> Any:
        if hook == "process_output_stream" and not isinstance(args.part, TextDelta):
            return Continue()
        return bad

    p = processor("illegal", **{hook: illegal})  # type: ignore[call-overload]
    ran = simulate(_agent_with(p, hook), _script_for(hook))
    err = ran.result.error
    assert isinstance(err, ProcessorFailed)
    assert (err.processor_id, err.hook, err.error_type) == ("illegal", hook, "InvalidEffect")
    assert type(bad).__name__ in err.message


def test_returning_none_is_an_illegal_effect() -> None:
    p = processor("none", process_output_step=cast(Callable[[Any], Any], lambda a: None))
    ran = simulate(make_agent(output_processors=[p]), [Say("x")])
    err = ran.result.error
    assert isinstance(err, ProcessorFailed)
    assert (err.hook, err.error_type) == ("process_output_step", "InvalidEffect")
    assert "returned None" in err.message and "Continue()" in err.message


def test_emitting_a_chunk_that_is_not_data_fails() -> None:
    def bad(args: OutputStepArgs[None]) -> OutputStepResult[None]:
        return Out(Continue(), None, (TextDelta("t", "sneaky"),))

    ran = simulate(
        make_agent(output_processors=[processor("bad", process_output_step=bad)]), [Say("x")]
    )
    err = ran.result.error
    assert isinstance(err, ProcessorFailed)
    assert err.error_type == "InvalidEffect" and "DataChunk" in err.message
    assert "sneaky" not in streamed_text(ran.chunks)


def test_hooks_outside_the_stream_can_emit_data_chunks_with_out() -> None:
    def announce(args: InputStepArgs[None]) -> InputStepResult[None]:
        return Out(Continue(), None, (DataChunk("data-step", args.step_number, transient=True),))

    def verdict(args: OutputStepArgs[None]) -> OutputStepResult[None]:
        return Out(Continue(), None, (DataChunk("data-verdict", "ok", transient=True),))

    agent = make_agent(
        input_processors=[processor("in", process_input_step=announce)],
        output_processors=[processor("out", process_output_step=verdict)],
    )
    ran = simulate(agent, [Say("x")])
    assert [(d.name, d.data) for d in data_chunks(ran.chunks)] == [
        ("data-step", 0),
        ("data-verdict", "ok"),
    ]
    assert ran.types.index("data") < ran.types.index("text-delta")


# --- process_output_result ------------------------------------------------------------------


def test_output_result_sees_the_response_and_the_whole_result() -> None:
    got: list[OutputResultArgs[None]] = []

    def look(args: OutputResultArgs[None]) -> OutputResultResult[None]:
        got.append(args)
        return Continue()

    agent = make_agent(
        tools=[lookup], output_processors=[processor("l", process_output_result=look)]
    )
    simulate(agent, [Say("a", calls=[call("lookup", query="q")]), Say("b")])
    (a,) = got
    assert [m.role for m in a.messages] == ["assistant", "tool", "assistant"]  # the response only
    assert len(a.message_list) == 4
    assert a.result.text == "ab"
    assert a.result.finish_reason == "stop"
    assert len(a.result.steps) == 2
    assert a.result.usage == a.result.steps[0].usage + a.result.steps[1].usage


def test_output_result_replace_changes_the_final_messages() -> None:
    def sign(args: OutputResultArgs[None]) -> OutputResultResult[None]:
        sig = Message(id="sig", role="assistant", parts=(TextPart(" -- bot"),))
        return Replace(args.message_list.add(sig, "response"))

    ran = simulate(
        make_agent(output_processors=[processor("s", process_output_result=sign)]), [Say("hello")]
    )
    assert ran.result.text == "hello -- bot"
    assert ran.messages[-1].id == "sig"
    assert ran.result.status == "finished"


def test_output_result_processors_chain_in_list_order() -> None:
    seen: list[list[str]] = []

    def first(args: OutputResultArgs[None]) -> OutputResultResult[None]:
        return Replace(
            args.message_list.map_messages(
                lambda m: m.with_parts((TextPart(m.text.upper()),)) if m.role == "assistant" else m
            )
        )

    def second(args: OutputResultArgs[None]) -> OutputResultResult[None]:
        seen.append([m.text for m in args.messages])
        return Continue()

    agent = make_agent(
        output_processors=[
            processor("a", process_output_result=first),
            processor("b", process_output_result=second),
        ]
    )
    ran = simulate(agent, [Say("quiet")])
    assert seen == [["QUIET"]]
    assert ran.result.text == "QUIET"


def test_output_result_abort_drops_the_blocked_response() -> None:
    block = processor("block", process_output_result=lambda a: Abort("not allowed"))
    ran = simulate(
        make_agent(tools=[lookup], output_processors=[block]),
        [Say("a", calls=[call("lookup", query="q")]), Say("secret")],
    )
    r = ran.result
    assert r.status == "tripped"
    assert r.tripwire == Tripwire("not allowed", False, "block", None)
    assert [m.role for m in ran.messages] == ["user"]
    assert r.text == ""
    assert ran.chunks[-1] == r.tripwire


# --- broken model streams ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "broken",
    [
        Say(["part one", " part two", " never"], calls=[call("lookup", query="q")], break_after=3),
        Say(["part one", " part two"], calls=[call("lookup", query="q")], unfinished=True),
    ],
    ids=["break_after", "unfinished"],
)
def test_a_broken_stream_fails_keeping_the_partial_text_and_running_no_tool(
    tool_runs: list[str],
    broken: Say,
) -> None:
    ran = simulate(make_agent(tools=[lookup]), [broken, Say("never")])
    r = ran.result
    assert r.status == "failed"
    assert isinstance(r.error, StreamFailed)
    assert r.error.step_number == 0
    assert tool_runs == []
    assert len(ran.requests) == 1
    last = ran.messages[-1]
    assert last.role == "assistant" and last.incomplete
    assert last.text == "part one part two"
    assert last.tool_calls() == ()
    assert r.steps == ()
    assert isinstance(ran.chunks[-1], ErrorChunk)
    assert ran.chunks[-1].kind == "StreamFailed"


def test_a_stream_broken_before_any_event_is_a_failed_call_not_a_partial() -> None:
    ran = simulate(make_agent(), [Say("x", break_after=0)])
    assert ran.result.status == "failed"
    assert [m.role for m in ran.messages] == ["user"]


def test_failing_closed_leaves_no_unchecked_text_behind_a_processor() -> None:
    class Guard(Processor):
        id = "guard"

        def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
            if isinstance(args.part, TextDelta) and args.part.text == "b":
                raise RuntimeError("cannot check")
            return Continue()

    ran = simulate(make_agent(output_processors=[Guard()]), [Say(["a", "b", "c"])])
    assert streamed_text(ran.chunks) == "a"
    assert ran.result.status == "failed"


def test_a_stream_processor_crash_keeps_what_already_passed_marked_incomplete() -> None:
    def crash_on_b(args: Any) -> Any:
        if isinstance(args.part, TextDelta) and args.part.text == "b":
            raise RuntimeError("boom")
        return Continue()

    agent = make_agent(output_processors=[processor("p", process_output_stream=crash_on_b)])
    ran = simulate(agent, [Say(["a", "b", "c"])])
    assert ran.result.status == "failed"
    kept = ran.messages[-1]
    assert kept.role == "assistant" and kept.incomplete and kept.text == "a"


def test_an_output_step_crash_after_a_tool_call_leaves_a_paired_history() -> None:
    def crash(args: Any) -> Any:
        raise RuntimeError("checker bug")

    def lookup(q: str) -> str:
        """Look up."""
        return q

    agent = make_agent(tools=[lookup],
                       output_processors=[processor("p", process_output_step=crash)])
    ran = simulate(agent, [Say("hm", calls=[call("lookup", q="x")])])
    assert ran.result.status == "failed"
    assert is_paired(ran.messages)
    assert [m.role for m in ran.messages] == ["user"]
