"""A streaming chat endpoint as a plain ASGI app: no framework, no extra dependency.

    uvicorn examples.asgi_stream:app        # under any ASGI server (uvicorn, hypercorn...)
    python -m examples.asgi_stream          # or one request in-process, through httpx

`POST /chat` with `{"prompt": "..."}` runs the agent on the `AsyncInterpreter` and
streams every chunk as one JSON line (`application/x-ndjson`), then a last line with
the outcome: `{"type": "result", "status": "finished", "text": "..."}`.

`POST /api/chat` speaks the AI SDK's UI message stream (server-sent events, header
`x-vercel-ai-ui-message-stream: v1`): point a `useChat` front end at it as is. It takes
the body `useChat` posts (`{"id": ..., "messages": [UI messages]}`) and streams text,
reasoning, tool calls and results, data parts, errors and the finish; an answer a
processor discarded for a retry arrives marked by a `data-step-discarded` part.

- **Backpressure for free**: the interpreter is pulled by the loop that sends to the
  client, so the model is read only as fast as the client takes the response.
- **A client that goes away cancels its run** (unless `resumable`, below): a task
  watches for `http.disconnect` and aborts the run's `CancelSignal`; the model stream is
  closed and the run ends "cancelled" with what it had (`on_result` sees it, e.g. to
  save the history).
- `timeout=` bounds every run.
- **Every input has a cap**: a body over `max_body_bytes` (1 MiB by default) is refused
  with 413 as soon as its declared length or what arrived says so, read no further; a
  `useChat` request carrying more than `max_messages` (200) messages is refused with 413.
  Raise them for your app, never drop them: an unbounded body is memory a client takes.
- **No cross-site requests**: a page on another site could otherwise approve a refund in
  its visitor's browser (CSRF). A `POST` must carry JSON (`content-type:
  application/json`, else 415): a form or `text/plain` body needs no CORS preflight, JSON
  does, and this app grants none. A `POST` or `DELETE` a browser marks as from elsewhere
  (`Sec-Fetch-Site` other than `same-origin`, an `Origin` other than the `Host`) is a 403.

**Approval of a tool call, end to end**: a call a gate asks a person about suspends the
run; its stream carries the AI SDK's `tool-approval-request` part (its `approvalId` the
digest a decision is bound to) and the run waits in `approvals` (an `Approvals` store).
The answer comes back as `useChat` sends it after `addToolApprovalResponse`: `POST
/api/chat` with the chat's `id` and its messages, the last an assistant message whose
tool part is in state `approval-responded` with `approval: {id, approved, reason}`. The
run waiting in that chat (its thread: `approvals.suspended(thread_id=...)`) resumes and
the response streams the rest: `tool-approval-response`, then the tool's output
(approved) or `tool-output-denied` (denied, the tool not run), then the model's answer.
Who decided is the `x-user` header (your sign-in sets it; the audit trail and the
`tool-approval-response` part carry it), and `GET /api/approvals` lists what waits in
each chat and who decided what (the approval store's audit records).
A chat with no run waiting (none, or decided already) is a 404, a run another answer
decided meanwhile a 409, an answer that fits no waiting call (or leaves one undecided) a
422; nothing runs.
`GET /` serves a page that shows the Approve / Deny buttons.

**Editing the arguments**: `useChat` can approve or deny, not edit. `POST
/api/chat/decisions` takes `{"id": <chat id>, "decisions": [{"id": <approvalId>,
"approved": true, "args": {...}}]}` (an answer without `args` approves or denies as
above) and streams the rest of the run as the UI message stream: the call runs once, with
the edited arguments. Arguments the tool's schema refuses are a 422 and the run still
waits; so are `args` on a denial. The page's Edit button posts there.

**Reconnecting**: with `resumable=True` (and a `timeout`) a `useChat` chat's run goes on
when its client goes away, and `GET /api/chat/{id}/stream` gives it again: the frames
after the one its `Last-Event-ID` names (every frame carries an SSE id), or, without
one, the live stream from its start, as `useChat({resume: true})` asks; `DELETE` there
stops the run. A run without its client is read at the model's pace, its frames kept
under a cap (`max_replay_bytes`); see examples/stream_replay.py.

The demo model is scripted (it echoes the prompt, calls a weather tool when asked, and a
refund tool that asks for approval above 100 when asked for a refund: "refund 250 on
order A17"), so the example runs offline; swap in a real provider's interpreter to go live. The same
app works in FastAPI/Starlette by mounting it (`app.mount("/agent", chat_app(...))`).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path

import anyio
import msgspec

from examples.stream_replay import Gone, Replays
from interpreters import AsyncInterpreter, CancelSignal
from interpreters.approvals import decide_answers
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.testing import Say, ScriptedModel, call
from pipeline import Agent, ModelRequest, RunResult, tool
from pipeline.approval import ApprovalAnswer, ApprovalError, Resumption, RunNotSuspended, UnknownRun
from pipeline.ui_stream import (
    NDJSON_HEADERS,
    SSE_DONE,
    UI_MESSAGE_STREAM_HEADERS,
    UIChatRequest,
    ndjson_async,
    ui_chat_messages,
    ui_message_sse_async,
)
from pipeline.values import RunInput

Scope = MutableMapping[str, object]
Message = MutableMapping[str, object]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY_BYTES = 1 << 20
"""A request body at most: a chat turn is a few kB, a long `useChat` history some 100 kB."""
MAX_MESSAGES = 200
"""The messages a `useChat` request may carry at most."""
MAX_WAITING = 1000
"""The chats whose stream a resumable app keeps at most (the oldest is forgotten)."""
MAX_REPLAY_BYTES = 16 << 20
"""What the kept streams of a resumable app take at most (the oldest is forgotten)."""
DECISIONS = "/api/chat/decisions"
"""Where decisions `useChat` cannot send go (an edit): the rest of the run streams back."""
PAGE = Path(__file__).with_name("asgi_stream.html")
"""The page `GET /` serves: a chat that shows Approve / Deny for a call that waits."""


class TooLarge(Exception):
    """A request over one of the app's caps (answered 413 with this message)."""


class ChatRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    prompt: str
    thread_id: str | None = None


class Decisions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The body of `POST /api/chat/decisions`: the chat and a decision per waiting call."""

    id: str
    decisions: tuple[ApprovalAnswer, ...]


class AnsweredPart(msgspec.Struct, frozen=True, rename="camel"):
    """A UI message part as far as an answer goes: a tool part in `approval-responded`."""

    type: str
    state: str | None = None
    approval: ApprovalAnswer | None = None


class AnsweredMessage(msgspec.Struct, frozen=True):
    role: str
    parts: tuple[AnsweredPart, ...] = ()


class AnsweredChat(msgspec.Struct, frozen=True):
    """The body `useChat` posts, read for the approval answers its last message carries."""

    messages: tuple[AnsweredMessage, ...]
    id: str | None = None


def approval_answers(body: AnsweredChat) -> tuple[ApprovalAnswer, ...]:
    """The answers of the last message when it is the assistant's with tool parts in
    `approval-responded` (what `useChat` sends after `addToolApprovalResponse`), else ()."""
    if not body.messages or body.messages[-1].role != "assistant":
        return ()
    return tuple(
        p.approval for p in body.messages[-1].parts
        if p.state == "approval-responded" and p.approval is not None
    )


class ResultLine(msgspec.Struct, frozen=True, tag="result"):
    """The last line of a response: how the run ended."""

    status: str
    text: str
    error: str | None = None


def chat_app(
    agent: Agent,
    interpreter: AsyncInterpreter,
    *,
    timeout: float | None = None,
    on_result: Callable[[RunResult], object] | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    max_messages: int = MAX_MESSAGES,
    approvals: Approvals | None = None,
    max_waiting: int = MAX_WAITING,
    resumable: bool = False,
    max_replay_bytes: int = MAX_REPLAY_BYTES,
    deps: object = None,
) -> ASGIApp:
    """An ASGI app serving `POST /chat` (NDJSON), `POST /api/chat` (`useChat`, with
    approvals kept in `approvals`, in memory by default) and `GET /` (a page); with
    `resumable`, `GET` / `DELETE /api/chat/{id}/stream` (reconnect, stop). `deps`: what
    the agent's tools that take a `ToolContext` get, in every run (a database pool...)."""
    caps = (("max_body_bytes", max_body_bytes), ("max_messages", max_messages),
            ("max_waiting", max_waiting), ("max_replay_bytes", max_replay_bytes))
    for name, cap in caps:
        if type(cap) is not int or cap < 1:
            raise ValueError(f"{name} must be an int >= 1, got {cap!r}")
    if type(resumable) is not bool:
        raise ValueError(f"resumable must be a bool, got {resumable!r}")
    if resumable and timeout is None:
        raise ValueError("a resumable run outlives its client: give it a timeout")
    replays = Replays(max_replay_bytes, max_waiting) if resumable else None
    # A chat's runs are in its thread: the desk finds the one that waits there.
    desk = Approvals(approvals.store if approvals is not None else MemoryApprovalStore(), agent)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope.get("path")
        if path == "/" and scope.get("method") == "GET":
            await _page(send)
            return
        if path == "/api/approvals" and scope.get("method") == "GET":
            # What waits in each customer's chat, and who decided what (the audit trail).
            listing = {"waiting": desk.suspended(), "decided": desk.audit(limit=1000)}
            await _plain(send, 200, msgspec.json.encode(listing), b"application/json")
            return
        chat_stream = _stream_chat_id(path) if replays is not None else None
        if replays is not None and chat_stream is not None:
            await _reconnect(replays, chat_stream, scope, receive, send)
            return
        if path not in ("/chat", "/api/chat", DECISIONS):
            await _plain(send, 404, b"not found")
            return
        if scope.get("method") != "POST":
            await _plain(send, 405, b"use POST")
            return
        refused = _refused(scope, json_body=True)
        if refused is not None:
            await _plain(send, *refused)
            return
        run_input: RunInput
        thread_id: str | None
        resumed: Resumption | None = None
        try:
            body = await _body(scope, receive, max_body_bytes)
            if path == "/chat":
                req = msgspec.json.decode(body, type=ChatRequest)
                run_input, thread_id = req.prompt, req.thread_id
            elif path == DECISIONS:
                decided = msgspec.json.decode(body, type=Decisions)
                run_input, thread_id = (), decided.id
                resumed = decide_answers(desk, decided.decisions, thread_id=decided.id,
                                         by=_user(scope))
            else:
                ui = msgspec.json.decode(body, type=UIChatRequest)
                if len(ui.messages) > max_messages:
                    raise TooLarge(
                        f"{len(ui.messages)} messages, over the cap of {max_messages}"
                    )
                run_input, thread_id = ui_chat_messages(ui), ui.id
                answers = approval_answers(msgspec.json.decode(body, type=AnsweredChat))
                if answers and thread_id is not None:
                    resumed = decide_answers(desk, answers, thread_id=thread_id, by=_user(scope))
        except (ApprovalError, TooLarge, msgspec.DecodeError, msgspec.ValidationError) as e:
            await _plain(send, _status(e), str(e).encode())
            return
        ui_stream = path != "/chat"
        headers = UI_MESSAGE_STREAM_HEADERS if ui_stream else NDJSON_HEADERS
        await send({"type": "http.response.start", "status": 200, "headers": list(headers)})
        signal = CancelSignal()
        replay = None
        if replays is not None and ui_stream and thread_id is not None:
            replay = replays.start(thread_id, signal)
        gone = anyio.Event()  # the client went away

        def left() -> None:
            gone.set()
            if replay is None:  # (a resumable run goes on for the client to come back)
                signal.cancel("client disconnected")

        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_disconnect, receive, left)
            # A resumed run goes on with its own history, in its own thread.
            stream = interpreter.stream(
                agent, () if resumed is not None else run_input, resume=resumed,
                thread_id=thread_id, signal=signal, timeout=timeout, deps=deps,
            )
            try:
                async with stream:
                    frames = ui_message_sse_async(stream) if ui_stream else ndjson_async(stream)
                    async for frame in frames:  # ends promptly once the signal is aborted
                        if frame == SSE_DONE:
                            continue  # sent once the run is kept (below)
                        if replays is not None and replay is not None:
                            frame = replays.add(replay, frame)
                        if not gone.is_set():  # (else nothing more to send)
                            await send({"type": "http.response.body", "body": frame,
                                        "more_body": True})
                result = stream.result
                # A suspended run is kept before its client hears the end, so an answer
                # sent at once finds it waiting.
                desk.keep(result)
                last = SSE_DONE if ui_stream else msgspec.json.encode(ResultLine(
                    result.status, result.text, str(result.error) if result.error else None
                )) + b"\n"  # NDJSON ends with the outcome
                if replays is not None and replay is not None:
                    last = replays.add(replay, last)
            finally:
                if replays is not None and replay is not None:
                    replays.end(replay)  # its readers stop waiting
            if not gone.is_set():
                await send({"type": "http.response.body", "body": last, "more_body": False})
            tg.cancel_scope.cancel()  # stop watching: the response is over
        if on_result is not None:
            on_result(result)

    return app


def _user(scope: Scope) -> str:
    """Who decides (the principal in the audit trail): the `x-user` your sign-in sets."""
    return (_header(scope, b"x-user") or b"anonymous").decode("utf-8", "replace")


def _status(e: Exception) -> int:
    """The HTTP status a refused request is answered with."""
    if isinstance(e, TooLarge):
        return 413
    if isinstance(e, UnknownRun):
        return 404  # no run waits in this chat
    if isinstance(e, RunNotSuspended):
        return 409  # decided already: the run went on
    return 422  # a body that does not decode, or answers that fit no waiting call


def _refused(scope: Scope, *, json_body: bool) -> tuple[int, bytes] | None:
    """Why a request that acts (approves, runs, stops) is refused, if it is: a browser
    says it comes from another site (`Sec-Fetch-Site`, `Origin`), or its body is not
    JSON. A page elsewhere may send a form or `text/plain` without asking; a JSON body
    needs a CORS preflight, which this app never grants. (Clients that are no browser
    send neither header.)"""
    site = _header(scope, b"sec-fetch-site")
    origin = _header(scope, b"origin")
    host = _header(scope, b"host")
    if site not in (None, b"same-origin", b"none") or (
        origin is not None and origin.partition(b"://")[2] != host
    ):
        return 403, b"a request from another site"
    ctype = _header(scope, b"content-type") or b""
    if json_body and ctype.partition(b";")[0].strip().lower() != b"application/json":
        return 415, b"send JSON (content-type: application/json)"
    return None


async def _watch_disconnect(receive: Receive, left: Callable[[], None]) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            left()
            return


def _stream_chat_id(path: object) -> str | None:
    """The chat id of `/api/chat/{id}/stream`, else None."""
    prefix, suffix = "/api/chat/", "/stream"
    if not (isinstance(path, str) and path.startswith(prefix) and path.endswith(suffix)):
        return None
    return path[len(prefix):-len(suffix)] or None


async def _reconnect(
    replays: Replays, chat_id: str, scope: Scope, receive: Receive, send: Send
) -> None:
    """`GET /api/chat/{id}/stream`: the chat's stream again, after the frame its
    `Last-Event-ID` names, or from its start while it is live (204 when nothing is);
    `DELETE`: stop the chat's live run."""
    method = scope.get("method")
    if method == "DELETE":
        refused = _refused(scope, json_body=False)
        if refused is not None:
            await _plain(send, *refused)
            return
        live = replays.live(chat_id)
        if live is not None:
            live.signal.cancel("stopped by the client")
        await _plain(send, 204, b"")
        return
    if method != "GET":
        await _plain(send, 405, b"use GET or DELETE")
        return
    last = _header(scope, b"last-event-id")
    try:
        if last is None:
            replay, index = replays.live(chat_id), -1
            if replay is None:
                await _plain(send, 204, b"")  # no run of this chat streams
                return
        else:
            replay, index = replays.resumed(chat_id, last.decode("latin-1"))
    except Gone as e:
        await _plain(send, 410, str(e).encode())
        return
    except ValueError as e:
        await _plain(send, 422, str(e).encode())
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": list(UI_MESSAGE_STREAM_HEADERS)})
    async with anyio.create_task_group() as tg:
        tg.start_soon(_watch_disconnect, receive, tg.cancel_scope.cancel)
        async for frame in replay.after(index):
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        tg.cancel_scope.cancel()


async def _body(scope: Scope, receive: Receive, cap: int) -> bytes:
    """The request body, at most `cap` bytes (else `TooLarge`, reading no further)."""
    over = f"a body over the cap of {cap} bytes"
    length = _header(scope, b"content-length")
    if length is not None and not (length.isdigit() and int(length) <= cap):
        raise TooLarge(over)  # (a length that is no number is refused as well)
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        body = message.get("body", b"")
        if isinstance(body, bytes):
            size += len(body)
            if size > cap:
                raise TooLarge(over)
            parts.append(body)
        if not message.get("more_body", False):
            return b"".join(parts)


def _header(scope: Scope, name: bytes) -> bytes | None:
    """The value of the request's header `name` (lower case), if it has one."""
    headers = scope.get("headers")
    for key, value in headers if isinstance(headers, list) else ():
        if isinstance(key, bytes) and isinstance(value, bytes) and key.lower() == name:
            return value
    return None


async def _plain(
    send: Send, status: int, text: bytes, ctype: bytes = b"text/plain; charset=utf-8"
) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", ctype)]})
    await send({"type": "http.response.body", "body": text, "more_body": False})


async def _page(send: Send) -> None:
    await send({
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"content-type", b"text/html; charset=utf-8")],
    })
    await send({"type": "http.response.body", "body": PAGE.read_bytes(), "more_body": False})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


# --- the demo agent on a scripted model ------------------------------------------------


def weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


refunds: deque[tuple[str, int]] = deque(maxlen=1000)
"""The refunds the demo's tool made (order, amount), the last 1000."""


def refund(order: str, amount: int) -> str:
    """Refund an amount on an order."""
    refunds.append((order, amount))
    return f"refunded {amount} on {order}"


def demo_script(request: ModelRequest) -> Say:
    """Echo the prompt word by word; look up the weather first when asked about it, and
    make a refund when asked for one ("refund 250 on order A17")."""
    prompt = next((m.text for m in request.messages if m.role == "user"), "")
    tool_messages = [m for m in request.messages if m.role == "tool"]
    asked = re.search(r"refund (\d+) on order (\w+)", prompt.lower())
    if asked and not tool_messages:
        order, amount = asked.group(2).upper(), int(asked.group(1))
        return Say("Let me see. ", calls=[call("refund", order=order, amount=amount)])
    if asked:
        [done] = [p for p in tool_messages[-1].tool_results()]
        return Say(f"Not refunded: {done.result}" if done.is_error else "Done.")
    if "weather" in prompt.lower() and not tool_messages:
        return Say("Let me check. ", calls=[call("weather", city="Paris")])
    words = prompt.split() or ["..."]
    return Say([f"{w} " for w in words] + ["(echo)"], chunk_latency=0.05)


def demo_agent() -> Agent:
    """The demo's agent: the weather and refund tools, a refund above 100 asked about."""
    return Agent.create("demo/echo", instructions="Echo the user.", tools=[
        weather, tool(refund, needs_approval=lambda order, amount: amount > 100)])


def demo_model() -> ScriptedModel:
    """The demo's scripted model (`pipeline studio --agent examples.asgi_stream:demo_agent
    --model examples.asgi_stream:demo_model` chats with it)."""
    return ScriptedModel(demo_script)


def demo_app(
    *,
    real_latency: bool = False,
    timeout: float | None = None,
    on_result: Callable[[RunResult], object] | None = None,
    resumable: bool = False,
) -> ASGIApp:
    """The demo endpoint; `real_latency` paces the scripted model with real sleeps."""
    model = ScriptedModel(demo_script, async_sleep=anyio.sleep if real_latency else None)
    return chat_app(demo_agent(), AsyncInterpreter(model), timeout=timeout,
                    on_result=on_result, resumable=resumable)


app = demo_app(real_latency=True)
"""For `uvicorn examples.asgi_stream:app`."""


async def main() -> None:
    import httpx

    transport = httpx.ASGITransport(app=demo_app())
    client = httpx.AsyncClient(transport=transport, base_url="http://demo")
    body = {"prompt": "weather in Paris?"}
    async with client, client.stream("POST", "/chat", json=body) as response:
        async for line in response.aiter_lines():
            print(line)


if __name__ == "__main__":
    anyio.run(main)
