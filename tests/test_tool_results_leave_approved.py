"""What leaves a run of a tool result is what the output guards passed on: the stream
(and so the UI message stream and NDJSON), `result.steps` and `result.messages` hold the
value a stream processor made of it, on every interpreter. A PII guard on the agent
handles tool results sent out by default; `scan_tools` is about what the model reads."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import msgspec
import pytest

from effects import Continue, Replace
from interpreters.aio import AsyncInterpreter
from interpreters.sync import SyncInterpreter
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.processor import (
    InputStepArgs,
    InputStepResult,
    StepChange,
    StreamArgs,
    StreamResult,
    processor,
)
from pipeline.processors import PIIDetector
from pipeline.tools import make_tool, tool
from pipeline.tools.context import ToolContext
from pipeline.ui_stream import ndjson, ui_message_sse
from pipeline.values.chunks import Chunk, DataChunk, ToolError, ToolResult
from pipeline.values.messages import DataPart, MessageList, ToolResultPart
from pipeline.values.result import RunResult
from tests.helpers import make_agent, stream_cancelled_once, unpaired_tool_calls

EMAIL = "ada@example.com"
REDACTED = "[REDACTED:email]"


@tool
def crm(name: str) -> dict[str, object]:
    """Look a customer up."""
    return {"name": name, "contacts": [f"mail {EMAIL}"], "vip": True}


@tool
def lookup(name: str) -> str:
    """Look a customer up, as text."""
    raise RuntimeError(f"no customer {name}, try {EMAIL}")


def _script() -> list[Say]:
    return [Say(calls=[call("crm", name="Ada"), call("lookup", name="Bo")]), Say("Done.")]


def _on_sync(agent: Agent) -> tuple[list[Chunk], RunResult, ScriptedModel]:
    model = ScriptedModel(_script())
    stream = SyncInterpreter(model, observers=()).stream(agent, "hi")
    chunks = list(stream)
    return chunks, stream.result, model


def _on_simulator(agent: Agent) -> tuple[list[Chunk], RunResult, ScriptedModel]:
    model = ScriptedModel(_script())
    run = Simulator(model).run(agent, "hi")
    return list(run.trace.chunks), run.result, model


async def _on_async(agent: Agent) -> tuple[list[Chunk], RunResult, ScriptedModel]:
    model = ScriptedModel(_script())
    stream = AsyncInterpreter(model, observers=()).stream(agent, "hi")
    async with stream:
        chunks = [c async for c in stream]
    return chunks, stream.result, model


async def _on_async_simulator(agent: Agent) -> tuple[list[Chunk], RunResult, ScriptedModel]:
    model = ScriptedModel(_script())
    run = await AsyncSimulator(model).run(agent, "hi")
    return list(run.trace.chunks), run.result, model


def hide_results(args: StreamArgs[None]) -> StreamResult[None]:
    """A stream processor's hook that replaces every tool result."""
    p = args.part
    if isinstance(p, ToolResult):
        return Replace(msgspec.structs.replace(p, result="(hidden)"))
    return Continue()


def _leaves(chunks: Sequence[Chunk], result: RunResult) -> str:
    """Everything of the run that reaches its caller, as text."""
    return "".join((
        msgspec.json.encode(chunks).decode(),
        b"".join(ui_message_sse(chunks)).decode(),
        b"".join(ndjson(chunks)).decode(),
        msgspec.json.encode(result.steps).decode(),
        msgspec.json.encode(result.messages).decode(),
    ))


def _check_approved(chunks: list[Chunk], result: RunResult, model: ScriptedModel,
                    *, model_reads_raw: bool) -> None:
    assert result.status == "finished"
    assert EMAIL not in _leaves(chunks, result)
    (step0, _) = result.steps
    ok, err = step0.tool_results
    assert ok.result == {"name": "Ada", "contacts": [f"mail {REDACTED}"], "vip": True}
    assert err.is_error and REDACTED in str(err.result)
    out = next(c for c in chunks if isinstance(c, ToolResult))
    assert out.result == ok.result
    assert REDACTED in next(c for c in chunks if isinstance(c, ToolError)).error
    # the result's messages keep the run paired, each call with its (approved) result
    results = [p for m in result.messages.messages for p in m.tool_results()]
    assert [p.tool_call_id for p in results] == [p.tool_call_id for p in step0.tool_results]
    assert results[0].result == ok.result
    # what the model read of the results: scan_tools decides
    second = msgspec.json.encode(model.requests[1].messages).decode()
    assert (EMAIL in second) is model_reads_raw
    assert (REDACTED in second) is not model_reads_raw


def _agents() -> list[tuple[str, Agent, bool]]:
    default = PIIDetector(types=("email",))
    scanned = PIIDetector(types=("email",), scan_tools=True)
    return [
        # a PII guard as an output processor: tool results sent out are handled by
        # default; the model reads them as the tools returned them
        ("default", make_agent(tools=[crm, lookup], output_processors=[default]), True),
        # scan_tools: the model reads them handled too
        ("scan_tools", make_agent(tools=[crm, lookup], input_processors=[scanned],
                                  output_processors=[scanned]), False),
    ]


@pytest.mark.parametrize(("name", "agent", "raw"), _agents(), ids=[a[0] for a in _agents()])
def test_tool_results_leave_the_run_approved_on_the_sync_interpreter(
    name: str, agent: Agent, raw: bool
) -> None:
    _check_approved(*_on_sync(agent), model_reads_raw=raw)


@pytest.mark.parametrize(("name", "agent", "raw"), _agents(), ids=[a[0] for a in _agents()])
def test_tool_results_leave_the_run_approved_on_the_simulator(
    name: str, agent: Agent, raw: bool
) -> None:
    _check_approved(*_on_simulator(agent), model_reads_raw=raw)


@pytest.mark.anyio
@pytest.mark.parametrize(("name", "agent", "raw"), _agents(), ids=[a[0] for a in _agents()])
async def test_tool_results_leave_the_run_approved_on_the_async_interpreter(
    name: str, agent: Agent, raw: bool, anyio_backend: str
) -> None:
    _check_approved(*(await _on_async(agent)), model_reads_raw=raw)


@pytest.mark.anyio
@pytest.mark.parametrize(("name", "agent", "raw"), _agents(), ids=[a[0] for a in _agents()])
async def test_tool_results_leave_the_run_approved_on_the_async_simulator(
    name: str, agent: Agent, raw: bool, anyio_backend: str
) -> None:
    _check_approved(*(await _on_async_simulator(agent)), model_reads_raw=raw)


def test_a_stream_processor_that_replaces_a_tool_result_replaces_it_in_steps_and_messages(
) -> None:
    hide = processor("hide-results", process_output_stream=hide_results)
    agent = make_agent(tools=[crm, lookup], output_processors=[hide])
    _, result, model = _on_simulator(agent)
    assert result.steps[0].tool_results[0].result == "(hidden)"
    kept = [p for m in result.messages.messages for p in m.tool_results()]
    assert kept[0].result == "(hidden)"
    assert EMAIL not in msgspec.json.encode(result.steps[0].tool_results[0]).decode()
    assert EMAIL in str(result.steps[0].tool_results[1].result)  # its error: passed as it was
    assert EMAIL in msgspec.json.encode(model.requests[1].messages).decode()  # the model's


def test_without_stream_processors_tool_results_are_kept_as_the_tools_returned_them() -> None:
    _, result, _ = _on_simulator(make_agent(tools=[crm, lookup]))
    assert result.steps[0].tool_results[0].result == {
        "name": "Ada", "contacts": [f"mail {EMAIL}"], "vip": True}
    assert [p for m in result.messages.messages for p in m.tool_results()] == list(
        result.steps[0].tool_results)


def _check_withheld(chunks: list[Chunk], result: RunResult) -> None:
    assert result.status == "tripped"
    assert EMAIL not in _leaves(chunks, result)
    results = [p for m in result.messages.messages for p in m.tool_results()]
    calls = [p for m in result.messages.messages for p in m.tool_calls()]
    assert [p.tool_call_id for p in results] == [c.tool_call_id for c in calls]  # paired
    assert all(p.is_error and p.result == "tool result withheld: PII detected: email"
               for p in results)


def _blocking() -> Agent:
    return make_agent(tools=[crm, lookup],
                      output_processors=[PIIDetector(types=("email",), strategy="block")])


def test_a_tool_result_a_stream_processor_blocks_is_withheld_from_the_messages() -> None:
    _check_withheld(*_on_simulator(_blocking())[:2])
    _check_withheld(*_on_sync(_blocking())[:2])


@pytest.mark.anyio
async def test_a_blocked_tool_result_is_withheld_on_the_async_interpreters(
    anyio_backend: str,
) -> None:
    _check_withheld(*(await _on_async(_blocking()))[:2])
    _check_withheld(*(await _on_async_simulator(_blocking()))[:2])


@pytest.mark.anyio
@pytest.mark.parametrize("checked_by", ["stream", "tool-result hook"])
async def test_results_of_tools_finished_before_a_cancel_are_withheld_with_their_checkers(
    anyio_backend: str, checked_by: str,
) -> None:
    """A cancel while tools run: the stream processors and the tool-result hooks run no
    more, so with either on the agent a finished tool's result (or error) leaves as
    withheld, on the stream and in the messages; the calls stay paired."""
    started = anyio.Event()

    async def failing(x: int) -> int:
        """Fails at once."""
        raise RuntimeError(f"no customer, mail {EMAIL}")

    async def quick(x: int) -> dict[str, object]:
        """Returns at once."""
        return {"contact": EMAIL}

    async def stuck(x: int) -> int:
        """Never returns."""
        started.set()
        await anyio.sleep_forever()
        return x

    agent = make_agent(
        tools=[make_tool(failing, name="failing"), make_tool(quick, name="quick"),
               make_tool(stuck, name="stuck")],
        **({"output_processors": [PIIDetector(types=("email",))]} if checked_by == "stream"
           else {"input_processors": [PIIDetector(types=("email",), scan_tools=True)]}),
    )
    model = ScriptedModel([Say(calls=[call("failing", x=1), call("quick", x=2),
                                      call("stuck", x=3)]), Say("never")])
    chunks, result = await stream_cancelled_once(agent, model, started)
    assert result.status == "cancelled"
    assert EMAIL not in _leaves(chunks, result)
    msgs = result.messages.messages
    assert unpaired_tool_calls(msgs) == []
    kept = msgs[-1].tool_results()
    assert [(r.tool_name, r.is_error) for r in kept] == [
        ("failing", True), ("quick", True), ("stuck", True)]
    assert [str(r.result).split(":")[0] for r in kept] == [
        "tool result withheld", "tool result withheld", "tool call cancelled"]
    # the client is told about every call (no tool part left waiting)
    assert [c.tool_name for c in chunks if isinstance(c, ToolError)] == [
        "failing", "quick", "stuck"]


@pytest.mark.anyio
async def test_an_async_stream_processor_replacing_a_tool_result_replaces_it_everywhere(
    anyio_backend: str,
) -> None:
    async def hide_results(args: StreamArgs[None]) -> StreamResult[None]:
        p = args.part
        if isinstance(p, ToolResult):
            return Replace(msgspec.structs.replace(p, result="(hidden)"))
        return Continue()

    agent = make_agent(tools=[crm, lookup], output_processors=[
        processor("hide-results", process_output_stream=hide_results)])
    for chunks, result, _ in (await _on_async(agent), await _on_async_simulator(agent)):
        assert [c.result for c in chunks if isinstance(c, ToolResult)] == ["(hidden)"]
        assert result.steps[0].tool_results[0].result == "(hidden)"
        kept = [p for m in result.messages.messages for p in m.tool_results()]
        assert kept[0].result == "(hidden)"


def test_a_result_an_input_processor_rebuilt_leaves_as_a_stream_processor_replaced_it() -> None:
    """An input processor that rebuilds the history for the model (here: it trims every
    tool result) does not bring the tool's own value back into the result's messages."""
    def trim(args: InputStepArgs[None]) -> InputStepResult[None]:
        ml = args.message_list
        messages = tuple(
            m.with_parts(
                ToolResultPart(p.tool_call_id, p.tool_name, str(p.result)[:200], p.is_error)
                if isinstance(p, ToolResultPart) else p
                for p in m.parts
            ) if m.role == "tool" else m
            for m in ml.messages
        )
        return Replace(StepChange(message_list=MessageList(messages, ml.sources, ml.system)))

    agent = make_agent(tools=[crm, lookup], input_processors=[
        processor("trim", process_input_step=trim)], output_processors=[
        processor("hide-results", process_output_stream=hide_results)])
    _, result, model = _on_simulator(agent)
    assert result.steps[0].tool_results[0].result == "(hidden)"
    kept = [p for m in result.messages.messages for p in m.tool_results()]
    assert kept[0].result == "(hidden)"
    assert "'contacts'" in msgspec.json.encode(model.requests[1].messages).decode()  # trimmed


def test_what_a_tool_writes_for_the_client_is_handled_by_a_pii_guard() -> None:
    """A tool's `data-*` chunks go to the client and, kept, into the tool message: a PII
    guard on the agent handles them as it handles the tool's result."""

    def card(name: str, ctx: ToolContext[None]) -> str:
        """Show a customer's card."""
        ctx.writer.custom("data-customer", {"name": name, "mail": EMAIL})
        ctx.writer.custom("data-progress", f"found {EMAIL}", transient=True)
        return "shown"

    agent = make_agent(tools=[make_tool(card, name="card")],
                       output_processors=[PIIDetector(types=("email",))])
    model = ScriptedModel([Say(calls=[call("card", name="Ada")]), Say("Done.")])
    run = Simulator(model).run(agent, "hi")
    chunks, result = list(run.trace.chunks), run.result
    assert result.status == "finished"
    assert EMAIL not in _leaves(chunks, result)
    data = [c for c in chunks if isinstance(c, DataChunk) and c.name.startswith("data-c")]
    assert [c.data for c in data] == [{"name": "Ada", "mail": REDACTED}]
    kept = [p for m in result.messages.messages for p in m.parts if isinstance(p, DataPart)]
    assert [p.data for p in kept] == [{"name": "Ada", "mail": REDACTED}]
