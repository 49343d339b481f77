"""A child run: what the parent's tool step hands the interpreter, and what it leaves.

`ChildRun` is what a `ToolInvocation` of an agent tool carries: the child's agent, its
input, its context and, when the tree is resumed, its own resumption. The interpreter
starts the child's loop from it (observed like any run) and drives it through
`pipeline.loop.relay`, which keeps in the run's `ChildBox` what the child delivered (its
chunks, already through its own output processors) and the memory writes it asked to
commit (never committed by the child: the root commits the tree's writes together).
"""

from __future__ import annotations

from typing import Literal, Protocol

import msgspec

from effects import Write
from pipeline.agent import AgentTool
from pipeline.approval import Resumption
from pipeline.values.chunks import Chunk, DataChunk, TextDelta
from pipeline.values.context import RunContext
from pipeline.values.messages import JsonObject, Message, MessageList, TextPart, user
from pipeline.values.result import AgentNode, RunResult, Spending


class Uplink(Protocol):
    """The parent run of a child as the child reaches it (`pipeline.loop`'s `Level`): its
    stream processors, its budget, the tree above it. Made by the parent's loop."""

    @property
    def live(self) -> bool:
        """The child's text and data chunks reach the caller as they come (through the
        stream processors of every run above it), not when its call ends."""
        ...


class Spender(Protocol):
    """A child run while it runs, as its ancestors' budgets see it."""

    def spent(self) -> Spending:
        """What it and its descendants have paid for so far."""
        ...


class ChildBox:
    """What a child run left, filled by the relay as it runs (in-process only).

    (No `__slots__`: what most children never set stays a class default.)"""

    result: RunResult | None = None
    up: Uplink | None = None
    """Its parent run (None: an interpreter started it on its own)."""
    running: Spender | None = None
    """The child's run while it runs (its spending, for the budgets above it)."""
    open_text: str | None = None
    """The text block it streams live that is still open (`pipeline.loop.children`)."""
    for_root: bool = False
    """Every call from the root's down to it is a handoff: it answers for the root."""
    label: dict[str, object] | None = None
    """Who it is in its `data-agent` chunks (made at the first)."""
    watched: bool = False
    """Observers watch the child: the relay says which of its commands stand for which
    of the child's own (`origin`)."""
    origin: tuple[object, object | None] | None = None
    """The command the relay handed out last and the child's own it stands for (None:
    one the relay made, the child's observers do not see it)."""

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []
        """What the child published (its output processors passed on), when it did not
        go on as it came (`Uplink.live`)."""
        self.writes: list[tuple[str, Write]] = []
        """The writes its `CommitWrites` asked for (with who asked), held for the root."""
        self.text: list[str] = []
        """The text it streamed live (after its own output processors), its last step's
        (a step a processor discarded is not its answer)."""
        self.answer: list[str] = []
        """A live handoff's answer as its parent's stream processors passed it."""


class ChildRun(msgspec.Struct, frozen=True, kw_only=True):
    """A child run to carry out (`ToolInvocation.child`): start its agent's loop on
    `messages` with `context` (or `resume`), drive it through `pipeline.loop.relay`, and
    answer the call with its `RunResult`."""

    tool: AgentTool
    messages: MessageList
    context: RunContext
    path: tuple[str, ...]
    """The call that runs this child (`path[-1]`), as a path: nested pending calls and
    tree records extend it."""
    parent_run_id: str
    resume: Resumption | None = None
    box: ChildBox = msgspec.field(default_factory=ChildBox)
    kinds: tuple[Literal["tool", "handoff"], ...] = ()
    """The kind of each call of `path` (from the root's down): a chain of handoffs from
    the root answers for the root."""

    @property
    def kind(self) -> Literal["tool", "handoff"]:
        return self.tool.kind


def child_context(tool: AgentTool, parent: RunContext, tool_call_id: str) -> RunContext:
    """The child's context: its own run id (the parent's and the call's), the parent's
    resource, deps and values, and its own thread (the parent's and the tool's name)
    unless it asked for the parent's memory."""
    thread = parent.thread_id
    if tool.memory == "own" and thread is not None:
        thread = f"{thread}/{tool.name}"
    return RunContext(
        run_id=f"{parent.run_id}.{tool_call_id}", thread_id=thread,
        resource_id=parent.resource_id, values=parent.values, deps=parent.deps,
    )


def conversation_only(history: MessageList) -> MessageList:
    """A handoff's default input filter: the user's messages and the assistants' text,
    without tool calls, tool results or system messages (the new agent has its own)."""
    kept: list[Message] = []
    for m in history.messages:
        if m.role == "user":
            kept.append(m)
        elif m.role == "assistant":
            text = tuple(p for p in m.parts if type(p) is TextPart)
            if text:
                kept.append(msgspec.structs.replace(m, parts=text))
    return MessageList.of(kept)


def child_input(
    tool: AgentTool, args: JsonObject, history: MessageList, run_id: str, at: float
) -> MessageList:
    """What the child reads: a handoff, the parent's history through its filter; a
    tool, one user message (the `input` text, or the typed input as JSON)."""
    if tool.kind == "handoff":
        fil = tool.input_filter or conversation_only
        out = fil(history)
        if not isinstance(out, MessageList):
            raise TypeError(
                f"the input filter of {tool.name!r} returned a {type(out).__name__}, "
                "not a MessageList"
            )
        return out
    text = (
        msgspec.json.encode(args, order="sorted").decode() if tool.typed_input
        else str(args.get("input", ""))
    )
    return MessageList.of([user(text, id=f"{run_id}-input", created_at=at)])


def tool_value(result: RunResult) -> tuple[object, bool]:
    """The call's result from the child's: its typed output (as JSON data) or its text;
    an error result saying why for a child that did not finish."""
    if result.status == "finished":
        if result.output is not None:
            return msgspec.to_builtins(result.output), False
        return result.text, False
    why = (
        result.tripwire.reason if result.tripwire is not None
        else str(result.error) if result.error is not None else result.status
    )
    return f"agent run {result.status}: {why}", True


def node_of(child: ChildRun, result: RunResult) -> AgentNode:
    """The tree's record of a child run."""
    return AgentNode(
        tool_call_id=child.path[-1], tool_name=child.tool.name, agent=child.tool.agent.name,
        kind=child.kind, run_id=child.context.run_id, status=result.status,
        usage=result.total_usage, cost=result.cost, children=result.children,
    )


def _label(child: ChildRun) -> dict[str, object]:
    label = child.box.label
    if label is None:
        label = child.box.label = {
            "agent": child.tool.agent.name, "tool_call_id": child.path[-1],
            "path": list(child.path), "kind": child.kind,
        }
    return label


def delivered_text(chunks: list[Chunk]) -> str:
    """The text of a child's stream: its last step's (a discarded step's is not its
    answer)."""
    out: list[str] = []
    for c in chunks:
        t = type(c)
        if t is TextDelta:
            out.append(c.text)  # type: ignore[union-attr]
        elif t is DataChunk and c.name == _DISCARDED:  # type: ignore[union-attr]
            out.clear()
    return "".join(out)


def agent_chunk(child: ChildRun, result: RunResult, text: str) -> DataChunk:
    """The `data-agent` chunk a parent streams for a child run (transient: the call's
    result is what the history keeps): its agent, path and status, and the text it
    delivered when it finished (what its own output processors passed on)."""
    return DataChunk("data-agent", {
        **_label(child), "status": result.status,
        "text": text if result.status == "finished" else "",
    }, transient=True)


def agent_delta(child: ChildRun, text: str) -> DataChunk:
    """A piece of a child's text as the caller gets it while the child runs (after its
    own output processors and the stream processors of every run above it): a transient
    `data-agent` chunk with the text as `delta` and status "running"."""
    return DataChunk("data-agent", {**_label(child), "status": "running", "delta": text},
                     transient=True)


def agent_discarded(child: ChildRun) -> DataChunk:
    """What the caller gets when a child's step was discarded by one of its processors
    (a retry): the text it streamed of that step is not its answer."""
    return DataChunk("data-agent", {**_label(child), "status": "discarded"}, transient=True)


_DISCARDED = "data-step-discarded"
"""The data chunk a run streams when a processor discarded a step (`loop.messages`)."""
