"""Tool-call arguments as they leave a run: what the stream processors passed on.

A call's chunks go through the stream processors like everything the client gets; what
they pass on is what leaves the run (the stream, the UI message stream, the result's
messages and steps). The tool runs with, and the model reads, the call as the model made
it, unless a `process_tool_call` gate changed it. So a `PIIDetector` on the agent keeps
the values it finds in a call's arguments from the browser by default, while the tool
still gets them (with `scan_tools` the tool gets them handled too).
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import msgspec

from effects import Continue, Replace
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, SimRun, Simulator, call
from pipeline.agent import Agent
from pipeline.processor import StreamArgs, StreamResult, processor
from pipeline.processors import PIIDetector
from pipeline.tools import tool
from pipeline.ui_stream import ui_message_sse
from pipeline.values.chunks import Chunk, ToolCall, ToolCallDelta

EMAIL = "ada@example.com"
received: list[str] = []


@tool
def notify(to: str) -> str:
    """Send a notification."""
    received.append(to)
    return "sent"


def _runs(agent: Agent, script: Sequence[Say]) -> list[SimRun]:
    """The same run on the sync simulator and on the async one (asyncio)."""
    received.clear()
    runs = [Simulator(ScriptedModel(list(script))).run(agent, "tell ada")]
    sync_received = list(received)

    async def go() -> SimRun:
        return await AsyncSimulator(ScriptedModel(list(script))).run(agent, "tell ada")

    received.clear()
    runs.append(anyio.run(go))
    assert received == sync_received
    return runs


def _ui(chunks: Sequence[Chunk]) -> str:
    return b"".join(ui_message_sse(chunks)).decode()


SCRIPT = [Say(calls=[call("notify", to=EMAIL)]), Say("Done.")]


def test_a_pii_guard_keeps_call_arguments_from_the_client_while_the_tool_gets_them() -> None:
    agent = Agent.create("sim/model", tools=[notify], output_processors=[PIIDetector()])
    for run in _runs(agent, SCRIPT):
        assert run.result.status == "finished"
        assert received == [EMAIL]  # the tool ran with the model's arguments
        ui = _ui(run.chunks)
        assert EMAIL not in ui
        assert '"type":"tool-input-available"' in ui and "[REDACTED:email]" in ui
        assert EMAIL not in msgspec.json.encode(run.chunks).decode()
        assert EMAIL not in msgspec.json.encode(run.result.messages).decode()
        assert EMAIL not in msgspec.json.encode(run.result.steps).decode()
        (c,) = [c for c in run.chunks if isinstance(c, ToolCall)]
        assert c.args == {"to": "[REDACTED:email]"}
        # the deltas of a call are partial JSON no guard can check: not streamed
        assert not any(isinstance(c, ToolCallDelta) for c in run.chunks)


def test_with_scan_tools_the_tool_gets_the_arguments_handled_too() -> None:
    p = PIIDetector(scan_tools=True)
    agent = Agent.create("sim/model", tools=[notify], input_processors=[p],
                         output_processors=[p])
    for run in _runs(agent, SCRIPT):
        assert run.result.status == "finished"
        assert received == ["[REDACTED:email]"]
        assert EMAIL not in _ui(run.chunks)
        assert EMAIL not in msgspec.json.encode(run.result.messages).decode()


def test_a_stream_processor_changes_what_leaves_not_what_the_tool_runs_with() -> None:
    def shout(a: StreamArgs[None]) -> StreamResult[None]:
        part = a.part
        if isinstance(part, ToolCall):
            return Replace(ToolCall(part.tool_call_id, part.tool_name, {"to": "someone"}))
        return Continue()

    agent = Agent.create("sim/model", tools=[notify],
                         output_processors=[processor("hide", process_output_stream=shout)])
    model = ScriptedModel(list(SCRIPT))
    received.clear()
    run = Simulator(model).run(agent, "tell ada")
    assert received == [EMAIL]
    # the model reads its own call back; the client, the messages and steps the other
    assert EMAIL in msgspec.json.encode(model.requests[1].messages).decode()
    assert [c.args for m in run.result.messages.messages for c in m.tool_calls()] == [
        {"to": "someone"}]
    assert [c.args for s in run.result.steps for c in s.tool_calls] == [{"to": "someone"}]


def test_a_dropped_call_chunk_is_still_a_call_not_made() -> None:
    def drop(a: StreamArgs[None]) -> StreamResult[None]:
        from effects import Skip
        return Skip() if isinstance(a.part, ToolCall) else Continue()

    agent = Agent.create("sim/model", tools=[notify],
                         output_processors=[processor("drop", process_output_stream=drop)])
    for run in _runs(agent, SCRIPT):
        assert received == []  # fail closed: a call no processor passed does not run
        assert run.result.status == "finished"


def test_a_resumed_run_sends_out_the_call_as_the_guard_passed_it_before_the_suspension() -> None:
    from effects import AskApproval
    from interpreters.approvals.store import Approvals, MemoryApprovalStore
    from pipeline.approval import approve
    from pipeline.processor import ToolCallArgs, ToolCallResult

    def ask(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        return AskApproval("send it?")

    agent = Agent.create("sim/model", tools=[notify],
                         input_processors=[processor("ask", process_tool_call=ask)],
                         output_processors=[PIIDetector()])
    received.clear()
    sim = Simulator(ScriptedModel(list(SCRIPT)))
    approvals = Approvals(MemoryApprovalStore())
    first = sim.run(agent, "tell ada")
    s = approvals.keep(first.result).suspension
    assert s is not None
    assert EMAIL not in _ui(first.chunks)
    assert EMAIL not in msgspec.json.encode(first.result.messages).decode()
    second = sim.run(agent, (), resume=approvals.take(agent, s.run_id, [approve(s.pending[0])]))
    assert received == [EMAIL]
    assert second.result.status == "finished"
    assert EMAIL not in _ui(second.chunks)
    assert EMAIL not in msgspec.json.encode(second.result.messages).decode()
    assert EMAIL not in msgspec.json.encode(second.result.steps).decode()
