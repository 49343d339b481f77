"""An agent served over the Agent2Agent protocol (A2A), through the official `a2a-sdk`.

    app = a2a_app(agent, AsyncInterpreter(provider), url="https://agents.example/refunds")
    uvicorn.run(app)   # an ASGI app (Starlette): the agent card and the JSON-RPC endpoint

The SDK serves the protocol (the agent card at `/.well-known/agent-card.json`, JSON-RPC at
`/`: A2A 1.0's `SendMessage`, `SendStreamingMessage`, `GetTask`, `CancelTask`, and 0.3's
`message/send`, `message/stream`, `tasks/get`, `tasks/cancel`); this module is its
`AgentExecutor`: each task is a run of `agent` on the interpreter.

- What a task streams is what the run hands its caller: text that passed the run's
  output processors (a PII guard redacts what is served), as artifact updates; the
  answer (`RunResult.text`, and a typed output as a data part) completes the task.
- A run that suspends on an approval leaves the task `input-required`, its status
  message listing the waiting calls (as the run streamed them: through its guards). A
  follow-up message on the task with the decision resumes the run, once: the text
  `approve` or `deny` for every waiting call, or a data part
  `{"decisions": [{"id": <tool_call_id>, "approved": bool, "reason": str}]}`.
- `CancelTask` cancels the run (or drops the suspended run of a waiting task).
- A tripped run rejects the task, a failed one fails it (a message says why); a request
  that cannot be read is answered with an A2A error (`InvalidParams`), running nothing.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

import msgspec
from a2a.helpers.proto_helpers import (
    get_data_parts,
    new_data_part,
    new_text_part,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import Event, EventQueue
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    SendMessageRequest,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import InvalidParamsError
from starlette.applications import Starlette

from interpreters.aio import AsyncInterpreter
from interpreters.approvals.store import Approvals, ApprovalStore, MemoryApprovalStore
from interpreters.core.cancel import CancelSignal
from pipeline.agent import Agent
from pipeline.approval import (
    ApprovalError,
    Decision,
    Resumption,
    approve,
    deny,
    resumption,
)
from pipeline.values.chunks import DataChunk, StepReset, TextDelta, ToolApprovalRequest
from pipeline.values.result import PendingApproval, RunResult

ThreadOf = Callable[[RequestContext], "str | None"]
"""The memory thread of a task's run, from the request (`a2a_app(thread_of=...)`)."""
MAX_INPUT_CHARS = 100_000
"""The longest message text a task takes (more is an `InvalidParams` error)."""
MAX_WAITING = 1_000
"""How many tasks may wait for decisions at once (one more fails, keeping nothing)."""
DISCARDED = "data-step-discarded"
"""What a run streams when a processor discarded a step: its text is not the answer."""


class A2AConfigError(Exception):
    """A setting of the A2A server that cannot work (at construction)."""


def agent_card(
    agent: Agent[Any, Any],
    url: str,
    *,
    description: str | None = None,
    version: str = "1.0.0",
    skills: Sequence[AgentSkill] = (),
) -> AgentCard:
    """The agent card `a2a_app` serves: the agent's name, `description`, the JSON-RPC
    endpoint at `url` (A2A 1.0, streaming), text in and out, and `skills` (one named
    after the agent by default)."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise A2AConfigError(f"url must be the http(s) URL the agent is served at, got {url!r}")
    about = description if description is not None else f"The {agent.name} agent."
    return AgentCard(
        name=agent.name,
        description=about,
        version=version,
        supported_interfaces=[AgentInterface(
            url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/json"],
        skills=list(skills) or [AgentSkill(
            id=agent.name, name=agent.name, description=about, tags=["agent"])],
    )


def a2a_app(
    agent: Agent[Any, Any],
    interpreter: AsyncInterpreter,
    *,
    url: str,
    description: str | None = None,
    version: str = "1.0.0",
    skills: Sequence[AgentSkill] = (),
    approvals: ApprovalStore | None = None,
    task_store: TaskStore | None = None,
    timeout: float | None = None,
    max_input_chars: int = MAX_INPUT_CHARS,
    thread_of: ThreadOf | None = None,
) -> Starlette:
    """An ASGI app serving `agent` over A2A (see the module doc). `url`: where it is
    reached (its card says so); `approvals`: where suspended runs wait for their
    decisions (in memory by default); `task_store`: the SDK's store of tasks (in memory
    by default); `timeout`: seconds each run may take (None: no limit of its own);
    `thread_of`: the memory thread of a task's run (None, the default: none, each task
    stands alone). A2A context ids are chosen by clients: a thread named by one alone is
    shared by whoever names it, so name it from who is calling too."""
    if not isinstance(interpreter, AsyncInterpreter):
        raise A2AConfigError("a2a_app runs its tasks on an AsyncInterpreter (asyncio)")
    if timeout is not None and not (isinstance(timeout, int | float) and timeout > 0):
        raise A2AConfigError(f"timeout must be a number of seconds > 0, got {timeout!r}")
    if not (isinstance(max_input_chars, int) and max_input_chars > 0):
        raise A2AConfigError(f"max_input_chars must be an int > 0, got {max_input_chars!r}")
    card = agent_card(agent, url, description=description, version=version, skills=skills)
    executor = AgentRunExecutor(
        agent, interpreter, Approvals(approvals or MemoryApprovalStore(), agent),
        timeout=timeout, max_input_chars=max_input_chars, thread_of=thread_of,
    )
    handler = _CheckedHandler(
        agent_executor=executor, task_store=task_store or InMemoryTaskStore(),
        agent_card=card,
    )
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True),
    ]
    return Starlette(routes=routes)


class _CheckedHandler(DefaultRequestHandlerV2):
    """The SDK's request handler, with each message checked before it touches a task:
    a message that cannot be read is answered with `InvalidParams` and the task stays
    as it was (a task whose executor raised would be failed, losing a waiting run)."""

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Message | Task:
        self._check(params)
        answer: Message | Task = await super().on_message_send(params, context)
        return answer

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        self._check(params)
        async for event in super().on_message_send_stream(params, context):
            yield event

    def _check(self, params: SendMessageRequest) -> None:
        executor = self.agent_executor
        assert isinstance(executor, AgentRunExecutor)
        executor.check(params.message)


class AgentRunExecutor(AgentExecutor):
    """The SDK's executor of `a2a_app`: each task a run of `agent` (module doc)."""

    def __init__(
        self,
        agent: Agent[Any, Any],
        interpreter: AsyncInterpreter,
        approvals: Approvals,
        *,
        timeout: float | None = None,
        max_input_chars: int = MAX_INPUT_CHARS,
        thread_of: ThreadOf | None = None,
    ) -> None:
        if thread_of is not None and not callable(thread_of):
            raise A2AConfigError("thread_of must be a function of the RequestContext")
        self._agent = agent
        self._thread_of = thread_of
        self._interp = interpreter
        self._desk = approvals
        self._timeout = timeout
        self._max_input = max_input_chars
        self._running: dict[str, CancelSignal] = {}
        """The task ids of the runs going on, each with what cancels it."""
        self._waiting: dict[str, str] = {}
        """The task ids waiting for decisions, each with its suspended run's id."""
        self._cancelled: set[str] = set()

    def check(self, message: Message) -> None:
        """InvalidParams for a message this executor cannot take: a decision that does
        not fit the calls its task waits for, a prompt without text or too long."""
        run_id = self._waiting.get(message.task_id) if message.task_id else None
        if run_id is not None:
            self._decided(run_id, message)
        else:
            self._input(message)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        task_id, context_id = context.task_id, context.context_id
        if message is None or task_id is None or context_id is None:
            raise InvalidParamsError(message="a message is needed")
        current = context.current_task
        resume: Resumption | None = None
        text = ""
        if current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            resume = self._resumption(task_id, message)
        else:
            text = self._input(message)
            if current is None:
                await event_queue.enqueue_event(Task(
                    id=task_id, context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[message],
                ))
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        signal = CancelSignal()
        self._running[task_id] = signal
        try:
            thread = self._thread_of(context) if self._thread_of is not None else None
            result = await self._run(updater, text, resume, thread, signal)
            await self._end(updater, task_id, result)
        finally:
            self._running.pop(task_id, None)
            self._cancelled.discard(task_id)

    async def _run(
        self,
        updater: TaskUpdater,
        text: str,
        resume: Resumption | None,
        thread: str | None,
        signal: CancelSignal,
    ) -> tuple[RunResult[Any], list[ToolApprovalRequest]]:
        """The run, its text streamed as artifact updates as the run hands it out (one
        artifact per stretch of text: a discarded step's is followed by a new one)."""
        asked: list[ToolApprovalRequest] = []
        part = 0
        started = False
        stream = (
            self._interp.stream(self._agent, (), resume=resume, signal=signal,
                                timeout=self._timeout)
            if resume is not None else
            self._interp.stream(self._agent, text, thread_id=thread, signal=signal,
                                timeout=self._timeout)
        )
        async with stream:
            async for chunk in stream:
                t = type(chunk)
                if t is TextDelta:
                    await updater.add_artifact(
                        [new_text_part(chunk.text)],  # type: ignore[union-attr]
                        artifact_id=f"{updater.task_id}-text-{part}", name="text",
                        append=started,
                    )
                    started = True
                elif t is ToolApprovalRequest:
                    asked.append(chunk)  # type: ignore[arg-type]
                elif (t is StepReset or (t is DataChunk and chunk.name == DISCARDED)  # type: ignore[union-attr]
                      ) and started:
                    part += 1
                    started = False
        return stream.result, asked

    async def _end(
        self,
        updater: TaskUpdater,
        task_id: str,
        ended: tuple[RunResult[Any], list[ToolApprovalRequest]],
    ) -> None:
        """The task's state from the run's end."""
        result, asked = ended
        status = result.status
        if status == "finished":
            parts = [new_text_part(result.text)]
            if result.output is not None:
                parts.append(new_data_part(msgspec.to_builtins(result.output)))
            await updater.complete(updater.new_agent_message(parts))
        elif status == "suspended" and result.suspension is not None:
            await self._suspend(updater, task_id, result, asked)
        elif status == "cancelled":
            if task_id not in self._cancelled:  # (else `cancel` said so)
                await updater.cancel(_say(updater, "the run was cancelled"))
        elif status == "tripped" and result.tripwire is not None:
            await updater.reject(_say(updater, f"stopped by {result.tripwire.processor_id}: "
                                               f"{result.tripwire.reason}"))
        else:
            why = type(result.error).__name__ if result.error is not None else status
            await updater.failed(_say(updater, f"the run failed: {why}"))

    async def _suspend(
        self,
        updater: TaskUpdater,
        task_id: str,
        result: RunResult[Any],
        asked: list[ToolApprovalRequest],
    ) -> None:
        """Keep the suspended run for its decisions; the task waits for them. What the
        caller is shown of the waiting calls is what the run streamed of them."""
        if len(self._waiting) >= MAX_WAITING and task_id not in self._waiting:
            await updater.failed(_say(updater, "too many tasks wait for decisions"))
            return
        self._desk.keep(result)
        assert result.suspension is not None
        self._waiting[task_id] = result.suspension.run_id
        shown = [
            {"id": a.tool_call_id, "tool": a.tool_name, "args": a.args, "message": a.message}
            for a in asked
        ]
        lines = "\n".join(f"- {a.message or a.tool_name} ({a.tool_call_id})" for a in asked)
        await updater.requires_input(updater.new_agent_message([
            new_text_part(f"Waiting for approval:\n{lines}\nReply 'approve' or 'deny'."),
            new_data_part({"pending": shown}),
        ]))

    def _input(self, message: Message) -> str:
        """The run's prompt: the message's text parts (InvalidParams without text, or
        with more than `max_input_chars`)."""
        texts = [p.text for p in message.parts if p.HasField("text")]
        text = "\n".join(texts)
        if not text.strip():
            raise InvalidParamsError(message="the message has no text")
        if len(text) > self._max_input:
            raise InvalidParamsError(
                message=f"the message is longer than {self._max_input} characters")
        return text

    def _resumption(self, task_id: str, message: Message) -> Resumption:
        """The waiting run's resumption from a follow-up message's decisions, checked
        before it is taken (InvalidParams for decisions that do not fit: it still
        waits)."""
        run_id = self._waiting.get(task_id)
        if run_id is None:
            raise InvalidParamsError(message="nothing of this task waits for a decision")
        decisions = self._decided(run_id, message)
        try:
            r = self._desk.decide(run_id, decisions)
        except ApprovalError as e:
            raise InvalidParamsError(message=f"the decisions do not fit: {e}") from e
        del self._waiting[task_id]
        return r

    def _decided(self, run_id: str, message: Message) -> list[Decision]:
        """The decisions `message` carries for the run `run_id` waits with, checked
        against it (one per waiting call), taking nothing: InvalidParams when they do not
        fit."""
        try:
            waiting = self._desk.waiting(run_id)
            decisions = _decisions(message, waiting.pending)
            resumption(waiting, decisions)
        except ApprovalError as e:
            raise InvalidParamsError(message=f"the decisions do not fit: {e}") from e
        return decisions

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id, context.context_id
        if task_id is None or context_id is None:
            raise InvalidParamsError(message="a task id is needed")
        updater = TaskUpdater(event_queue, task_id, context_id)
        signal = self._running.get(task_id)
        if signal is not None:
            self._cancelled.add(task_id)
            signal.cancel("cancelled over A2A")
        run_id = self._waiting.pop(task_id, None)
        if run_id is not None:
            self._desk.store.take(run_id)  # the suspended run is never resumed
        await updater.cancel(_say(updater, "cancelled"))


def _say(updater: TaskUpdater, text: str) -> Message:
    return updater.new_agent_message([new_text_part(text)])


def _decisions(message: Message, pending: tuple[PendingApproval, ...]) -> list[Decision]:
    """The decisions a message carries for `pending`: the text `approve`/`deny` for all,
    or a data part `{"decisions": [{"id", "approved", "reason"}]}` (InvalidParams when
    it is neither)."""
    data = get_data_parts(list(message.parts))
    if data:
        return _data_decisions(data, pending)
    text = " ".join(p.text for p in message.parts if p.HasField("text")).strip().lower()
    if text in ("approve", "approved", "yes"):
        return [approve(p) for p in pending]
    if text in ("deny", "denied", "no"):
        return [deny(p, "denied over A2A") for p in pending]
    raise InvalidParamsError(
        message="the task waits for a decision: reply 'approve' or 'deny', or a data "
                "part {'decisions': [{'id': ..., 'approved': true|false}]}")


class _Decided(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    approved: bool
    reason: str = ""


class _DecisionsPart(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    decisions: tuple[_Decided, ...]


def _data_decisions(
    data: list[object], pending: tuple[PendingApproval, ...]
) -> list[Decision]:
    try:
        (one,) = data
        part = msgspec.convert(one, _DecisionsPart)
    except (ValueError, msgspec.ValidationError) as e:
        raise InvalidParamsError(message=f"the decisions part cannot be read: {e}") from e
    by_id = {p.tool_call_id: p for p in pending}
    out: list[Decision] = []
    for d in part.decisions:
        p = by_id.get(d.id)
        if p is None:
            raise InvalidParamsError(message=f"no call {d.id!r} waits in this task")
        out.append(approve(p) if d.approved else deny(p, d.reason or "denied over A2A"))
    return out


__all__ = ["A2AConfigError", "AgentRunExecutor", "a2a_app", "agent_card"]
