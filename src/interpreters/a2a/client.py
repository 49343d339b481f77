"""Remote agents over the Agent2Agent protocol (A2A) as child runs, through `a2a-sdk`.

    remote = RemoteAgents({"refunds": "https://agents.example/refunds"})
    support = Agent.create("openai/gpt-4o", tools=[remote.agent("refunds").as_tool(
        "refunds", "Refund an order.")], output_processors=[PIIDetector()])
    interp = AsyncInterpreter(resolve=remote.resolver(resolve_async_provider))

`remote.agent(name)` is a local agent that stands in for the remote one: its model is the
remote agent (`a2a/<name>`, served by `A2AProvider`), so calling it as a tool or handing
over to it makes a child run like any (`docs/agents.md`): what it streams goes through
its own processors, then the parent's stream processors before the caller, its answer
through the parent's `process_tool_result`; the parent's cancel and deadline reach it.
The pure loop reaches the remote agent by a model call (a typed command), the I/O is here.

One model call of the stand-in is one exchange with the remote agent: the text of the
last user message is sent (`SendStreamingMessage`), the task's text (artifact updates,
else the completed task's status message) streams back as the reply. Each exchange is
bounded (`RemoteLimits`: a deadline over the whole exchange, caps on the events and on
the bytes read); past a bound, or when the remote task fails, is rejected, cancelled or
asks for authentication, the call fails (`ProviderError`, not retried) and the child run
fails: the parent's model reads an error result. An exchange that ends early (the parent
was cancelled) cancels the remote task (`CancelTask`).

A remote task that asks for input (`input-required`, as `a2a_app` does for an approval)
becomes a call of the stand-in's `a2a_decision` tool, which its gate puts to a person
(`AskApproval` with the remote's question): the tree suspends like for any approval; a
decision resumes it, and the next model call sends the decision to the remote task
(`approve`, or `deny` for a denied call).
"""

from __future__ import annotations

import contextlib
import math
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import anyio
import httpx
import msgspec
from a2a.client import A2AClientError, ClientCallContext, ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)

from effects import AskApproval, Continue
from interpreters.providers.provider import AsyncProvider, ProviderError
from pipeline.agent import Agent
from pipeline.processor import BaseProcessor, ToolCallArgs, ToolCallResult, processor
from pipeline.values.chunks import ModelEvent, ModelFinish, TextDelta, TextEnd, TextStart, ToolCall
from pipeline.values.messages import ToolCallPart, ToolResultPart
from pipeline.values.model import ApiError, ModelRequest

ROUTE = "a2a"
"""The route of remote agents' model ids: `a2a/<name>`."""
DECISION_TOOL = "a2a_decision"
"""The stand-in's tool a remote `input-required` becomes (its gate asks a person)."""


class RemoteLimits(msgspec.Struct, frozen=True, kw_only=True):
    """The bounds of one exchange with a remote agent."""

    timeout: float = 120.0
    """Seconds for the whole exchange: the card, the message, its stream to the end."""
    max_events: int = 10_000
    """Stream events at most."""
    max_bytes: int = 4_000_000
    """Bytes read from the remote's responses at most (the card's and the stream's)."""
    cancel_timeout: float = 5.0
    """Seconds a `CancelTask` for an exchange that ended early may take."""

    def __post_init__(self) -> None:
        for name in ("timeout", "cancel_timeout"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and v > 0 and math.isfinite(v)):
                raise ValueError(f"{name} must be a number of seconds > 0, got {v!r}")
        for name in ("max_events", "max_bytes"):
            v = getattr(self, name)
            if not (isinstance(v, int) and v > 0):
                raise ValueError(f"{name} must be an int > 0, got {v!r}")


class RemoteAgentError(Exception):
    """An exchange with a remote agent went past a bound (`RemoteLimits`)."""


def _failed(message: str, error_type: str = "a2a", status: int | None = None) -> ProviderError:
    return ProviderError(ApiError(status=status, message=message, error_type=error_type))


class _CappedStream(httpx.AsyncByteStream):
    """A response body that raises once the exchange read more than its bytes."""

    def __init__(self, inner: httpx.AsyncByteStream, left: list[int]) -> None:
        self._inner = inner
        self._left = left

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self._inner:
            self._left[0] -= len(piece)
            if self._left[0] < 0:
                raise RemoteAgentError("the remote agent sent more bytes than max_bytes")
            yield piece

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedTransport(httpx.AsyncBaseTransport):
    """An HTTP transport whose responses share one budget of bytes."""

    def __init__(self, inner: httpx.AsyncBaseTransport, max_bytes: int) -> None:
        self._inner = inner
        self._left = [max_bytes]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            status_code=response.status_code, headers=response.headers,
            stream=_CappedStream(response.stream, self._left),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Exchange(msgspec.Struct, frozen=True):
    """What one model call of the stand-in sends: a text, on a remote task or a new one."""

    text: str
    task_id: str = ""
    context_id: str = ""


def exchange_of(request: ModelRequest) -> _Exchange:
    """What to send for `request`: the decision for a remote task that asked for one (the
    last message answers the stand-in's `a2a_decision` call), else the last user
    message's text (ValueError when there is none)."""
    messages = request.messages
    if messages and messages[-1].role == "tool":
        for part in messages[-1].parts:
            if type(part) is ToolResultPart and part.tool_name == DECISION_TOOL:
                asked = _decision_call(messages, part.tool_call_id)
                return _Exchange(
                    "deny" if part.is_error else "approve",
                    task_id=str(asked.args.get("task_id", "")),
                    context_id=str(asked.args.get("context_id", "")),
                )
    for m in reversed(messages):
        if m.role == "user":
            text = m.text
            if text.strip():
                return _Exchange(text)
            break
    raise ValueError("a remote agent is sent the text of the last user message: there is none")


def _decision_call(messages: Sequence[Any], call_id: str) -> ToolCallPart:
    for m in reversed(messages):
        for p in m.parts:
            if type(p) is ToolCallPart and p.tool_call_id == call_id:
                return p
    raise ValueError(f"no {DECISION_TOOL} call {call_id!r} in the history")


def _texts(parts: Iterable[Part]) -> str:
    return "".join(p.text for p in parts if p.HasField("text"))


_ENDS_BADLY: dict[int, str] = {
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "rejected the task",
    TaskState.TASK_STATE_CANCELED: "cancelled the task",
    TaskState.TASK_STATE_AUTH_REQUIRED: "asks for authentication",
}
_TERMINAL = frozenset((
    TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_REJECTED, TaskState.TASK_STATE_CANCELED,
))


class _Event(msgspec.Struct, frozen=True):
    """What the exchange reads of one stream event."""

    text: str = ""
    """Text of the answer (an artifact update's, a task's artifacts', a message's)."""
    state: int | None = None
    """The task's state, when the event says it."""
    status_text: str = ""
    """The text of the task's status message."""
    task_id: str = ""
    context_id: str = ""


def _decoded(ev: StreamResponse) -> _Event:
    kind = ev.WhichOneof("payload")
    if kind == "message":
        m = ev.message
        return _Event(_texts(m.parts), TaskState.TASK_STATE_COMPLETED,
                      task_id=m.task_id, context_id=m.context_id)
    if kind == "task":
        t = ev.task
        return _Event("".join(_texts(a.parts) for a in t.artifacts), t.status.state,
                      _texts(t.status.message.parts), t.id, t.context_id)
    if kind == "artifact_update":
        a = ev.artifact_update
        return _Event(_texts(a.artifact.parts), task_id=a.task_id, context_id=a.context_id)
    if kind == "status_update":
        u = ev.status_update
        return _Event("", u.status.state, _texts(u.status.message.parts), u.task_id,
                      u.context_id)
    return _Event()


class A2AProvider:
    """The model provider of a remote agent's stand-in (`RemoteAgents.agent`): one model
    call, one bounded exchange with the agent at `url` (see the module doc)."""

    def __init__(
        self,
        url: str,
        *,
        limits: RemoteLimits | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"a remote agent's url must be http(s), got {url!r}")
        self.url = url
        self.limits = limits if limits is not None else RemoteLimits()
        self._transport = transport

    async def astream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        try:
            exchange = exchange_of(request)
        except ValueError as e:
            raise _failed(str(e), "invalid_request") from e
        limits = self.limits
        deadline = anyio.current_time() + limits.timeout
        http = httpx.AsyncClient(
            transport=_CappedTransport(
                self._transport or httpx.AsyncHTTPTransport(), limits.max_bytes),
            timeout=httpx.Timeout(limits.timeout),
        )
        task_id = exchange.task_id
        # A new exchange names its context, so that its task can be found and cancelled
        # when it ends before the task's id came back.
        context_id = exchange.context_id or f"{ROUTE}-{uuid.uuid4().hex}"
        ended = False
        try:
            with _within(deadline, "the remote agent's card"):
                client = await create_client(self.url, ClientConfig(
                    streaming=True, httpx_client=http))
            message = Message(
                role=Role.ROLE_USER, message_id=uuid.uuid4().hex,
                parts=[Part(text=exchange.text)],
                task_id=task_id, context_id=context_id,
            )
            events = client.send_message(
                SendMessageRequest(message=message),
                context=ClientCallContext(timeout=limits.timeout),
            )
            text_open = False
            streamed = False
            seen = 0
            try:
                while True:
                    with _within(deadline, "the remote agent's stream"):
                        try:
                            ev: StreamResponse = await events.__anext__()
                        except StopAsyncIteration:
                            break
                    seen += 1
                    if seen > limits.max_events:
                        raise _failed(f"the remote agent sent more than {limits.max_events} "
                                      "events", "limit")
                    d = _decoded(ev)
                    task_id, context_id = d.task_id or task_id, d.context_id or context_id
                    text, state, status_text = d.text, d.state, d.status_text
                    if text:
                        if not text_open:
                            text_open = True
                            yield TextStart(ROUTE)
                        streamed = True
                        yield TextDelta(ROUTE, text)
                    if state is None or state in (
                        TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING
                    ):
                        continue
                    if state == TaskState.TASK_STATE_COMPLETED:
                        ended = True
                        if not streamed and status_text:
                            if not text_open:
                                text_open = True
                                yield TextStart(ROUTE)
                            yield TextDelta(ROUTE, status_text)
                        if text_open:
                            yield TextEnd(ROUTE)
                        yield ModelFinish("stop")
                        return
                    if state == TaskState.TASK_STATE_INPUT_REQUIRED:
                        ended = True  # (it waits: nothing to cancel)
                        if text_open:
                            yield TextEnd(ROUTE)
                        yield ToolCall(f"{ROUTE}-{task_id}-{seen}", DECISION_TOOL, {
                            "task_id": task_id, "context_id": context_id,
                            "question": status_text or "The remote agent asks for input.",
                        })
                        yield ModelFinish("tool-calls")
                        return
                    if state in _TERMINAL:
                        ended = True
                    how = _ENDS_BADLY.get(state, f"ended in state {state}")
                    raise _failed(f"the remote agent {how}"
                                  + (f": {status_text}" if status_text else ""))
                raise _failed("the remote agent's stream ended before its task did")
            finally:
                await _close(events)
                if not ended:
                    await _cancel(client, task_id, context_id, limits.cancel_timeout)
                await _close_client(client)
        except ProviderError:
            raise
        except RemoteAgentError as e:
            raise _failed(str(e), "limit") from e
        except (A2AClientError, httpx.HTTPError) as e:
            raise _failed(f"{type(e).__name__}: {e}", "connection") from e
        finally:
            with anyio.CancelScope(shield=True):
                await http.aclose()


@contextlib.contextmanager
def _within(deadline: float, what: str) -> Iterator[None]:
    """A wait under the exchange's deadline: ProviderError once it passed."""
    with anyio.CancelScope(deadline=deadline) as scope:
        yield
    if scope.cancelled_caught:
        raise _failed(f"{what} went past the exchange's deadline", "timeout")


async def _close(events: AsyncIterator[StreamResponse]) -> None:
    close = getattr(events, "aclose", None)
    if close is not None:
        with anyio.CancelScope(shield=True):
            await close()


async def _cancel(client: Any, task_id: str, context_id: str, seconds: float) -> None:
    """Cancel the remote task of an exchange that ended early (best effort, bounded):
    by its id, or the tasks of its context still going on when its id had not come."""
    # (suppressed: the remote may have ended it meanwhile, or not list tasks)
    with anyio.CancelScope(shield=True), anyio.move_on_after(seconds), contextlib.suppress(
        Exception
    ):
        ids = [task_id] if task_id else [
            t.id for t in (await client.list_tasks(ListTasksRequest(
                context_id=context_id))).tasks
            if t.status.state not in _TERMINAL
        ]
        for tid in ids:
            await client.cancel_task(CancelTaskRequest(id=tid))


async def _close_client(client: Any) -> None:
    with anyio.CancelScope(shield=True):
        await client.close()


def _ask_person(args: ToolCallArgs[None]) -> ToolCallResult[None]:
    if args.tool_name == DECISION_TOOL:
        return AskApproval(str(args.args.get("question", "The remote agent asks for input.")))
    return Continue()


def a2a_decision(task_id: str, context_id: str, question: str) -> str:
    """Answer a remote agent's question (a person decided: approved).

    Args:
        task_id: The remote task.
        context_id: The remote task's context.
        question: What the remote agent asked.
    """
    return "approved"


class RemoteAgents:
    """Remote A2A agents by name (`{"refunds": "https://..."}`): a stand-in `agent` for
    each, and the `resolver` of their model ids (see the module doc)."""

    def __init__(
        self,
        urls: Mapping[str, str],
        *,
        limits: RemoteLimits | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not urls:
            raise ValueError("name at least one remote agent")
        self._providers = {
            name: A2AProvider(url, limits=limits, transport=transport)
            for name, url in urls.items()
        }
        for name in self._providers:
            if not name or "/" in name:
                raise ValueError(f"a remote agent's name must be non-empty without '/', "
                                 f"got {name!r}")

    def agent(
        self,
        name: str,
        *,
        input_processors: Sequence[BaseProcessor[Any]] = (),
        output_processors: Sequence[BaseProcessor[Any]] = (),
    ) -> Agent:
        """The local agent standing in for remote agent `name`: its model is the remote
        agent; the remote's questions go to a person (`a2a_decision`); `input_processors`
        and `output_processors` are its own, as any agent's."""
        if name not in self._providers:
            raise KeyError(f"no remote agent {name!r}; the remote agents are "
                           f"{', '.join(sorted(self._providers))}")
        gate = processor(f"{ROUTE}-decision", process_tool_call=_ask_person)
        return Agent.create(
            f"{ROUTE}/{name}", name=name, tools=[a2a_decision],
            input_processors=[gate, *input_processors],
            output_processors=list(output_processors),
        )

    def provider(self, model_id: str) -> A2AProvider:
        """The provider of `a2a/<name>` (KeyError for a name not given)."""
        route, _, name = model_id.partition("/")
        if route != ROUTE or name not in self._providers:
            raise KeyError(f"{model_id!r} is not a remote agent of these")
        return self._providers[name]

    def resolver(
        self, fallback: Callable[[str], AsyncProvider] | None = None
    ) -> Callable[[str], AsyncProvider]:
        """A resolver for an interpreter: `a2a/<name>` ids to their providers, any
        other id to `fallback` (ValueError without one)."""

        def resolve(model_id: str) -> AsyncProvider:
            if model_id.startswith(f"{ROUTE}/"):
                return self.provider(model_id)
            if fallback is None:
                raise ValueError(f"no provider for {model_id!r}")
            return fallback(model_id)

        return resolve


__all__ = [
    "DECISION_TOOL", "ROUTE", "A2AProvider", "RemoteAgentError", "RemoteAgents",
    "RemoteLimits", "a2a_decision", "exchange_of",
]
