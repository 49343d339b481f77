"""What one run holds, and what every hook phase does with a hook's outcome.

A run is two values: `RunConfig`, what is fixed when it starts (the agent, the hooks bound
per hook name, the context, clock, recorder, pricer, the stream plan), and `RunState`,
what changes while it runs (messages, processor states, steps, usage, retry counts,
pending chunks...). Each phase of a run is a function over the two (`(rc, st, ...)`), in
the module of its phase (the list in loop.py). What the state keeps by identity (the
step's tools, the tool-call ids, what the stream hooks have seen, the results leaving the
run) is owned by a small object each, with its rules beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from operator import attrgetter
from typing import NamedTuple, cast

import msgspec

from effects import Abort, Write
from effects.commands import AwaitHook, Perform
from effects.started import Collect, Job
from pipeline.agent import Agent
from pipeline.agents import ChildBox, ChildRun
from pipeline.loop.call_ids import CallIds
from pipeline.loop.hooks import Bound, HookFailure, HookFn, Outcome, Yielded
from pipeline.loop.judges import JudgeLedger
from pipeline.loop.leaving import LeavingResults
from pipeline.loop.partial import NOTHING
from pipeline.loop.response import StepContent
from pipeline.loop.stream_view import SeenChunks
from pipeline.protocol.replies import EffectRecord, EffectRecorder
from pipeline.tools import StepTools
from pipeline.values.chunks import (
    Chunk,
    DataChunk,
    FinishReason,
    ToolCall,
    ToolCallDelta,
    Tripwire,
    Usage,
)
from pipeline.values.context import RunContext
from pipeline.values.cost import Cost, Pricer
from pipeline.values.messages import DataPart, MessageList, ToolCallPart, ToolResultPart
from pipeline.values.pairing import PairedHistory
from pipeline.values.result import AgentNode, RunError, RunResult, Spending, StepResult


class Racing(NamedTuple):
    """A racing guard parked at its first wait: the hook's call (`call_hook`), and what it
    waits for: a command to yield as is (`waiting`), or the job its request was started
    as (`job`: the answer goes to the hook as that request's)."""

    bound: Bound
    call: Generator[Yielded, object, Outcome]
    waiting: Perform[object] | AwaitHook | None
    job: Job[object] | None

    def ticket(self) -> int | None:
        """The started job whose readiness says the guard can go on, if one."""
        if self.job is not None:
            return self.job.ticket
        w = self.waiting
        if type(w) is Perform and type(w.request) is Collect:
            return w.request.job.ticket
        return None


class Ids:
    """Deterministic ids for one run: `<run_id>-<kind><n>`."""

    __slots__ = ("_n", "_run")

    def __init__(self, run_id: str, used: int = 0) -> None:
        self._run = run_id
        self._n = used
        """How many ids were made (a resumed run goes on from its suspension's)."""

    @property
    def used(self) -> int:
        return self._n

    def next(self, kind: str) -> str:
        self._n += 1
        return f"{self._run}-{kind}{self._n}"


class Tripped(Exception):
    """Raised inside the loop when a processor aborts: the run ends "tripped"."""

    def __init__(self, tripwire: Tripwire) -> None:
        self.tripwire = tripwire


class Failed(Exception):
    """Raised inside the loop when the run fails (`error` says how): it ends "failed"."""

    def __init__(self, error: RunError) -> None:
        self.error = error


class RunConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What is fixed for the whole of one run (made by `loop.agent_loop`)."""

    agent: Agent
    ctx: RunContext
    clock: Callable[[], float]
    record: EffectRecorder | None
    price: Pricer | None
    h_input: tuple[Bound, ...] = ()
    h_input_step: tuple[Bound, ...] = ()
    """process_input_step hooks, then prepare_step (if any) last."""
    h_error: tuple[Bound, ...] = ()
    h_stream: tuple[Bound, ...] = ()
    h_output_step: tuple[Bound, ...] = ()
    h_result: tuple[Bound, ...] = ()
    h_flush: tuple[tuple[Bound, int], ...] = ()
    """Each `flush_output_stream` hook, with the index in `h_stream` from which what it
    releases goes on (the stream hooks of the processors after it)."""
    stream_io: bool = False
    """Some stream hook is async or asks for I/O: chunks go through `process_chunk_io`."""
    stream_plan: tuple[tuple[Bound, HookFn, int, bool], ...] = ()
    """What the per-chunk hot path needs of each stream hook, unpacked once."""
    data_all: bool = True
    """Every stream hook sees data chunks."""
    data_any: bool = False
    """Some stream hook sees data chunks."""
    h_tool_call: tuple[Bound, ...] = ()
    """process_tool_call hooks, across all the agent's processors in list order."""
    h_tool_result: tuple[Bound, ...] = ()
    bare_stream: bool = False
    """No stream hook at all: the chunks the loop makes itself go out as they are."""
    h_approved: tuple[Bound, ...] = ()
    """process_approved hooks, of every processor (output.approved)."""
    started_at: float = 0.0
    """When the run began, on its clock (a resumed run: when the run it resumes began);
    read only by a run with process_approved hooks (`ApprovedArgs.started_at`)."""
    children: bool = False
    """Some tool of the agent's runs an agent (`AgentTool`): the tool step looks for
    child runs (`children.py`); a run without one never does."""
    child: ChildRun | None = None
    """A child run's own `ChildRun` (its path in the tree; its parent as it reaches it,
    `ChildBox.up`: `children.py`); None for a root run."""


NO_USAGE = Usage()
NOTHING_SPENT = Spending()
"""(frozen values: every run starts from these same ones)"""


class RunState:
    """What changes during one run. A slots class: the hot paths read it per chunk."""

    __slots__ = (
        "api_retry_count",
        "call_ids",
        "carried",
        "cost",
        "cost_known",
        "finish_reason",
        "held",
        "held_calls",
        "ids",
        "judges",
        "leaving",
        "ml",
        "model_calls",
        "output",
        "pairing",
        "partial",
        "pending",
        "racing",
        "retry_count",
        "seen",
        "states",
        "steps",
        "steps_t",
        "tools",
        "tree",
        "unmetered",
        "usage",
        "usage_paid",
    )

    def __init__(
        self,
        ids: Ids,
        ml: MessageList,
        states: list[object],
        *,
        cost_known: bool,
        seen: SeenChunks,
        ids_used: set[str],
        judges: JudgeLedger | None = None,
    ) -> None:
        self.ids = ids
        self.judges = judges
        """The model calls hooks asked for (`judges`); None: no hook can ask."""
        self.unmetered = 0
        """Model calls made whose usage the provider never reported (stopped early)."""
        self.model_calls = 0
        """Model calls of the agent's made (answered with a stream), retried or
        discarded ones too."""
        self.usage_paid = NO_USAGE
        """Their usage (`usage` less what a resumed run carried over from its steps)."""
        self.carried = NOTHING_SPENT
        """What the run had paid for before its suspension (a resumed run)."""
        self.ml = ml
        # Each processor's state, by `Bound.slot`.
        self.states = states
        self.steps: list[StepResult] = []
        self.steps_t: tuple[StepResult, ...] = ()
        self.usage = NO_USAGE
        self.retry_count = 0
        self.api_retry_count = 0
        self.finish_reason: FinishReason = "stop"
        self.pending: list[Chunk] = []
        self.racing: tuple[Racing, ...] = ()
        """Concurrent input guards still running beside the first model call
        (`race`)."""
        """Chunks processed but not yet handed to the interpreter."""
        self.held: list[DataPart] = []
        """Non-transient data chunks hooks emitted outside a model response, not yet kept
        in a message: the next response message of the run takes them (`loop`'s step), or
        else the last one when the run ends (`messages.keep_held`)."""
        self.held_calls: list[ToolCall | ToolCallDelta] = []
        """Tool-call chunks of the response held back until the gates decided
        (`gate`)."""
        self.output: object = None
        self.partial: object = NOTHING
        """The last typed partial output sent (`loop.partial`; NOTHING: none yet)."""
        self.cost: Cost | None = None
        self.cost_known = cost_known
        self.pairing = PairedHistory()
        # Caches by identity, each owned by a small object: kept while what they were
        # made from is the same object.
        self.tools = StepTools()
        """The step's tools' specs and the tools by name (tools.py)."""
        self.call_ids = CallIds(ml, ids_used)
        """The tool-call ids the run's messages hold (call_ids.py)."""
        self.seen = seen
        """What each stream processor has seen (stream_view.py)."""
        self.leaving = LeavingResults()
        """The tool results a stream processor changed (leaving.py)."""
        self.tree: TreeState | None = None
        """What the run's child runs left (children.py); None until one ran."""


class StreamLock:
    """Whose chunks go through a tree's stream processors now (one lock per tree): while
    a child's text block is open there, every other child's chunks wait, so a processor
    that holds text back (a PII guard) holds one child's text whole, never a mix of
    children's (`children.py`)."""

    __slots__ = ("failures", "owner", "waiting")

    def __init__(self) -> None:
        self.failures = 0
        """How many runs of the tree a stream processor stopped (`Level.failed`)."""
        self.owner: ChildBox | None = None
        self.waiting: list[tuple[ChildRun, Level, Chunk]] = []
        """Chunks of children that came while another owned the lock, in order."""


class Level:
    """A run as its child runs reach it (`ChildBox.up`): its configuration and state
    (whose stream processors a child's chunks pass through, whose budget bounds the
    children), and the run above it."""

    __slots__ = ("bare", "bounds", "failed", "kinds", "live", "lock", "path", "rc", "st",
                 "tree_bounds", "up")

    def __init__(self, rc: RunConfig, st: RunState) -> None:
        child = rc.child
        up = cast("Level | None", child.box.up) if child is not None else None
        self.path: tuple[str, ...] = child.path if child is not None else ()
        """The run's place in the tree: the calls from the root's down (empty: the root)."""
        self.kinds = child.kinds if child is not None else ()
        self.rc = rc
        self.st = st
        self.up = up
        self.live: bool = not rc.stream_io and (up is None or up.live)
        """Its children's chunks reach the caller as they come: its stream processors
        are plain functions (none awaits or asks for I/O), and so are those above."""
        self.bare: bool = not rc.h_stream and (up is None or up.bare)
        """No stream processor here or above: a child's chunks need no lock, only their
        form for the caller."""
        self.lock: StreamLock = up.lock if up is not None else StreamLock()
        self.failed: Tripped | HookFailure | None = None
        """One of its stream processors stopped it on a child's chunk: its children
        stop, and the run ends so once its tool step is back (`fold_children`)."""
        self.bounds = tuple(b for b in rc.h_input_step if b.processor.bounds_descendants)
        """Its processors that bound its descendants too (`Budget`)."""
        self.tree_bounds: bool = bool(self.bounds) or (up is not None and up.tree_bounds)

    def stopped(self) -> bool:
        """It or a run above it was stopped by a stream processor."""
        level: Level | None = self
        while level is not None:
            if level.failed is not None:
                return True
            level = level.up
        return False


class TreeState:
    """What a run's child runs left it: their writes (committed with the run's own, by
    the root), their records, what they used and cost, and a handoff's answer."""

    __slots__ = ("answer", "answer_text", "answered_by", "cost", "cost_known", "kept_chunks",
                 "level",
                 "nodes", "running", "spent", "usage", "writes")

    def __init__(self) -> None:
        self.level: Level | None = None
        """The run as its children reach it, made at its first child."""
        self.running: list[ChildBox] = []
        """The children of the step now running (their spending counts for budgets)."""
        self.writes: list[tuple[str, Write]] = []
        self.nodes: list[AgentNode] = []
        self.usage = Usage()
        self.spent = Spending()
        self.cost: Cost | None = None
        self.cost_known = True
        self.answer: RunResult | None = None
        """The answer of the handoff of this step, once it finished."""
        self.answered_by: str | None = None
        self.answer_text: list[str] | None = None
        """The handoff's answer as this run's stream processors passed it, when it
        reached the caller as it came (then it is not streamed again)."""
        self.kept_chunks: dict[str, tuple[DataChunk, ...]] = {}
        """A resumed step's children that had finished: their chunks, by call id, streamed
        when the step's results are."""

    def add(self, node: AgentNode, spent: Spending) -> None:
        self.nodes.append(node)
        self.usage = self.usage + node.usage
        self.spent = self.spent + spent
        if node.cost is None:
            self.cost_known = False
        else:
            self.cost = node.cost if self.cost is None else self.cost + node.cost


def apply(rc: RunConfig, st: RunState, b: Bound, o: Outcome, *, keep: bool = True) -> object:
    """Keep state and emits of a hook outcome; return its effect (tripwire on Abort).

    Emits are streamed; unless `keep` is False (the caller keeps them itself), the
    non-transient ones are held to be kept in the run's messages."""
    if o.changed_state:
        st.states[b.slot] = o.state
    if o.emit:
        st.pending.extend(o.emit)
        if keep:
            st.held.extend(DataPart(c.name, c.data) for c in o.emit if not c.transient)
    effect = o.effect
    if isinstance(effect, Abort) and not effect.reason:
        effect = msgspec.structs.replace(
            effect, reason=f"Tripwire triggered by {b.processor_id}"
        )
    if rc.record is not None:
        rc.record(EffectRecord(b.processor_id, b.hook, effect))
    return effect


def trip(b: Bound, a: Abort) -> Tripped:
    return Tripped(Tripwire(a.reason, a.retry, b.processor_id, a.metadata))


def steps_tuple(st: RunState) -> tuple[StepResult, ...]:
    """The steps so far as the tuple hooks see: made once per step, not once per hook."""
    if len(st.steps_t) != len(st.steps):
        st.steps_t = tuple(st.steps)
    return st.steps_t


_call_id = attrgetter("tool_call_id")


def note_call_ids(
    st: RunState, before: MessageList, parts: Iterable[ToolCallPart | ToolResultPart]
) -> None:
    """`st.ml` is `before` plus messages with these tool parts."""
    st.call_ids.grew(before, st.ml, map(_call_id, parts))


def fresh_call_id(st: RunState, used: set[str], content: StepContent | None) -> str:
    while True:
        fresh = st.ids.next("call")
        if fresh not in used and (content is None or fresh not in content.call_ids):
            return fresh
