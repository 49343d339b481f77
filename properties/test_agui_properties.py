"""Properties of the AG-UI adapter (`pipeline.agui`) over random simulated runs, the twin
of the UI message stream's (test_ui_stream_properties.py): every event is one the
protocol's own models accept, in an order its clients accept, a client that drops the
steps marked discarded reads exactly the run's text; and a tripped run sends a typed
error event and never the text its guard held back."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

ag_ui = pytest.importorskip("ag_ui.core")

from ag_ui.core import BaseEvent, Event, RunErrorEvent, RunFinishedEvent  # noqa: E402
from pydantic import TypeAdapter  # noqa: E402

from interpreters.testing import Say, ScriptedModel, Simulator  # noqa: E402
from pipeline.agent import Agent  # noqa: E402
from pipeline.agui import TRIPWIRE_CODE, agui_sse  # noqa: E402
from pipeline.processors import PIIDetector  # noqa: E402
from properties.test_ui_stream_properties import ShortIsDiscarded, echo, scripts, words  # noqa: E402

EVENTS: TypeAdapter[BaseEvent] = TypeAdapter(Event)


def _parse(body: bytes) -> list[BaseEvent]:
    frames = body.decode().split("\n\n")
    assert frames[-1] == ""
    out = []
    for f in frames[:-1]:
        assert f.startswith("data: ")
        out.append(EVENTS.validate_json(f.removeprefix("data: ")))
    return out


def _check_order(events: list[BaseEvent]) -> dict[str, str]:
    """The protocol's order: one run, messages and calls started before their content
    and ended once, steps in turn, nothing after the closing event. The text of each
    message, by id."""
    kinds = [e.type.value for e in events]
    assert kinds[0] == "RUN_STARTED"
    assert kinds[-1] in ("RUN_FINISHED", "RUN_ERROR")
    assert "RUN_FINISHED" not in kinds[:-1] and "RUN_ERROR" not in kinds[:-1]
    open_msgs: set[str] = set()
    ended_msgs: set[str] = set()
    calls: dict[str, str] = {}  # id -> started, ended
    step: str | None = None
    text: dict[str, str] = {}
    for e in events:
        d = e.model_dump()
        t = e.type.value
        if t == "STEP_STARTED":
            assert step is None
            step = d["step_name"]
        elif t == "STEP_FINISHED":
            assert step == d["step_name"]
            step = None
        elif t in ("TEXT_MESSAGE_START", "REASONING_MESSAGE_START"):
            assert d["message_id"] not in open_msgs | ended_msgs
            open_msgs.add(d["message_id"])
        elif t in ("TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"):
            assert d["message_id"] in open_msgs
            if t == "TEXT_MESSAGE_CONTENT":
                text[d["message_id"]] = text.get(d["message_id"], "") + d["delta"]
        elif t in ("TEXT_MESSAGE_END", "REASONING_MESSAGE_END"):
            open_msgs.remove(d["message_id"])
            ended_msgs.add(d["message_id"])
        elif t == "TOOL_CALL_START":
            assert d["tool_call_id"] not in calls
            calls[d["tool_call_id"]] = "started"
        elif t == "TOOL_CALL_ARGS":
            assert calls[d["tool_call_id"]] == "started"
        elif t == "TOOL_CALL_END":
            assert calls[d["tool_call_id"]] == "started"
            calls[d["tool_call_id"]] = "ended"
        elif t == "TOOL_CALL_RESULT":
            assert calls[d["tool_call_id"]] == "ended"
    assert not open_msgs and step is None
    assert all(v == "ended" for v in calls.values())
    return text


@given(script=scripts)
def test_a_client_reads_the_runs_text_from_events_the_protocol_accepts(script: list[Say]) -> None:
    agent = Agent.create(
        "m", tools=[echo], output_processors=[ShortIsDiscarded()], max_steps=10,
        max_processor_retries=10,
    )
    with Simulator(ScriptedModel(script)).stream(agent, "go") as stream:
        events = _parse(b"".join(agui_sse(stream, thread_id="t", run_id="r")))
    result = stream.result
    text = _check_order(events)
    discarded: set[str] = set()
    for e in events:
        d = e.model_dump()
        if d["type"].value == "CUSTOM" and d["name"] == "step-discarded":
            discarded.update(d["value"]["ids"])
    assert isinstance(events[-1], RunFinishedEvent)
    assert "".join(v for k, v in text.items() if k not in discarded) == result.text


secrets = st.sampled_from(["ada@example.com", "grace.hopper@navy.example.org"])


@given(before=st.lists(words, max_size=4), after=st.lists(words, max_size=4),
       secret=secrets, split=st.integers(1, 12))
def test_a_tripped_run_sends_a_typed_error_and_never_the_held_text(
    before: list[str], after: list[str], secret: str, split: int
) -> None:
    """A PII guard that blocks holds the text back while it could still be part of an
    address, and trips the run on one: the client gets a `RUN_ERROR` with the tripwire's
    code, every message it saw closed, and no piece of the address, however it streamed."""
    k = min(split, len(secret) - 1)
    pieces = [*before, secret[:k], secret[k:], *after]
    agent = Agent.create("m", output_processors=[PIIDetector(strategy="block")])
    with Simulator(ScriptedModel([Say(pieces)])).stream(agent, "go") as stream:
        body = b"".join(agui_sse(stream, thread_id="t", run_id="r"))
    result = stream.result
    assert result.status == "tripped"
    events = _parse(body)
    _check_order(events)
    end = events[-1]
    assert isinstance(end, RunErrorEvent) and end.code == TRIPWIRE_CODE
    sent = "".join(
        json.dumps(e.model_dump(mode="json")) for e in events if e.type.value != "RUN_ERROR")
    local = secret.split("@")[0]
    assert secret not in sent and local not in sent
