"""The studio's playground: chat with an agent from the page (`pipeline studio --agent`).

Each message runs the agent on the `AsyncInterpreter` (on the model `--model` names, a
scripted one say, or the agent's own provider) and streams the run as the AI SDK's UI
message stream (`pipeline.ui_stream`, as examples/asgi_stream.py serves it), with each
processor's decision as it happens in between: a transient `data-effect` part
(`{processor, hook, effect, detail}`). The run is recorded to the studio's directory
(`Recorder`), so it is in the runs list; its last part, `data-run`, names its journal.

A call that asks for approval suspends the run (its `tool-approval-request` part); the
suspension is kept in an in-memory `Approvals` store, and the developer's decision
(`decide`) resumes it: the rest streams the same way, and the resumed run's journal
says who decided (the playground's user, `studio`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import msgspec

from interpreters.aio import AsyncInterpreter
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.core.cancel import CancelSignal
from interpreters.observers.observe import RunInfo, RunObserver
from interpreters.providers.provider import AsyncProvider
from interpreters.record.journal import Recorder, effect_summary, journal_name
from pipeline.agent import Agent
from pipeline.approval import ApprovalAnswer, Resumption, UnknownRun, answered
from pipeline.protocol import EffectRecord
from pipeline.ui_stream import SSE_DONE, UIData, sse_frame, ui_message_sse_async
from pipeline.values.messages import MessageList, user
from pipeline.values.result import RunResult

USER = "studio"
"""The user (`resource_id`) of the playground's runs: who decides their approvals."""
MAX_CHATS = 100
"""Chats the playground remembers (their history, a run waiting for approval)."""
MAX_PROMPT = 32_000
"""Characters of one message at most."""
TIMEOUT = 300.0
"""Seconds a playground run may take at most."""


class PlayRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /api/play`: a message in a chat."""

    chat: str
    prompt: str


class DecideRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /api/play/decide`: the decisions for the chat's waiting run."""

    chat: str
    decisions: tuple[ApprovalAnswer, ...]


class _EffectTap(RunObserver):
    """Hands each processor decision to the stream as it happens."""

    sees_stream = False

    def __init__(self, pending: list[bytes]) -> None:
        self._pending = pending

    def effect(self, record: EffectRecord, at: float) -> None:
        e = record.effect
        inner = getattr(e, "effect", e)  # an `Out` carries the effect it wraps
        data = {"processor": record.processor_id, "hook": record.hook,
                "effect": type(inner).__name__, "detail": effect_summary(e)[:500]}
        self._pending.append(sse_frame(UIData("data-effect", data, transient=True)))


class _Tap:
    """An observer giving each run a `_EffectTap` onto one list of pending frames, and
    noting the run's id and the name of its journal."""

    def __init__(self) -> None:
        self.pending: list[bytes] = []
        self.run_id: str | None = None
        self.journal: str | None = None

    def start(self, run: RunInfo) -> RunObserver:
        self.run_id, self.journal = run.run_id, journal_name(run)
        return _EffectTap(self.pending)


class Playground:
    """Chats with one agent; thread-safe (the studio serves each request on a thread)."""

    def __init__(self, agent: Agent, *, model: AsyncProvider | None = None,
                 directory: Path | None = None, deps: object = None,
                 timeout: float = TIMEOUT) -> None:
        self.agent = agent
        self.model = model
        self.deps = deps
        self.timeout = timeout
        self.recorder = Recorder(directory) if directory is not None else None
        self.approvals = Approvals(MemoryApprovalStore())
        self._lock = threading.Lock()
        self._history: OrderedDict[str, MessageList] = OrderedDict()
        self._waiting: OrderedDict[str, str] = OrderedDict()  # chat -> suspended run id

    # --- what the page asks ---------------------------------------------------------------
    def chat(self, request: PlayRequest, write: Callable[[bytes], None]) -> None:
        """Run the agent on the chat's history and the new message, streaming to `write`."""
        if not request.prompt.strip() or len(request.prompt) > MAX_PROMPT:
            raise ValueError(f"a message is 1 to {MAX_PROMPT} characters")
        with self._lock:
            history = self._history.get(request.chat, MessageList.of([]))
            self._waiting.pop(request.chat, None)  # a new message: the waiting run is left
        messages = history.add([user(request.prompt)])
        anyio.run(self._stream, request.chat, messages, None, write)

    def resumption(self, request: DecideRequest) -> Resumption:
        """The chat's waiting run with the decisions (ApprovalError, nothing taken, when
        they fit no waiting call or leave one undecided)."""
        with self._lock:
            run_id = self._waiting.get(request.chat)
        if run_id is None:
            raise UnknownRun(f"no run waits for approval in chat {request.chat!r}")
        decisions = answered(self.approvals.waiting(run_id).pending, request.decisions,
                             by=USER)
        # Taken once: a second answer finds it resumed already (RunNotSuspended).
        return self.approvals.take(self.agent, run_id, decisions)

    def resume(self, chat: str, resumed: Resumption, write: Callable[[bytes], None]) -> None:
        """Go on with a taken resumption, streaming to `write`."""
        anyio.run(self._stream, chat, None, resumed, write)

    # --- a run ----------------------------------------------------------------------------
    async def _stream(self, chat: str, messages: MessageList | None,
                      resumed: Resumption | None, write: Callable[[bytes], None]) -> None:
        tap = _Tap()
        observers: Sequence[object] = (
            (self.recorder, tap) if self.recorder is not None else (tap,))
        resolver = None
        if self.model is not None:
            interp = AsyncInterpreter(self.model, observers=observers)  # type: ignore[arg-type]
        else:
            from interpreters.providers import AsyncResolver

            resolver = AsyncResolver()
            interp = AsyncInterpreter(resolve=resolver, observers=observers)  # type: ignore[arg-type]
        signal = CancelSignal()
        gone = False

        def send(frame: bytes) -> None:
            nonlocal gone
            if gone:
                return
            try:
                write(frame)
            except OSError:  # the page went away: stop the run
                gone = True
                signal.cancel("the studio page went away")

        try:
            stream = interp.stream(
                self.agent, messages if messages is not None else (), resume=resumed,
                thread_id=chat, resource_id=USER, deps=self.deps, signal=signal,
                timeout=self.timeout)
            async with stream:
                async for frame in ui_message_sse_async(stream):
                    for pending in _drain(tap.pending):
                        send(pending)
                    if frame != SSE_DONE:
                        send(frame)
            result = stream.result
            self._keep(chat, result)
            for pending in _drain(tap.pending):
                send(pending)
            outcome = {"status": result.status, "run_id": tap.run_id, "journal": tap.journal,
                       "waiting": [p.tool_call_id for p in result.suspension.pending]
                       if result.suspension is not None else []}
            send(sse_frame(UIData("data-run", outcome, transient=True)))
            send(SSE_DONE)
        finally:
            if resolver is not None:
                await resolver.aclose()

    def _keep(self, chat: str, result: RunResult[object]) -> None:
        self.approvals.keep(result)
        with self._lock:
            self._history[chat] = result.messages
            self._history.move_to_end(chat)
            if result.suspension is not None:
                self._waiting[chat] = result.suspension.run_id
                self._waiting.move_to_end(chat)
            # (else the chat's run, if one waited, stays named: answered again, it says
            # it was resumed already)
            for kept in (self._history, self._waiting):
                while len(kept) > MAX_CHATS:
                    kept.popitem(last=False)


def _drain(pending: list[bytes]) -> list[bytes]:
    out = pending[:]
    pending.clear()
    return out


__all__ = ["USER", "DecideRequest", "PlayRequest", "Playground"]
