"""Reconnecting to a chat's UI message stream, `chat_app(..., resumable=True)` of
examples/asgi_stream.py, against the app served by uvicorn on 127.0.0.1: a client drops
its connection mid-stream, the run goes on, and the client that comes back gets the rest
(after its `Last-Event-ID`) or, as the AI SDK's `useChat` resumes, the live stream from
its start.

The scripted model's pace is held by the test (`Hold`): a few chunks go at once, the rest
once the test has seen the server notice the disconnect, so the run is mid-stream then."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import NamedTuple, cast

import httpx
import msgspec
import pytest

from examples.asgi_stream import (
    chat_app,
    demo_agent,
    demo_app,
    demo_script,
    refunds,
)
from interpreters import AsyncInterpreter
from interpreters.testing import ScriptedModel
from tests.asgi_server import Hold, Runs, serve, serve_held_demo

WAIT = 20.0
"""Seconds the server may take to answer."""


class Frame(NamedTuple):
    id: str
    data: str

    def part(self) -> dict[str, object]:
        part = msgspec.json.decode(self.data)
        assert isinstance(part, dict)
        return part


def _frames(lines: Iterator[str], count: int | None = None) -> list[Frame]:
    """The SSE frames read from `lines`, `count` of them or all."""
    frames: list[Frame] = []
    fields: dict[str, str] = {}
    for line in lines:
        if line:
            name, _, value = line.partition(": ")
            fields[name] = value
            continue
        if not fields:
            continue  # (the end of a body)
        frames.append(Frame(fields["id"], fields["data"]))
        fields = {}
        if len(frames) == count:
            break
    assert not fields, f"a frame cut short: {fields}"
    return frames


def _body_frames(r: httpx.Response) -> list[Frame]:
    assert r.status_code == 200, r.text
    return _frames(iter(r.text.split("\n")))


def _said(frames: list[Frame]) -> str:
    return "".join(str(f.part()["delta"]) for f in frames if '"text-delta"' in f.data)


@pytest.fixture
def served() -> Iterator[Served]:
    with serve_held_demo(free=3) as demo, \
            httpx.Client(base_url=demo.url, timeout=WAIT) as client:
        yield Served(client, demo.runs, demo.hold, demo.left)


class Served(NamedTuple):
    client: httpx.Client
    runs: Runs
    hold: Hold
    left: threading.Event
    """Set once the server saw a `POST`'s client go away."""


def _user(chat: str, text: str) -> dict[str, object]:
    return {"id": chat, "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]}


WORDS = " ".join(f"w{i}" for i in range(8))
ECHO = "".join(f"w{i} " for i in range(8)) + "(echo)"


def _dropped(s: Served, chat: str, text: str, count: int) -> list[Frame]:
    """The first `count` frames of a chat's stream, then the connection dropped (once the
    server saw it go)."""
    with s.client.stream("POST", "/api/chat", json=_user(chat, text)) as r:
        assert r.status_code == 200
        first = _frames(r.iter_lines(), count)
    assert s.left.wait(WAIT), "the server did not see the client go"
    return first


def test_a_client_back_with_its_last_event_id_gets_the_rest_once(served: Served) -> None:
    first = _dropped(served, "chat-back", WORDS, 5)  # start, start-step, a text, 2 deltas
    with served.client.stream("GET", "/api/chat/chat-back/stream",
                              headers={"last-event-id": first[-1].id}) as r:
        assert r.status_code == 200
        assert r.headers["x-vercel-ai-ui-message-stream"] == "v1"
        served.hold.release()
        rest = _frames(r.iter_lines())
    frames = first + rest
    stream = frames[0].id.partition("-")[0]
    assert [f.id for f in frames] == [f"{stream}-{n}" for n in range(len(frames))]
    assert _said(frames) == ECHO  # every delta once, in order
    assert [f.data for f in frames[-2:]] == ['{"type":"finish"}', "[DONE]"]
    [result] = served.runs.ended(1)
    assert result.status == "finished" and result.text == ECHO  # the drop cancelled nothing

    # The stream is kept once it ended: the rest after any of its frames, again.
    again = served.client.get("/api/chat/chat-back/stream",
                              headers={"last-event-id": frames[-3].id})
    assert _body_frames(again) == frames[-2:]
    # Nothing streams in this chat now: a client with no id to go on gets a 204.
    assert served.client.get("/api/chat/chat-back/stream").status_code == 204
    assert len(served.runs.results) == 1  # no reconnect ran anything


def test_a_client_back_without_an_id_gets_the_live_stream_from_its_start(
    served: Served,
) -> None:
    first = _dropped(served, "chat-reload", WORDS, 4)
    with served.client.stream("GET", "/api/chat/chat-reload/stream") as r:
        assert r.status_code == 200  # the run still streams: as useChat's `resume` asks
        served.hold.release()
        frames = _frames(r.iter_lines())
    assert frames[:4] == first
    assert _said(frames) == ECHO
    assert frames[-1].data == "[DONE]"
    assert [r.status for r in served.runs.ended(1)] == ["finished"]


def test_a_waiting_call_reconnected_to_shows_its_request_and_runs_nothing(
    served: Served,
) -> None:
    served.hold.release()
    first = _dropped(served, "chat-gated", "refund 250 on order RG1", 1)
    r = served.client.get("/api/chat/chat-gated/stream", headers={"last-event-id": first[0].id})
    rest = [f.part() for f in _body_frames(r) if f.data != "[DONE]"]
    kinds = [p["type"] for p in rest]
    assert "tool-approval-request" in kinds and kinds[-1] == "finish"
    assert not {"tool-output-available", "tool-output-error", "error"} & set(kinds)
    [request] = [p for p in rest if p["type"] == "tool-approval-request"]
    assert not [x for x in refunds if x[0] == "RG1"]
    assert [x.status for x in served.runs.ended(1)] == ["suspended"]

    answer = _user("chat-gated", "refund 250 on order RG1")
    messages = answer["messages"]
    assert isinstance(messages, list)
    messages.append({"id": "a1", "role": "assistant", "parts": [
        {"type": "tool-refund", "toolCallId": request["toolCallId"],
         "state": "approval-responded", "input": {},
         "approval": {"id": request["approvalId"], "approved": True}}]})
    approved = served.client.post("/api/chat", json=answer)
    assert any(f.part().get("output") == "refunded 250 on RG1"
               for f in _body_frames(approved) if f.data != "[DONE]")
    assert refunds.count(("RG1", 250)) == 1
    # The chat's new stream replaced the old one: the old one's rest is gone.
    old = served.client.get("/api/chat/chat-gated/stream", headers={"last-event-id": first[0].id})
    assert old.status_code == 410
    assert refunds.count(("RG1", 250)) == 1


def test_stopping_a_resumable_run_cancels_it_and_ends_its_readers(served: Served) -> None:
    first = _dropped(served, "chat-stop", WORDS, 4)
    with served.client.stream("GET", "/api/chat/chat-stop/stream",
                              headers={"last-event-id": first[-1].id}) as r:
        assert served.client.delete("/api/chat/chat-stop/stream").status_code == 204
        rest = _frames(r.iter_lines())
    assert rest[-1].data == "[DONE]"
    parts = [f.part() for f in rest[:-1]]
    assert [p for p in parts if p["type"] == "error"] == [
        {"type": "error", "errorText": "Cancelled: run cancelled: stopped by the client"}]
    [result] = served.runs.ended(1)
    assert result.status == "cancelled"
    assert served.client.delete("/api/chat/chat-stop/stream").status_code == 204  # (idempotent)


def test_a_last_event_id_that_names_no_frame_is_refused(served: Served) -> None:
    served.hold.release()
    r = served.client.post("/api/chat", json=_user("chat-ids", "hello"))
    stream = _body_frames(r)[0].id.partition("-")[0]
    for last, status in [("x", 422), (f"{stream}-999", 422), ("999-0", 410)]:
        got = served.client.get("/api/chat/chat-ids/stream", headers={"last-event-id": last})
        assert got.status_code == status, (last, got.text)
    unknown = served.client.get("/api/chat/chat-never/stream", headers={"last-event-id": "1-0"})
    assert unknown.status_code == 410
    assert served.client.get("/api/chat/chat-never/stream").status_code == 204
    assert served.client.post("/api/chat/chat-ids/stream").status_code == 405


def test_the_replay_cap_forgets_the_oldest_stream_and_its_client_still_gets_all() -> None:
    frames: dict[str, list[Frame]] = {}
    kept: dict[str, int] = {}
    app = chat_app(demo_agent(), AsyncInterpreter(ScriptedModel(demo_script)),
                   resumable=True, timeout=WAIT, max_replay_bytes=1500)
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT) as client:
        for chat, text in [("chat-a", "one two"), ("chat-b", "three four"),
                           ("chat-long", " ".join(["word"] * 100))]:
            r = client.post("/api/chat", json=_user(chat, text))
            frames[chat] = _body_frames(r)
            assert frames[chat][-1].data == "[DONE]"  # its client got it all
            kept = {c: client.get(f"/api/chat/{c}/stream",
                                  headers={"last-event-id": f[0].id}).status_code
                    for c, f in frames.items()}
            if chat == "chat-b":
                assert kept == {"chat-a": 200, "chat-b": 200}
        # chat-long alone is over the cap: it and the older ones are forgotten
        assert kept == {"chat-a": 410, "chat-b": 410, "chat-long": 410}
        assert _said(frames["chat-long"]) == "word " * 100 + "(echo)"


def test_without_resumable_there_is_no_stream_to_reconnect_to() -> None:
    with serve(demo_app()) as url, httpx.Client(base_url=url, timeout=WAIT) as client:
        r = client.post("/api/chat", json=_user("chat-plain", "hello"))
        assert "id: " not in r.text  # frames carry no ids
        assert client.get("/api/chat/chat-plain/stream").status_code == 404


def test_resumable_needs_a_timeout_and_checks_its_options() -> None:
    agent, interp = demo_agent(), AsyncInterpreter(ScriptedModel(demo_script))
    with pytest.raises(ValueError, match="timeout"):
        chat_app(agent, interp, resumable=True)  # a run nobody reads must still end
    with pytest.raises(ValueError, match="resumable must be a bool"):
        chat_app(agent, interp, resumable=cast(bool, "yes"), timeout=5.0)
    with pytest.raises(ValueError, match="max_replay_bytes"):
        chat_app(agent, interp, resumable=True, timeout=5.0, max_replay_bytes=0)
