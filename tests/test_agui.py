"""AG-UI over loopback: examples/agui_stream.py served by a real ASGI server (uvicorn) on
127.0.0.1, every event it sends parsed with the protocol's own models (`ag_ui.core`):
text, tool calls and their results, state, an approval as an interrupt answered by the
next run's `resume`, errors; and the adapter's mapping (`pipeline.agui`) on its own."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from pydantic import TypeAdapter

ag_ui = pytest.importorskip("ag_ui.core")

from ag_ui.core import (  # noqa: E402
    BaseEvent,
    CustomEvent,
    Event,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    ToolCallArgsEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from examples.agui_stream import demo_app  # noqa: E402
from examples.asgi_stream import refunds  # noqa: E402
from interpreters.testing import Say, ScriptedModel, Simulator, call  # noqa: E402
from pipeline import Agent, DataChunk  # noqa: E402
from pipeline.agui import TRIPWIRE_CODE, agui_sse  # noqa: E402
from pipeline.values.chunks import Chunk, ErrorChunk, Finish, Tripwire, Usage  # noqa: E402
from tests.asgi_server import serve  # noqa: E402

WAIT = 20.0
EVENTS: TypeAdapter[BaseEvent] = TypeAdapter(Event)


def parse(body: bytes | str) -> list[BaseEvent]:
    """Each `data:` frame of an AG-UI response, validated by the protocol's models."""
    text = body.decode() if isinstance(body, bytes) else body
    frames = text.split("\n\n")
    assert frames[-1] == ""
    out = []
    for frame in frames[:-1]:
        assert frame.startswith("data: "), frame
        out.append(EVENTS.validate_json(frame.removeprefix("data: ")))
    return out


def _input(thread: str, run: str, text: str, **more: object) -> dict[str, object]:
    return {"threadId": thread, "runId": run, "state": {}, "tools": [], "context": [],
            "forwardedProps": {}, "messages": [
                {"id": "u1", "role": "user", "content": text}], **more}


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with serve(demo_app()) as url, httpx.Client(base_url=url, timeout=WAIT) as c:
        yield c


def _post(client: httpx.Client, body: dict[str, object]) -> list[BaseEvent]:
    r = client.post("/agui", json=body)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "text/event-stream"
    return parse(r.content)


@pytest.mark.slow
def test_a_chat_streams_text_tool_calls_and_results_as_agui_events(
    client: httpx.Client,
) -> None:
    events = _post(client, _input("t1", "r1", "weather in Paris?"))
    assert isinstance(events[0], RunStartedEvent) and events[0].thread_id == "t1"
    assert isinstance(events[-1], RunFinishedEvent) and events[-1].outcome is None
    [start] = [e for e in events if isinstance(e, ToolCallStartEvent)]
    assert start.tool_call_name == "weather"
    args = "".join(e.delta for e in events if isinstance(e, ToolCallArgsEvent))
    assert json.loads(args) == {"city": "Paris"}
    [result] = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert result.tool_call_id == start.tool_call_id and result.content == "sunny in Paris"
    text = "".join(e.delta for e in events if isinstance(e, TextMessageContentEvent))
    assert text.startswith("Let me check. ")


@pytest.mark.slow
@pytest.mark.parametrize("approved", [True, False])
def test_an_approval_is_an_interrupt_answered_by_the_next_runs_resume(
    client: httpx.Client, approved: bool
) -> None:
    order = "G41" if approved else "G42"
    events = _post(client, _input("t2", "r1", f"refund 250 on order {order}"))
    end = events[-1]
    assert isinstance(end, RunFinishedEvent)
    assert isinstance(end.outcome, RunFinishedInterruptOutcome)
    [interrupt] = end.outcome.interrupts
    assert interrupt.reason == "tool_approval" and interrupt.message == "refund needs approval"
    assert (order, 250) not in refunds  # nothing ran while it waited

    payload = {"approved": approved} if approved else {"approved": False, "reason": "no"}
    answer = _input("t2", "r2", f"refund 250 on order {order}", resume=[
        {"interruptId": interrupt.id, "status": "resolved", "payload": payload}])
    rest = _post(client, answer)
    [decision] = [e for e in rest if isinstance(e, CustomEvent)]
    assert decision.name == "tool-approval-response"
    assert decision.value["approved"] is approved
    [result] = [e for e in rest if isinstance(e, ToolCallResultEvent)]
    assert result.tool_call_id == interrupt.tool_call_id
    assert isinstance(rest[-1], RunFinishedEvent) and rest[-1].outcome is None
    assert ((order, 250) in refunds) is approved
    # A second answer to the same interrupt: decided already.
    assert client.post("/agui", json=answer).status_code == 409


@pytest.mark.slow
def test_bad_requests_are_refused_before_anything_runs(client: httpx.Client) -> None:
    body = _input("t3", "r1", "hi")
    assert client.post("/agui", content=b"{}", headers={
        "content-type": "application/json"}).status_code == 422
    assert client.post("/agui", content=b"x", headers={
        "content-type": "text/plain"}).status_code == 415
    assert client.post("/agui", json=body, headers={
        "origin": "https://elsewhere.example"}).status_code == 403
    unknown = _input("t3", "r1", "hi", resume=[
        {"interruptId": "nope", "status": "resolved", "payload": {"approved": True}}])
    assert client.post("/agui", json=unknown).status_code == 404


def _agent() -> Agent:
    return Agent.create("m")


def test_state_and_other_data_chunks_are_state_snapshots_and_custom_events() -> None:
    chunks: list[Chunk] = [DataChunk("data-state", {"step": "looking"}),
                           DataChunk("data-progress", 0.5), Finish("stop", Usage())]
    events = parse(b"".join(agui_sse(chunks, thread_id="t", run_id="r")))
    assert [type(e).__name__ for e in events] == [
        "RunStartedEvent", "StateSnapshotEvent", "CustomEvent", "RunFinishedEvent"]
    assert isinstance(events[1], StateSnapshotEvent) and events[1].snapshot == {"step": "looking"}
    assert isinstance(events[2], CustomEvent) and events[2].name == "progress"


def test_a_tripwire_is_a_typed_run_error_with_its_reason_only() -> None:
    run = Simulator(ScriptedModel([Say(["Hello ", "there"])])).run(_agent(), "hi")
    chunks = [*run.chunks[:3], Tripwire("no", False, "guard", metadata={"score": 0.97})]
    body = b"".join(agui_sse(chunks, thread_id="t", run_id="r"))
    events = parse(body)
    end = events[-1]
    assert isinstance(end, RunErrorEvent)
    assert end.code == TRIPWIRE_CODE and end.message == "blocked by guard: no"
    assert b"0.97" not in body and b"score" not in body
    # Every message started was ended before the error.
    assert [type(e).__name__ for e in events[-3:]] == [
        "TextMessageEndEvent", "StepFinishedEvent", "RunErrorEvent"]


def test_a_failed_run_is_a_run_error_and_a_cancelled_one_a_cancelled_outcome() -> None:
    failed = parse(b"".join(agui_sse([ErrorChunk("api_error", "boom")], thread_id="t",
                                     run_id="r")))
    assert isinstance(failed[-1], RunErrorEvent) and failed[-1].code == "api_error"
    cancelled = parse(b"".join(agui_sse([ErrorChunk("cancelled", "stop")], thread_id="t",
                                        run_id="r")))
    end = cancelled[-1]
    assert isinstance(end, RunFinishedEvent)
    assert isinstance(end.outcome, RunFinishedCancelledOutcome)


def test_nothing_follows_the_closing_event() -> None:
    chunks: list[Chunk] = [ErrorChunk("api_error", "boom"), DataChunk("data-x", 1),
                           Finish("stop", Usage())]
    events = parse(b"".join(agui_sse(chunks, thread_id="t", run_id="r")))
    assert [type(e).__name__ for e in events] == ["RunStartedEvent", "RunErrorEvent"]


def test_a_call_made_without_streamed_arguments_is_started_given_and_ended() -> None:
    def look(q: str) -> str:
        """Look."""
        return "found"

    agent = Agent.create("m", tools=[look])
    run = Simulator(ScriptedModel([Say(calls=[call("look", q="x")]), Say("ok")])).run(
        agent, "hi")
    names = [type(e).__name__ for e in parse(b"".join(
        agui_sse(run.chunks, thread_id="t", run_id="r")))]
    i = names.index("ToolCallStartEvent")
    assert names[i:i + 4] == ["ToolCallStartEvent", "ToolCallArgsEvent", "ToolCallEndEvent",
                              "ToolCallResultEvent"]
