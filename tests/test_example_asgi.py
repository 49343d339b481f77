"""The pure-ASGI streaming endpoint of examples/asgi_stream.py, through httpx's ASGI
transport and by calling the app directly (to disconnect mid-response)."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import anyio.lowlevel
import httpx
import msgspec
import pytest

from examples.asgi_stream import (
    ASGIApp,
    Message,
    Receive,
    ResultLine,
    chat_app,
    demo_agent,
    demo_app,
    demo_script,
    main,
)
from interpreters.aio import AsyncInterpreter
from interpreters.approvals.audit import AuditRecord
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.testing import Say, ScriptedModel
from pipeline.agent import Agent
from pipeline.values.chunks import Chunk, ErrorChunk, Finish, TextDelta, ToolResult, chunk_decoder
from pipeline.values.result import Cancelled, RunResult, Suspension
from tests.helpers import AsyncTrackedModel

pytestmark = pytest.mark.anyio

JSON = [(b"content-type", b"application/json")]
"""The headers of a request with a JSON body."""


async def _post(app: ASGIApp, body: object) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.post("/chat", json=body)


def _parse(text: str) -> tuple[list[Chunk], ResultLine]:
    lines = text.splitlines()
    chunks = [chunk_decoder.decode(line) for line in lines[:-1]]
    return chunks, msgspec.json.decode(lines[-1], type=ResultLine)


async def test_streams_every_chunk_as_ndjson_then_the_result() -> None:
    results: list[RunResult] = []
    r = await _post(demo_app(on_result=results.append), {"prompt": "weather today?"})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/x-ndjson"
    chunks, last = _parse(r.text)
    assert isinstance(chunks[-1], Finish)
    assert [c.result for c in chunks if isinstance(c, ToolResult)] == ["sunny in Paris"]
    text = "".join(c.text for c in chunks if isinstance(c, TextDelta))
    assert text == "Let me check. weather today? (echo)"
    assert last == ResultLine("finished", text, None)
    assert [x.status for x in results] == ["finished"]


async def test_errors_are_plain_http_errors() -> None:
    app = demo_app()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        assert (await client.get("/elsewhere")).status_code == 404
        assert (await client.get("/chat")).status_code == 405
        bad = await client.post("/chat", json={"promt": "typo"})
    assert bad.status_code == 422
    assert "promt" in bad.text or "prompt" in bad.text


async def test_a_run_past_its_timeout_ends_cancelled_in_the_stream() -> None:
    model = AsyncTrackedModel([Say(["one ", "two ", "three"])], block=(0, 2))
    app = chat_app(Agent.create("m"), AsyncInterpreter(model), timeout=0.5)
    with anyio.fail_after(10):
        r = await _post(app, {"prompt": "hi"})
    chunks, last = _parse(r.text)
    assert chunks[-1] == ErrorChunk("Cancelled", "run cancelled: timed out after 0.5 s")
    assert last.status == "cancelled"
    assert last.error is not None and "timed out" in last.error
    # the model blocks before "two "; a stalled machine may time out even earlier
    assert last.text == "".join(c.text for c in chunks if isinstance(c, TextDelta))
    assert "one ".startswith(last.text)
    assert model.closed == model.opened  # no model stream left open


async def test_a_client_that_disconnects_cancels_its_run() -> None:
    model = AsyncTrackedModel([Say([f"w{i} " for i in range(1000)])])
    results: list[RunResult] = []
    app = chat_app(Agent.create("m"), AsyncInterpreter(model), on_result=results.append)
    gone = anyio.Event()
    request_sent = False
    sent: list[Message] = []

    async def receive() -> Message:
        nonlocal request_sent
        if not request_sent:
            request_sent = True
            return {"type": "http.request", "body": b'{"prompt": "go"}', "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        body = message.get("body", b"")
        if isinstance(body, bytes) and b"text-delta" in body:
            gone.set()  # the client leaves after the first word
        await anyio.lowlevel.checkpoint()

    scope: Message = {"type": "http", "method": "POST", "path": "/chat", "headers": JSON}
    with anyio.fail_after(10):
        await app(scope, receive, send)
    assert [r.status for r in results] == ["cancelled"]
    assert results[0].error == Cancelled("client disconnected")
    assert model.closed_early == 1
    assert model.produced < 10  # stopped right away, not after the 1000 words
    bodies = [m for m in sent if m["type"] == "http.response.body"]
    assert len(bodies) < 10
    assert results[0].messages.messages[-1].incomplete


async def test_lifespan_is_acknowledged() -> None:
    incoming: list[Message] = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[object] = []

    async def receive() -> Message:
        return incoming.pop(0)

    async def send(message: Message) -> None:
        sent.append(message["type"])

    await demo_app()({"type": "lifespan"}, receive, send)
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


async def test_the_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    await main()
    lines = capsys.readouterr().out.splitlines()
    assert msgspec.json.decode(lines[-1], type=ResultLine).status == "finished"
    assert any('"tool-result"' in line for line in lines)


# --- the AI SDK UI message stream (`useChat`) on POST /api/chat --------------------------


def _ui_events(text: str) -> list[dict[str, object]]:
    """The SSE events a `useChat` client reads, up to `data: [DONE]`."""
    frames = text.split("\n\n")
    assert frames[-2:] == ["data: [DONE]", ""]
    out: list[dict[str, object]] = []
    for frame in frames[:-2]:
        assert frame.startswith("data: ")
        event = msgspec.json.decode(frame.removeprefix("data: "))
        assert isinstance(event, dict)
        out.append(event)
    return out


def _use_chat_body(*texts: str) -> dict[str, object]:
    """What `useChat`'s default transport posts: the chat id and its UI messages."""
    roles = ["user", "assistant"]
    return {
        "id": "chat-1",
        "trigger": "submit-message",
        "messages": [
            {"id": f"m{i}", "role": roles[i % 2], "parts": [{"type": "text", "text": t}]}
            for i, t in enumerate(texts)
        ],
    }


async def test_use_chat_reads_the_ui_message_stream() -> None:
    transport = httpx.ASGITransport(app=demo_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        r = await client.post("/api/chat", json=_use_chat_body("weather today?"))
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/event-stream"
    assert r.headers["x-vercel-ai-ui-message-stream"] == "v1"
    evs = _ui_events(r.text)
    kinds = [e["type"] for e in evs]
    assert kinds[0] == "start" and kinds[-1] == "finish"
    assert kinds.count("start-step") == kinds.count("finish-step") == 2
    outputs = [e for e in evs if e["type"] == "tool-output-available"]
    assert [e["output"] for e in outputs] == ["sunny in Paris"]
    text = "".join(str(e["delta"]) for e in evs if e["type"] == "text-delta")
    assert text == "Let me check. weather today? (echo)"


async def test_use_chat_history_goes_to_the_model() -> None:
    model = AsyncTrackedModel([Say("ok")])
    app = chat_app(Agent.create("m"), AsyncInterpreter(model))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        r = await client.post("/api/chat", json=_use_chat_body("hi", "hello!", "how are you?"))
        bad = await client.post("/api/chat", json={"messages": "nope"})
    assert r.status_code == 200
    sent = [(m.role, m.text) for m in model.requests[0].messages if m.role != "system"]
    assert sent == [("user", "hi"), ("assistant", "hello!"), ("user", "how are you?")]
    assert bad.status_code == 422


async def test_a_discarded_answer_reaches_the_client_marked_discarded() -> None:
    from effects import Continue
    from pipeline.processor import OutputStepArgs, OutputStepResult, Processor, abort

    class Guard(Processor):
        id = "guard"

        def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
            if len(args.text) < 10:
                abort("Too short.", retry=True)
            return Continue()

    model = AsyncTrackedModel([Say("Sunny."), Say("It is sunny in Paris.")])
    app = chat_app(Agent.create("m", output_processors=[Guard()]), AsyncInterpreter(model))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        r = await client.post("/api/chat", json=_use_chat_body("weather?"))
    evs = _ui_events(r.text)
    discarded = [e for e in evs if e["type"] == "data-step-discarded"]
    assert len(discarded) == 1
    data = discarded[0]["data"]
    assert isinstance(data, dict)
    assert "transient" not in discarded[0]  # kept in the client's message
    # the discarded text is named, and the retried answer is a separate text part
    [first, second] = [e["id"] for e in evs if e["type"] == "text-start"]
    assert data["part_ids"] == [first] and first != second
    i = evs.index(discarded[0])
    assert evs[i + 1] == {"type": "finish-step"}  # the discarded step is closed


async def test_a_timed_out_run_ends_the_ui_stream_with_an_error() -> None:
    model = AsyncTrackedModel([Say(["one ", "two ", "three"])], block=(0, 2))
    app = chat_app(Agent.create("m"), AsyncInterpreter(model), timeout=0.5)
    with anyio.fail_after(10):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            r = await client.post("/api/chat", json=_use_chat_body("hi"))
    evs = _ui_events(r.text)
    assert [e["type"] for e in evs][-3:] == ["error", "finish-step", "finish"]
    assert "timed out" in str(evs[-3]["errorText"])
    assert model.closed == model.opened


# --- bounds: the body and the messages a client may send ---------------------------------


def _endless_body(chunk: int = 64 << 10) -> tuple[list[int], Receive]:
    """A `receive` that sends body chunks without end (a 200 MB upload, and more), and
    the count of chunks it was asked for."""
    asked = [0]

    async def receive() -> Message:
        asked[0] += 1
        return {"type": "http.request", "body": b"x" * chunk, "more_body": True}

    return asked, receive


@pytest.mark.parametrize("path", ["/chat", "/api/chat"])
async def test_a_body_over_the_cap_is_refused_with_413_reading_no_further(path: str) -> None:
    model = AsyncTrackedModel([Say("ok")])
    app = chat_app(Agent.create("m"), AsyncInterpreter(model), max_body_bytes=1 << 20)
    asked, receive = _endless_body()
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Message = {"type": "http", "method": "POST", "path": path, "headers": JSON}
    with anyio.fail_after(10):
        await app(scope, receive, send)
    assert sent[0]["status"] == 413
    body = sent[1]["body"]
    assert isinstance(body, bytes) and b"1048576" in body
    assert asked[0] <= (1 << 20) // (64 << 10) + 1  # stopped at the cap
    assert model.opened == 0


async def test_a_declared_length_over_the_cap_is_refused_before_reading() -> None:
    model = AsyncTrackedModel([Say("ok")])
    app = chat_app(Agent.create("m"), AsyncInterpreter(model), max_body_bytes=1000)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        big = await client.post("/chat", json={"prompt": "x" * 2000})
        fine = await client.post("/chat", json={"prompt": "x" * 900})
    assert big.status_code == 413 and "1000" in big.text
    assert fine.status_code == 200
    assert model.opened == 1


async def test_more_messages_than_the_cap_are_refused_with_413() -> None:
    model = AsyncTrackedModel([Say("ok")])
    app = chat_app(Agent.create("m"), AsyncInterpreter(model), max_messages=3)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        many = await client.post("/api/chat", json=_use_chat_body("a", "b", "c", "d"))
        three = await client.post("/api/chat", json=_use_chat_body("a", "b", "c"))
    assert many.status_code == 413 and "4 messages" in many.text and "3" in many.text
    assert three.status_code == 200
    assert model.opened == 1


def test_the_default_caps_and_bad_ones() -> None:
    from examples.asgi_stream import MAX_BODY_BYTES, MAX_MESSAGES

    assert MAX_BODY_BYTES == 1 << 20 and MAX_MESSAGES == 200
    interp = AsyncInterpreter(AsyncTrackedModel([Say("ok")]))
    for bad in ({"max_body_bytes": 0}, {"max_messages": 0}, {"max_body_bytes": 1.5}):
        with pytest.raises((ValueError, TypeError)):
            chat_app(Agent.create("m"), interp, **bad)


async def test_a_suspended_run_waits_before_its_client_hears_the_end() -> None:
    class Saves(MemoryApprovalStore):
        def __init__(self) -> None:
            super().__init__()
            self.saved = 0

        def save(self, suspension: Suspension, audit: Sequence[AuditRecord] = ()) -> None:
            super().save(suspension, audit)
            self.saved += 1

    store = Saves()
    app = chat_app(demo_agent(), AsyncInterpreter(ScriptedModel(demo_script)),
                   approvals=Approvals(store))
    saved_at_done: list[int] = []
    body = msgspec.json.encode({"id": "chat-now", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "refund 250 on order N1"}]}
    ]})
    request: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> Message:
        if request:
            return request.pop()
        await anyio.sleep_forever()
        raise AssertionError  # (never)

    async def send(message: Message) -> None:
        body = message.get("body", b"")
        if isinstance(body, bytes) and b"[DONE]" in body:
            saved_at_done.append(store.saved)  # an answer sent now must find the run

    scope: Message = {"type": "http", "method": "POST", "path": "/api/chat", "headers": JSON}
    with anyio.fail_after(10):
        await app(scope, receive, send)
    assert saved_at_done == [1]


async def test_an_answer_to_a_run_another_answer_took_meanwhile_is_a_409() -> None:
    class TakenMeanwhile(MemoryApprovalStore):
        """Another answer takes the run between this one's read and its take."""

        def take(
            self,
            run_id: str,
            audit: Sequence[AuditRecord] = (),
            expected: Suspension | None = None,
        ) -> Suspension:
            super().take(run_id)
            return super().take(run_id, audit, expected)  # RunNotSuspended: taken already

    app = chat_app(demo_agent(), AsyncInterpreter(ScriptedModel(demo_script)),
                   approvals=Approvals(TakenMeanwhile()))
    transport = httpx.ASGITransport(app=app)
    text = {"type": "text", "text": "refund 250 on order R1"}
    user = {"id": "u1", "role": "user", "parts": [text]}
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        first = await client.post("/api/chat", json={"id": "chat-race", "messages": [user]})
        [approval] = [line for line in first.text.split("\n\n")
                      if '"tool-approval-request"' in line]
        approval_id = msgspec.json.decode(approval.removeprefix("data: "))["approvalId"]
        answer = await client.post("/api/chat/decisions", json={
            "id": "chat-race", "decisions": [{"id": approval_id, "approved": True}]})
    assert answer.status_code == 409, answer.text
