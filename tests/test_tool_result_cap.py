"""A tool's result has a size cap (its encoded JSON bytes): beyond it the model gets an
error result saying by how much, the call still gets exactly one result, and nothing of
the oversized value reaches the history, the stream or the next request. The cap has a
default, is set on the agent and overridden per tool, on every interpreter."""

from __future__ import annotations

import msgspec
import pytest

from interpreters.sync import SyncInterpreter
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator, call
from pipeline.agent import MAX_TOOL_RESULT_BYTES, Agent
from pipeline.tools import Tool, make_tool, tool
from pipeline.values.messages import ToolResultPart
from pipeline.values.pairing import is_paired
from pipeline.values.result import RunResult


def blob(n: int) -> str:
    """Returns n characters."""
    return "x" * n


def _script() -> list[Say]:
    return [Say("", calls=[call("blob", n=5000)]), Say("ok")]


def _check_capped(r: RunResult, model: ScriptedModel, *, size: int, cap: int) -> None:
    assert r.status == "finished"
    assert is_paired(r.messages.messages)
    [res] = [p for m in r.messages.messages for p in m.tool_results()]
    assert res.is_error
    assert isinstance(res.result, str)
    assert f"{size} bytes" in res.result and f"{size - cap} bytes over" in res.result
    assert f"cap of {cap}" in res.result
    seen = model.requests[1].messages[-1].tool_results()
    assert [p.is_error for p in seen] == [True]
    assert "x" * 100 not in msgspec.json.encode(model.requests[1]).decode()


def test_a_result_over_the_agents_cap_is_an_error_result_the_model_sees() -> None:
    model = ScriptedModel(_script())
    agent = Agent.create("m", tools=[blob], max_tool_result_bytes=1000)
    r = Simulator(model).run(agent, "go").result
    _check_capped(r, model, size=5002, cap=1000)  # the JSON string has its two quotes
    errors = [c for c in Simulator(ScriptedModel(_script())).run(agent, "go").trace.chunks
              if type(c).__name__ == "ToolError"]
    assert len(errors) == 1 and "x" * 100 not in str(errors[0])


def test_the_sync_interpreter_caps_results_too() -> None:
    model = ScriptedModel(_script())
    agent = Agent.create("m", tools=[blob], max_tool_result_bytes=1000)
    _check_capped(SyncInterpreter(model).run(agent, "go"), model, size=5002, cap=1000)


@pytest.mark.anyio
async def test_the_async_interpreter_caps_sync_and_async_tools() -> None:
    async def ablob(n: int) -> str:
        """Returns n characters, asynchronously."""
        return "x" * n

    for t in (make_tool(blob), make_tool(ablob, name="blob")):
        model = ScriptedModel(_script())
        agent = Agent.create("m", tools=[t], max_tool_result_bytes=1000)
        run = await AsyncSimulator(model).run(agent, "go")
        _check_capped(run.result, model, size=5002, cap=1000)


def test_a_result_at_the_cap_passes_whole() -> None:
    agent = Agent.create("m", tools=[blob], max_tool_result_bytes=5002)
    r = Simulator(ScriptedModel(_script())).run(agent, "go").result
    [res] = r.steps[0].tool_results
    assert not res.is_error and res.result == "x" * 5000


def test_the_size_is_the_encoded_json_not_the_characters() -> None:
    def accents() -> dict[str, str]:
        """Two bytes per character in UTF-8."""
        return {"k": "é" * 600}

    size = len(msgspec.json.encode({"k": "é" * 600}))
    assert size > 1000 > 600
    agent = Agent.create("m", tools=[accents], max_tool_result_bytes=1000)
    model = ScriptedModel([Say("", calls=[call("accents")]), Say("ok")])
    r = Simulator(model).run(agent, "go").result
    [res] = r.steps[0].tool_results
    assert res.is_error and f"{size} bytes" in str(res.result)

    escapes = "\n" * 600  # 600 ASCII characters, 1,202 bytes of JSON
    agent = Agent.create("m", tools=[Tool.define(
        "nl", "newlines", {"type": "object", "properties": {}}, lambda: escapes
    )], max_tool_result_bytes=1000)
    r = Simulator(ScriptedModel([Say("", calls=[call("nl")]), Say("ok")])).run(agent, "go").result
    [res] = r.steps[0].tool_results
    assert res.is_error and "1202 bytes" in str(res.result)


def test_the_default_cap_is_one_mebibyte() -> None:
    assert MAX_TOOL_RESULT_BYTES == 1 << 20
    assert Agent.create("m").max_tool_result_bytes == MAX_TOOL_RESULT_BYTES
    model = ScriptedModel([Say("", calls=[call("blob", n=2 << 20)]), Say("ok")])
    r = Simulator(model).run(Agent.create("m", tools=[blob]), "go").result
    [res] = r.steps[0].tool_results
    assert res.is_error and f"cap of {1 << 20}" in str(res.result)


def test_a_tools_own_cap_overrides_the_agents() -> None:
    small = tool(blob, max_result_bytes=100)
    assert small.max_result_bytes == 100
    model = ScriptedModel([Say("", calls=[call("blob", n=500)]), Say("ok")])
    r = Simulator(model).run(Agent.create("m", tools=[small]), "go").result
    _check_capped(r, model, size=502, cap=100)

    big = make_tool(blob, max_result_bytes=10_000)
    agent = Agent.create("m", tools=[big], max_tool_result_bytes=100)
    r = Simulator(ScriptedModel(_script())).run(agent, "go").result
    [res] = r.steps[0].tool_results
    assert not res.is_error and res.result == "x" * 5000

    defined = Tool.define("blob", "d", {"type": "object", "properties": {}},
                          lambda n: "x" * n, max_result_bytes=100)
    r = Simulator(ScriptedModel(_script())).run(Agent.create("m", tools=[defined]), "go").result
    assert r.steps[0].tool_results[0].is_error


def test_a_cap_that_is_not_a_positive_int_is_refused_at_construction() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises((ValueError, TypeError), match="max_tool_result_bytes"):
            Agent.create("m", max_tool_result_bytes=bad)  # type: ignore[arg-type]
        with pytest.raises((ValueError, TypeError), match="max_result_bytes"):
            make_tool(blob, max_result_bytes=bad)  # type: ignore[arg-type]


def test_every_call_of_a_step_keeps_its_own_result() -> None:
    model = ScriptedModel([
        Say("", calls=[call("blob", n=10), call("blob", n=5000), call("blob", n=20)]),
        Say("ok"),
    ])
    agent = Agent.create("m", tools=[blob], max_tool_result_bytes=1000)
    r = Simulator(model).run(agent, "go").result
    assert is_paired(r.messages.messages)
    got: list[ToolResultPart] = list(r.steps[0].tool_results)
    assert [p.is_error for p in got] == [False, True, False]
    assert got[0].result == "x" * 10 and got[2].result == "x" * 20


def test_a_result_nested_too_deep_is_an_error_result() -> None:
    from pipeline.values.bounds import MAX_JSON_DEPTH

    def nest(depth: int) -> object:
        v: object = 1
        for _ in range(depth):
            v = [v]
        return v

    deep = Tool.define("deep", "d", {"type": "object", "properties": {}},
                       lambda: nest(MAX_JSON_DEPTH + 1))
    ok = Tool.define("ok", "d", {"type": "object", "properties": {}},
                     lambda: nest(MAX_JSON_DEPTH))
    model = ScriptedModel([Say("", calls=[call("deep"), call("ok")]), Say("ok")])
    r = Simulator(model).run(Agent.create("m", tools=[deep, ok]), "go").result
    assert is_paired(r.messages.messages)
    [bad, fine] = r.steps[0].tool_results
    assert bad.is_error and f"deeper than {MAX_JSON_DEPTH}" in str(bad.result)
    assert not fine.is_error
