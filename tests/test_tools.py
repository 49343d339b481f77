"""Tools: calls paired with results by id, failures the model sees, the step bound."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from effects import Replace
from interpreters.testing import Say, ScriptedCall, call
from pipeline.processor import StepChange, processor
from pipeline.tools import Tool, make_tool, tool
from pipeline.values.chunks import ToolCall, ToolCallDelta, ToolError, ToolResult
from pipeline.values.messages import Message, ToolResultPart
from tests.helpers import make_agent, simulate

_executed: list[tuple[str, object]] = []
"""Appended to by the tools below; read through the `executed` fixture."""


@pytest.fixture
def executed() -> Iterator[list[tuple[str, object]]]:
    """What the tools ran in this test (empty at its start)."""
    _executed.clear()
    yield _executed
    _executed.clear()


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    _executed.append(("add", (a, b)))
    return a + b


@tool
def shout(text: str) -> str:
    """Upper-case the text."""
    _executed.append(("shout", text))
    return text.upper()


@tool
def explode(reason: str) -> str:
    """Always fails."""
    _executed.append(("explode", reason))
    raise ValueError(f"boom: {reason}")


def _results(messages: tuple[Message, ...]) -> list[ToolResultPart]:
    return [p for m in messages for p in m.tool_results()]


def test_tool_results_are_paired_with_their_calls_by_id(executed: list[tuple[str, object]]) -> None:
    agent = make_agent(tools=[add, shout])
    ran = simulate(
        agent,
        [
            Say(
                calls=[
                    call("shout", tool_call_id="id-b", text="hey"),
                    call("add", tool_call_id="id-a", a=1, b=2),
                ]
            ),
            Say("done"),
        ],
    )
    assert executed == [("shout", "hey"), ("add", (1, 2))]
    tool_msg = ran.messages[2]
    assert tool_msg.role == "tool"
    assert [
        (p.tool_call_id, p.tool_name, p.result, p.is_error) for p in tool_msg.tool_results()
    ] == [("id-b", "shout", "HEY", False), ("id-a", "add", 3, False)]
    # the model's next request carries each call with its result
    req = ran.requests[1]
    calls = [c.tool_call_id for m in req.messages for c in m.tool_calls()]
    results = [r.tool_call_id for m in req.messages for r in m.tool_results()]
    assert calls == results == ["id-b", "id-a"]
    step = ran.result.steps[0]
    assert [c.tool_call_id for c in step.tool_calls] == [r.tool_call_id for r in step.tool_results]
    chunks = [c for c in ran.chunks if isinstance(c, ToolResult)]
    assert [(c.tool_call_id, c.result) for c in chunks] == [("id-b", "HEY"), ("id-a", 3)]


def test_a_tool_that_raises_becomes_an_error_result_the_model_sees(
    executed: list[tuple[str, object]],
) -> None:
    agent = make_agent(tools=[explode, shout])
    ran = simulate(
        agent,
        [
            Say(
                calls=[
                    call("explode", tool_call_id="x", reason="r"),
                    call("shout", tool_call_id="y", text="ok"),
                ]
            ),
            Say("recovered"),
        ],
    )
    assert ran.result.status == "finished"
    assert ran.result.text == "recovered"
    bad, good = ran.messages[2].tool_results()
    assert (bad.tool_call_id, bad.is_error, bad.result) == ("x", True, "ValueError: boom: r")
    assert (good.tool_call_id, good.is_error, good.result) == ("y", False, "OK")
    assert ran.requests[1].messages[2].tool_results() == (bad, good)
    errors = [c for c in ran.chunks if isinstance(c, ToolError)]
    assert errors == [ToolError("x", "explode", "ValueError: boom: r")]
    assert ran.types.index("tool-error") < ran.types.index("tool-result")


def test_invalid_arguments_become_an_error_result_and_the_tool_does_not_run(
    executed: list[tuple[str, object]],
) -> None:
    ran = simulate(
        make_agent(tools=[add]),
        [Say(calls=[call("add", tool_call_id="c", a="one", b=2)]), Say("ok")],
    )
    assert executed == []
    (res,) = ran.messages[2].tool_results()
    assert res.is_error
    assert isinstance(res.result, str) and res.result.startswith("invalid arguments for 'add'")
    assert [c.tool_call_id for c in ran.chunks if isinstance(c, ToolError)] == ["c"]
    assert ran.result.status == "finished"


def test_unknown_arguments_are_rejected_too(executed: list[tuple[str, object]]) -> None:
    ran = simulate(make_agent(tools=[add]), [Say(calls=[call("add", a=1, b=2, c=3)]), Say("ok")])
    assert executed == []
    assert ran.messages[2].tool_results()[0].is_error


def test_arguments_are_converted_to_the_declared_types(executed: list[tuple[str, object]]) -> None:
    ran = simulate(make_agent(tools=[add]), [Say(calls=[call("add", a=2, b=3)]), Say("ok")])
    assert executed == [("add", (2, 3))]
    assert ran.messages[2].tool_results()[0].result == 5


def test_an_unknown_tool_becomes_an_error_result() -> None:
    ran = simulate(
        make_agent(tools=[add]), [Say(calls=[call("nope", tool_call_id="n")]), Say("sorry")]
    )
    (res,) = ran.messages[2].tool_results()
    assert (res.tool_call_id, res.tool_name, res.is_error) == ("n", "nope", True)
    assert res.result == "unknown tool 'nope'"
    assert ran.result.status == "finished"


def test_a_tool_not_active_in_the_step_does_not_run(executed: list[tuple[str, object]]) -> None:
    only_add = processor(
        "only-add", process_input_step=lambda a: Replace(StepChange(active_tools=("add",)))
    )
    agent = make_agent(tools=[add, shout], input_processors=[only_add])
    ran = simulate(agent, [Say(calls=[call("shout", text="x")]), Say("ok")])
    assert executed == []
    assert ran.messages[2].tool_results()[0].is_error


def test_a_hand_written_tool_gets_its_arguments_as_keywords() -> None:
    got: list[dict[str, object]] = []

    def fn(**kw: object) -> str:
        got.append(kw)
        return "ok"

    raw = Tool.define("raw", "takes anything", {"type": "object"}, fn)
    ran = simulate(make_agent(tools=[raw]), [Say(calls=[call("raw", x=1, y="z")]), Say("done")])
    assert got == [{"x": 1, "y": "z"}]
    assert ran.requests[0].tools[0].parameters == {"type": "object"}


def test_a_step_with_tool_calls_continues_and_one_without_ends_the_run() -> None:
    ran = simulate(
        make_agent(tools=[add]), [Say(calls=[call("add", a=1, b=1)]), Say("two"), Say("never")]
    )
    assert len(ran.requests) == 2
    assert [s.finish_reason for s in ran.result.steps] == ["tool-calls", "stop"]
    assert ran.result.finish_reason == "stop"


def test_max_steps_bounds_the_loop(executed: list[tuple[str, object]]) -> None:
    agent = make_agent(tools=[add], max_steps=3)
    ran = simulate(agent, [Say(calls=[call("add", a=i, b=0)]) for i in range(10)])
    assert len(ran.requests) == 3
    assert len(executed) == 3
    r = ran.result
    assert r.status == "finished"
    assert [s.step_number for s in r.steps] == [0, 1, 2]
    assert r.finish_reason == "tool-calls"
    assert ran.messages[-1].role == "tool"  # the last call still has its result
    assert ran.types[-1] == "finish"


def test_results_with_many_calls_keep_the_order_of_the_calls() -> None:
    ran = simulate(
        make_agent(tools=[add]),
        [Say(calls=[call("add", tool_call_id=f"c{i}", a=i, b=i) for i in range(5)]), Say("ok")],
    )
    assert [(r.tool_call_id, r.result) for r in _results(ran.messages)] == [
        (f"c{i}", 2 * i) for i in range(5)
    ]


def test_calls_with_empty_or_repeated_ids_in_one_response_get_distinct_ids() -> None:
    seen: list[str] = []

    def echo(text: str) -> str:
        """Echo."""
        seen.append(text)
        return text

    calls = [ScriptedCall("echo", {"text": t}, tool_call_id=i)
             for t, i in (("a", "call_0"), ("b", "call_0"), ("c", ""))]
    ran = simulate(make_agent(tools=[make_tool(echo)]), [Say(calls=calls), Say("done")])
    r = ran.result
    assert r.status == "finished"
    step = r.steps[0]
    ids = [c.tool_call_id for c in step.tool_calls]
    assert ids[0] == "call_0" and len(set(ids)) == 3 and all(ids)
    # Each result answers its own call, and the stream shows the same ids.
    answered = [(p.tool_call_id, p.result) for p in step.tool_results]
    assert answered == list(zip(ids, "abc", strict=True))
    streamed = [c.tool_call_id for c in ran.run.trace.chunks if isinstance(c, ToolCall)]
    results = [c.tool_call_id for c in ran.run.trace.chunks if isinstance(c, ToolResult)]
    assert streamed == ids == results


def test_deltas_of_a_renamed_call_carry_its_new_id() -> None:
    calls = [ScriptedCall("echo_tool", {"text": t}, tool_call_id="call_0") for t in "ab"]

    def echo_tool(text: str) -> str:
        """Echo."""
        return text

    ran = simulate(make_agent(tools=[make_tool(echo_tool)]), [Say(calls=calls), Say("ok")])
    chunks = ran.run.trace.chunks
    deltas = [c.tool_call_id for c in chunks if isinstance(c, ToolCallDelta)]
    done = [c.tool_call_id for c in chunks if isinstance(c, ToolCall)]
    assert deltas == done
    assert done[0] == "call_0" and done[1] != "call_0"


# --- a tool that changes its arguments changes nothing else ------------------------------
def _mutating_tools() -> list[Tool]:
    @tool
    def stash_any(data: Any) -> str:
        """Append to the nested list it was given."""
        data["items"].append("tool's own")
        data["new"] = 1
        return "ok"

    @tool
    def stash_dict(data: dict[str, Any]) -> str:
        """Append to the nested list it was given."""
        data["items"].append("tool's own")
        return "ok"

    def stash_raw(data: dict[str, list[str]]) -> str:
        data["items"].append("tool's own")
        return "ok"

    raw = Tool.define(
        "stash_raw", "Append.", {"type": "object", "properties": {"data": {"type": "object"}}},
        stash_raw,
    )
    return [stash_any, stash_dict, raw]


@pytest.mark.parametrize("name", ["stash_any", "stash_dict", "stash_raw"])
def test_a_tool_that_mutates_its_arguments_leaves_the_history_and_later_requests_alone(
    name: str,
) -> None:
    agent = make_agent(tools=_mutating_tools())
    ran = simulate(agent, [Say(calls=[call(name, data={"items": ["a", "b"]})]), Say("done")])
    args = {"data": {"items": ["a", "b"]}}
    assert ran.result.status == "finished"
    assert [p.result for m in ran.messages for p in m.tool_results()] == ["ok"]  # it ran
    (part,) = [p for m in ran.messages for p in m.tool_calls()]
    assert part.args == args  # the history keeps what the model asked for
    later = [p for m in ran.requests[1].messages for p in m.tool_calls()]
    assert [p.args for p in later] == [args]  # and the next call sends it unchanged
