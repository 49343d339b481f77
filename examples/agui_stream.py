"""An AG-UI endpoint as a plain ASGI app, beside the AI SDK one of examples/asgi_stream.py
(the `agui` extra: `pip install 'pipeline-agents[agui]'`).

    uvicorn examples.agui_stream:app

`POST /agui` takes AG-UI's `RunAgentInput` (`threadId`, `runId`, `messages`...: what an
AG-UI client such as CopilotKit's `HttpAgent` posts), runs the agent on the
`AsyncInterpreter` and streams the run as AG-UI events (`pipeline.agui`): text,
reasoning, tool calls and their results, steps, state (`data-state` chunks), and the
run's end: `RUN_FINISHED`, or `RUN_ERROR` for a failed or tripped run (its reason only).

**Approval of a tool call**: a call a gate asks a person about suspends the run, which
ends with `RUN_FINISHED` whose outcome is `interrupt`, one interrupt per waiting call
(its `id` the approval id, `toolCallId` the call's). The answer is the next run on the
same thread, its `resume` entries answering them: `{"interruptId": <id>, "status":
"resolved", "payload": {"approved": true}}` (or `false` with a `reason`; `"status":
"cancelled"` denies). That run goes on from the suspension and streams the rest: the
decision (`CUSTOM` `tool-approval-response`), the tool's result (approved) or its
denial, then the model's answer. A thread with no run waiting is a 404, a run decided
already a 409, answers that fit no waiting call (or leave one undecided) a 422.

The same caps and cross-site refusals as examples/asgi_stream.py: a body at most
`max_body_bytes`, at most `max_messages` messages, JSON only, a request a browser marks
as from another site a 403.
"""

from __future__ import annotations

from collections import OrderedDict

import anyio
import msgspec
import pydantic
from ag_ui.core import ResumeEntry, RunAgentInput

from examples.asgi_stream import (
    MAX_BODY_BYTES,
    MAX_MESSAGES,
    MAX_WAITING,
    ASGIApp,
    Receive,
    Scope,
    Send,
    TooLarge,
    _body,
    _lifespan,
    _plain,
    _refused,
    _status,
    _watch_disconnect,
    demo_agent,
    demo_script,
)
from interpreters import AsyncInterpreter, CancelSignal
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.testing import ScriptedModel
from pipeline import Agent, RunResult
from pipeline.agui import AGUI_HEADERS, agui_input_messages, agui_sse_async
from pipeline.approval import ApprovalError, Decision, Resumption, UnknownRun, approve, deny

PATH = "/agui"


class Answer(msgspec.Struct, frozen=True):
    """A resume entry's payload: the person's decision."""

    approved: bool
    reason: str | None = None


def agui_app(
    agent: Agent,
    interpreter: AsyncInterpreter,
    *,
    timeout: float | None = None,
    approvals: Approvals | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    max_messages: int = MAX_MESSAGES,
    max_waiting: int = MAX_WAITING,
) -> ASGIApp:
    """An ASGI app serving `POST /agui` (AG-UI), approvals kept in `approvals` (in
    memory by default)."""
    for name, cap in (("max_body_bytes", max_body_bytes), ("max_messages", max_messages),
                      ("max_waiting", max_waiting)):
        if type(cap) is not int or cap < 1:
            raise ValueError(f"{name} must be an int >= 1, got {cap!r}")
    kept = approvals if approvals is not None else Approvals(MemoryApprovalStore())
    waiting: OrderedDict[str, str] = OrderedDict()  # thread id -> its suspended run's id

    def resume(thread_id: str, entries: list[ResumeEntry]) -> Resumption:
        run_id = waiting.get(thread_id)
        if run_id is None:
            raise UnknownRun(f"no run waits for approval in thread {thread_id!r}")
        pending = {p.digest: p for p in kept.waiting(run_id).pending}
        decisions: list[Decision] = []
        for entry in entries:
            p = pending.get(entry.interrupt_id)
            if p is None:
                raise ApprovalError(f"no call waits for interrupt {entry.interrupt_id!r}")
            if entry.status == "cancelled":
                decisions.append(deny(p, "cancelled"))
                continue
            answer = msgspec.convert(entry.payload, Answer)
            decisions.append(approve(p) if answer.approved
                             else deny(p, answer.reason or "denied"))
        return kept.take(agent, run_id, decisions)

    def keep(thread_id: str, result: RunResult) -> None:
        kept.keep(result)
        if result.suspension is not None:
            waiting[thread_id] = result.suspension.run_id
            waiting.move_to_end(thread_id)
            while len(waiting) > max_waiting:
                waiting.popitem(last=False)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope.get("path") != PATH:
            await _plain(send, 404, b"not found")
            return
        if scope.get("method") != "POST":
            await _plain(send, 405, b"use POST")
            return
        refused = _refused(scope, json_body=True)
        if refused is not None:
            await _plain(send, *refused)
            return
        resumed: Resumption | None = None
        try:
            body = await _body(scope, receive, max_body_bytes)
            run_input = RunAgentInput.model_validate_json(body)
            if len(run_input.messages) > max_messages:
                raise TooLarge(
                    f"{len(run_input.messages)} messages, over the cap of {max_messages}")
            if run_input.resume:
                resumed = resume(run_input.thread_id, run_input.resume)
        except (ApprovalError, TooLarge, msgspec.ValidationError) as e:
            await _plain(send, _status(e), str(e).encode())
            return
        except pydantic.ValidationError as e:
            await _plain(send, 422, str(e).encode())
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": list(AGUI_HEADERS)})
        thread_id = run_input.thread_id
        signal = CancelSignal()
        gone = anyio.Event()

        def left() -> None:
            gone.set()
            signal.cancel("client disconnected")

        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_disconnect, receive, left)
            if resumed is not None:
                stream = interpreter.stream(agent, (), resume=resumed, thread_id=thread_id,
                                            signal=signal, timeout=timeout)
            else:
                stream = interpreter.stream(agent, agui_input_messages(run_input),
                                            thread_id=thread_id, signal=signal,
                                            timeout=timeout)
            held: bytes | None = None  # the closing event, sent once the run is kept
            async with stream:
                async for frame in agui_sse_async(
                        stream, thread_id=thread_id, run_id=run_input.run_id):
                    if held is not None and not gone.is_set():
                        await send({"type": "http.response.body", "body": held,
                                    "more_body": True})
                    held = frame
            # A suspended run is kept before its client hears the end, so an answer sent
            # at once finds it waiting.
            keep(thread_id, stream.result)
            if held is not None and not gone.is_set():
                await send({"type": "http.response.body", "body": held, "more_body": True})
            if not gone.is_set():
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            tg.cancel_scope.cancel()

    return app


def demo_app(*, timeout: float | None = None) -> ASGIApp:
    """The demo of examples/asgi_stream.py over AG-UI: the scripted model, its weather and
    refund tools, a refund above 100 asked about."""
    return agui_app(demo_agent(), AsyncInterpreter(ScriptedModel(demo_script)),
                    timeout=timeout)


app = demo_app()
"""For `uvicorn examples.agui_stream:app`."""
