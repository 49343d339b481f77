"""ToolCallFilter: all or the named tool calls out of the history, results with them."""

from __future__ import annotations

import pytest

from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline import Agent, Message, MessageList, TextPart
from pipeline.processors import ToolCallFilter
from pipeline.processors.tool_call_filter import filter_tool_calls
from pipeline.values import ToolCallPart, ToolResultPart
from pipeline.values.pairing import is_paired


def history() -> MessageList:
    return MessageList.of([
        Message(id="u0", role="user", parts=(TextPart("hi"),)),
        Message(id="a0", role="assistant", parts=(
            TextPart("checking"), ToolCallPart("c1", "search", {}),
            ToolCallPart("c2", "weather", {}),
        )),
        Message(id="t0", role="tool", parts=(
            ToolResultPart("c1", "search", "found"), ToolResultPart("c2", "weather", "sun"),
        )),
        Message(id="a1", role="assistant", parts=(ToolCallPart("c3", "search", {}),)),
        Message(id="t1", role="tool", parts=(ToolResultPart("c3", "search", "more"),)),
        Message(id="a2", role="assistant", parts=(TextPart("done"),)),
        Message(id="u1", role="user", parts=(TextPart("and now?"),)),
    ])


def sent(f: ToolCallFilter, ml: MessageList) -> tuple[Message, ...]:
    model = ScriptedModel([Say("ok")])
    Simulator(model).run(Agent.create("m", input_processors=[f]), ml)
    return model.requests[0].messages


def test_all_tool_calls_and_results_go_text_stays() -> None:
    out = sent(ToolCallFilter(), history())
    assert [m.id for m in out] == ["u0", "a0", "a2", "u1"]
    assert out[1].parts == (TextPart("checking"),)


def test_named_tools_only() -> None:
    out = sent(ToolCallFilter(exclude=["search"]), history())
    assert [m.id for m in out] == ["u0", "a0", "t0", "a2", "u1"]
    assert [p.tool_name for p in out[1].tool_calls()] == ["weather"]
    assert [p.tool_call_id for p in out[2].tool_results()] == ["c2"]
    assert is_paired(out)


def test_keep_removes_all_but_the_named() -> None:
    out = sent(ToolCallFilter(keep=["weather"]), history())
    assert [p.tool_name for m in out for p in m.tool_calls()] == ["weather"]
    assert is_paired(out)


def test_nothing_to_filter_is_not_a_change() -> None:
    f = ToolCallFilter(exclude=["nope"])
    model = ScriptedModel([Say("ok")])
    run = Simulator(model).run(Agent.create("m", input_processors=[f]), history())
    assert [type(e).__name__ for e in run.trace.effects_of(f.id, "process_input")] == [
        "Continue"
    ]


def test_a_reused_id_keeps_the_kept_tools_result() -> None:
    # servers that number calls per response reuse call_0: the result goes with its own call
    msgs = (
        Message(id="a0", role="assistant", parts=(ToolCallPart("call_0", "search", {}),)),
        Message(id="t0", role="tool", parts=(ToolResultPart("call_0", "search", "x"),)),
        Message(id="a1", role="assistant", parts=(ToolCallPart("call_0", "weather", {}),)),
        Message(id="t1", role="tool", parts=(ToolResultPart("call_0", "weather", "sun"),)),
    )
    out, sources = filter_tool_calls(msgs, ("input",) * 4, exclude=frozenset({"search"}))
    assert [m.id for m in out] == ["a1", "t1"] and sources == ("input", "input")
    assert is_paired(out)


def test_the_runs_own_tool_calls_still_run_and_every_step_hides_them() -> None:
    def search() -> str:
        """Search."""
        return "found"

    model = ScriptedModel([Say(calls=[call("search")]), Say("done")])
    agent = Agent.create(
        "m", tools=[search], input_processors=[ToolCallFilter(every_step=True)]
    )
    run = Simulator(model).run(agent, "go")
    assert run.result.steps[0].tool_results[0].result == "found"
    assert not any(m.role == "tool" for m in model.requests[1].messages)
    assert is_paired(model.requests[1].messages)


def test_exclude_and_keep_together_are_refused() -> None:
    with pytest.raises(ValueError):
        ToolCallFilter(exclude=["a"], keep=["b"])
