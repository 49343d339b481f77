"""What one run holds, and what every hook phase does with a hook's outcome.

A run is two values: `RunConfig`, what is fixed when it starts (the agent, the hooks bound
per hook name, the context, clock, recorder, pricer, the stream plan), and `RunState`,
what changes while it runs (messages, processor states, steps, usage, retry counts,
pending chunks...). Each phase of a run is a function over the two (`(rc, st, ...)`), in
the module of its phase (the list in run.py). What the state keeps by identity (the
step's tools, the tool-call ids, what the stream hooks have seen, the results leaving the
run) is owned by a small object each, with its rules beside it, in this module: the
tool-call ids (`CallIds`), what the stream hooks have seen (`SeenChunks`, and the view
`stream_parts` is), what leaves the run (`LeavingResults`), and the messages the loop
makes (`loop_message`). One module, not one each: a run passes through all of them on
every step (docs/DESIGN.md, decisions made for speed).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from operator import attrgetter
from typing import NamedTuple, cast, overload

import msgspec

from effects import Abort, Write
from effects.commands import AwaitHook, Perform
from effects.started import Collect, Job
from pipeline.agent import Agent
from pipeline.agents import ChildBox, ChildRun
from pipeline.loop.hooks import Bound, HookFailure, HookFn, Outcome, Yielded
from pipeline.loop.judges import JudgeLedger
from pipeline.loop.partial import NOTHING
from pipeline.loop.response import StepContent
from pipeline.protocol.replies import EffectRecord, EffectRecorder
from pipeline.tools import StepTools
from pipeline.values.chunks import (
    Chunk,
    DataChunk,
    FinishReason,
    ToolCall,
    ToolCallDelta,
    ToolError,
    ToolResult,
    Tripwire,
    Usage,
)
from pipeline.values.context import RunContext
from pipeline.values.cost import Cost, Pricer
from pipeline.values.messages import (
    DataPart,
    JsonObject,
    Message,
    MessageList,
    Part,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from pipeline.values.pairing import PairedHistory
from pipeline.values.result import (
    AgentNode,
    Review,
    RunError,
    RunResult,
    Spending,
    StepResult,
)


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


class Ids(msgspec.Struct, gc=False, eq=False):
    """Deterministic ids for one run: `<run_id>-<kind><n>`. (This and the other small
    objects a run keeps across its waits hold no cycle: untracked by the collector, see
    docs/DESIGN.md, decisions made for speed.)"""

    _run: str
    _n: int = 0
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
    h_review: tuple[Bound, ...] = ()
    """The approval reviewers' `review_approval` hooks (`gate`), bound as
    process_tool_call hooks (the effects they may give are theirs)."""
    tool_rules: bool = False
    """Some tool of the agent (or one its processors declare) has a `needs_approval`
    rule: its calls go through the gate (`gate.gate_calls`) as with gates."""
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
        "reviews",
        "seen",
        "states",
        "steps",
        "tools",
        "tree",
        "unmetered",
        "usage",
        "usage_carried",
    )

    def __init__(
        self,
        ids: Ids,
        ml: MessageList,
        states: list[object],
        *,
        cost_known: bool,
        seen: SeenChunks,
        ids_used: AbstractSet[str],
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
        self.usage_carried: Usage | None = None
        """What of `usage` a resumed run carried over from its steps (the usage of the
        calls made is `usage` less it; None: nothing, a run not resumed). Not a second
        sum per call: a subtraction when asked for (`cost.spending`)."""
        self.carried = NOTHING_SPENT
        """What the run had paid for before its suspension (a resumed run)."""
        self.ml = ml
        # Each processor's state, by `Bound.slot`.
        self.states = states
        self.steps: tuple[StepResult, ...] = ()
        """The steps so far (a tuple, as hooks and the result see them: a run has few)."""
        self.usage = NO_USAGE
        self.retry_count = 0
        self.api_retry_count = 0
        self.finish_reason: FinishReason = "stop"
        self.pending: list[Chunk] = []
        """Chunks processed but not yet handed to the interpreter."""
        self.racing: tuple[Racing, ...] = ()
        """Concurrent input guards still running beside the first model call
        (`race`)."""
        # (the rarely used ones are tuples, not lists: fewer objects per waiting run for
        # the collector to walk)
        self.held: tuple[DataPart, ...] = ()
        """Non-transient data chunks hooks emitted outside a model response, not yet kept
        in a message: the next response message of the run takes them (`loop`'s step), or
        else the last one when the run ends (`keep_held`)."""
        self.held_calls: tuple[ToolCall | ToolCallDelta, ...] = ()
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
        """The tool-call ids the run's messages hold (`CallIds`)."""
        self.seen = seen
        """What each stream processor has seen (`SeenChunks`)."""
        self.leaving = LeavingResults()
        """The tool results a stream processor changed (`LeavingResults`)."""
        self.tree: TreeState | None = None
        """What the run's child runs left (children.py); None until one ran."""
        self.reviews: tuple[Review, ...] = ()
        """The approval reviewer's verdicts (`gate`)."""


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
            st.held += tuple(DataPart(c.name, c.data) for c in o.emit if not c.transient)
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


_call_id = attrgetter("tool_call_id")


def note_call_ids(
    st: RunState, before: MessageList, parts: Iterable[ToolCallPart | ToolResultPart]
) -> None:
    """`st.ml` is `before` plus messages with these tool parts."""
    st.call_ids.grew(before, st.ml, map(_call_id, parts))


def fresh_call_id(st: RunState, used: AbstractSet[str], content: StepContent | None) -> str:
    while True:
        fresh = st.ids.next("call")
        if fresh not in used and (content is None or fresh not in content.call_ids):
            return fresh


# --- tool-call ids -------------------------------------------------------------------------
# Tool-call ids unique across the whole run: the ids the run's messages hold (`CallIds`,
# `RunState.call_ids`), and fresh ones for a call whose id is taken.
#
# Results are matched to calls by id, and `pipeline.values.pairing.is_paired` wants each id once in
# a history. Models do not always oblige: some servers number calls `call_0` in every
# response, a continued conversation holds the ids of earlier runs, and a processor may
# forge a call with an id already in use. So a call whose id the conversation (or this
# response) already holds gets a fresh one, its deltas too.


class CallIds(msgspec.Struct, gc=False, eq=False):
    """The tool-call ids a message list holds, kept up to date while the run's messages
    grow by the loop's own additions: a long history is not scanned again every step.

    `of` is the list `used` was made for; another list is scanned again (`held_by`).
    """

    of: MessageList | None
    used: AbstractSet[str]
    """A set, or the shared empty frozenset until the first id (a run without tool calls
    keeps no set of its own across its waits)."""

    def held_by(self, ml: MessageList) -> AbstractSet[str]:
        """Every tool-call id `ml` holds (ids are unique run-wide: a model may reuse one of
        an earlier step)."""
        if self.of is not ml:
            self.of = ml
            self.used = tool_part_ids(ml)
        return self.used

    def grew(self, before: MessageList, after: MessageList, ids: Iterable[str]) -> None:
        """`after` is `before` plus messages whose tool parts have the ids `ids`."""
        if self.of is before:
            used = self.used
            if type(used) is set:
                used.update(ids)
            elif ids != ():  # (the loop's own step without a call gives `()`)
                grown = {*used, *ids}
                if grown:
                    self.used = grown
            self.of = after


NO_IDS: frozenset[str] = frozenset()
"""`CallIds.used` of a run whose input holds no tool call or result."""


def tool_part_ids(ml: MessageList) -> set[str]:
    """The ids of every tool call and tool result in `ml`."""
    return {
        p.tool_call_id
        for m in ml.messages
        for p in m.parts
        if isinstance(p, ToolCallPart | ToolResultPart)
    }


# --- what the stream hooks have seen -------------------------------------------------------
# `stream_parts` for a stream hook: an O(1) read-only view of what it has seen so far,
# and what each stream hook of a run has seen (`SeenChunks`).
#
# Made once per chunk per stream processor, so it must cost next to nothing: a long stream
# must not cost quadratic time (docs/DESIGN.md, Data).


class _Seen(msgspec.Struct, frozen=True, eq=False):
    """An immutable view of the first `n` chunks of an append-only list: O(1) to make.

    A Struct (made in C, about half the cost of a Python `__init__`, and it is made once
    per chunk per stream processor) registered as a `Sequence`; `view_of` is its typed
    constructor.
    """

    _items: list[Chunk]
    _n: int

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> Chunk: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Chunk]: ...
    def __getitem__(self, i: int | slice) -> Chunk | Sequence[Chunk]:
        if isinstance(i, slice):
            return tuple(self._items[: self._n][i])
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        return self._items[i]

    def __iter__(self) -> Iterator[Chunk]:
        items = self._items
        for k in range(self._n):
            yield items[k]

    def __reversed__(self) -> Iterator[Chunk]:
        items = self._items
        for k in range(self._n - 1, -1, -1):
            yield items[k]

    def __contains__(self, value: object) -> bool:
        return any(c is value or c == value for c in self)

    def index(self, value: object, start: int = 0, stop: int | None = None) -> int:
        seen = tuple(self._items[: self._n])
        return seen.index(value, start, len(seen) if stop is None else stop)

    def count(self, value: object) -> int:
        return tuple(self._items[: self._n]).count(value)

    def __repr__(self) -> str:
        return f"stream_parts({self._items[: self._n]!r})"


Sequence.register(_Seen)
view_of = cast(Callable[[list[Chunk], int], Sequence[Chunk]], _Seen)
"""`_Seen(items, n)`, typed as the Sequence it is."""


class SeenChunks(msgspec.Struct, gc=False, eq=False):
    """Every chunk each stream hook of a run has seen (its stream_parts), append-only.

    While every stream hook has seen the very same chunks (none was skipped, replaced or
    held back from a later one), they share one list (`shared`), so one view per chunk
    and, for equal states, one args value; the first divergence splits it (`unshare`)
    into a list per hook (`lists`). Views already handed out stay valid: nothing is ever
    removed from a list.
    """

    lists: list[list[Chunk]]
    shared: list[Chunk] | None

    @classmethod
    def fresh(cls, hooks: int, share: bool) -> SeenChunks:
        """Nothing seen yet by `hooks` stream hooks; `share`: in one list while they can."""
        return cls([[] for _ in range(hooks)] if hooks else _NO_HOOKS, [] if share else None)

    def of(self, i: int) -> list[Chunk]:
        """What stream hook `i` has seen."""
        return self.shared if self.shared is not None else self.lists[i]

    def unshare(self, upto: int, *, appended: bool) -> None:
        """Give each stream hook its own list of what it has seen, from the shared one.

        Hooks before `upto` have seen all of the shared list; when `appended`, the others
        have not seen its last chunk (skipped or replaced before it reached them).
        """
        shared = self.shared
        assert shared is not None
        lists: list[list[Chunk]] = []
        for k in range(len(self.lists)):
            full = k < upto or not appended
            if k == 0 and full:
                lists.append(shared)
            else:
                lists.append(shared[:] if full else shared[:-1])
        self.lists = lists
        self.shared = None

    def mark(self) -> SeenMark:
        """Where every hook is now (`rewind` goes back here)."""
        if self.shared is not None:
            return SeenMark(self.shared, len(self.shared), ())
        return SeenMark(None, 0, tuple((seen, len(seen)) for seen in self.lists))

    def rewind(self, mark: SeenMark) -> None:
        """Forget what the hooks saw after `mark` (an attempt the step dropped). New lists:
        views handed out stay valid."""
        if mark.shared is not None:
            self.shared = mark.shared[: mark.n]
            self.lists = [[] for _ in self.lists]
        else:
            self.shared = None
            self.lists = [seen[:n] for seen, n in mark.lists]


_NO_HOOKS: list[list[Chunk]] = []
"""`SeenChunks.lists` of a run without stream hooks, shared (`lists` itself is never
appended to, only the list of a hook in it): no list per run."""


class SeenMark(msgspec.Struct, frozen=True):
    """What `SeenChunks.mark` noted: the shared list and its length, or each list's."""

    shared: list[Chunk] | None
    n: int
    lists: tuple[tuple[list[Chunk], int], ...]


# --- what leaves the run -------------------------------------------------------------------
# Tool calls and results as they leave a run: what the stream processors made of each.
#
# The model reads a tool's result as the tool returned it, and a tool runs with the
# arguments the model gave it (unless a `process_tool_call` gate changed them); the caller
# and the run's messages and steps get each as the stream processors passed it on (a
# redaction, a replacement, an error for a result blocked). `LeavingResults`
# (`RunState.leaving`) keeps, by call id, each result (`approved`, as the results go
# through) and each call (`calls_changed`, as a response ends) a stream processor changed,
# and puts them in place in the run's messages at its end (`messages`).


class LeavingResults(msgspec.Struct, gc=False, eq=False):
    """The tool results stream processors changed, by call id (`changed`; None: none),
    and the tool calls (`calls`)."""

    changed: dict[str, ToolResultPart] | None = None
    calls: dict[str, ToolCallPart] | None = None

    def calls_changed(self, calls: dict[str, ToolCallPart]) -> None:
        """The calls of a response as the stream processors passed them on, by call id
        (those that leave the run other than the model made them)."""
        if self.calls is None:
            self.calls = dict(calls)
        else:
            self.calls.update(calls)

    def calls_out(self, calls: tuple[ToolCallPart, ...]) -> tuple[ToolCallPart, ...]:
        """`calls` as they leave the run (a step's `tool_calls`)."""
        leaving = self.calls
        if not leaving:
            return calls
        return tuple(leaving.get(c.tool_call_id, c) for c in calls)

    def approved(
        self,
        parts: tuple[ToolResultPart, ...],
        results: list[Chunk],
        passed: Sequence[Chunk],
        stopped: str | None = None,
    ) -> tuple[ToolResultPart, ...]:
        """The tool results `parts` as they leave the run: what the stream processors made
        of each result's chunk (`results`, the chunks made of `parts`; `passed`, what the
        processors passed on). A result whose chunk was dropped, not replaced, keeps its
        value: dropping hides it from the stream only. When the run `stopped` while they
        went through (a processor blocked, failed, a cancel), each result not passed on
        leaves as an error saying so (fail closed: no processor approved it; the history
        stays paired)."""
        if stopped is None and len(passed) >= len(results) and all(
            c is r for c, r in zip(passed, results, strict=False)
        ):
            return parts  # every chunk passed as it was (the common case): nothing changed
        out_of: dict[str, ToolResult | ToolError] = {}
        for c in passed:
            if isinstance(c, ToolResult | ToolError) and c.tool_call_id not in out_of:
                out_of[c.tool_call_id] = c
        approved: list[ToolResultPart] = []
        for p, r in zip(parts, results, strict=True):
            got = out_of.get(p.tool_call_id)
            if got is r or (got is None and stopped is None):
                approved.append(p)
                continue
            if got is None:
                assert stopped is not None
                new = ToolResultPart(p.tool_call_id, p.tool_name, stopped, True)
            elif isinstance(got, ToolError):
                new = ToolResultPart(p.tool_call_id, p.tool_name, got.error, True)
            else:
                new = ToolResultPart(p.tool_call_id, p.tool_name, got.result, False)
            if self.changed is None:
                self.changed = {}
            self.changed[p.tool_call_id] = new
            approved.append(new)
        return tuple(approved)

    def messages(self, ml: MessageList, before_result: MessageList | None) -> MessageList:
        """The run's messages `ml` as they leave it: each tool result and call a stream
        processor changed as it changed it, in the messages this run added, by call id
        (an input processor may have rebuilt the history the model reads from the tool's
        own value). A part an output result processor changed (`before_result`: the
        messages it got) is kept as it made it."""
        leaving, calls = self.changed or {}, self.calls or {}
        if not leaving and not calls:
            return ml
        ours: set[int] | None = None
        if before_result is not None and before_result is not ml:
            ours = {id(p) for m in before_result.messages if m.role in ("tool", "assistant")
                    for p in m.parts}

        def part(p: Part) -> Part:
            t = type(p)
            if (t is not ToolResultPart and t is not ToolCallPart) or (
                ours is not None and id(p) not in ours
            ):
                return p
            if t is ToolCallPart:
                assert isinstance(p, ToolCallPart)
                return calls.get(p.tool_call_id, p)
            assert isinstance(p, ToolResultPart)
            return leaving.get(p.tool_call_id, p)

        def swap(m: Message) -> Message:
            if m.role != "tool" and m.role != "assistant":
                return m
            parts = tuple(part(p) for p in m.parts)
            return m.with_parts(parts) if any(
                a is not b for a, b in zip(parts, m.parts, strict=True)) else m

        return MessageList(
            tuple(swap(m) if s == "response" else m
                  for m, s in zip(ml.messages, ml.sources, strict=True)),
            ml.sources, ml.system,
        )


# --- the messages the loop makes -----------------------------------------------------------
# The messages the loop itself makes, made in one place.
#
# Every message the loop adds to a run (the model's response, a partial response kept
# from a broken stream, a step's tool results, the feedback that sends a discarded reply
# back to the model, the held data of a run without an answer) carries the run's ids, its
# clock and the thread and resource of its context. `loop_message` is that constructor;
# `discarded` is the transient chunk that tells the caller a step was discarded, and
# `keep_held` places the data hooks emitted outside a response.


def loop_message(
    rc: RunConfig,
    st: RunState,
    role: Role,
    parts: Sequence[Part],
    *,
    incomplete: bool = False,
    kind: str = "msg",
    metadata: JsonObject | None = None,
) -> Message:
    """A message of this run: a fresh id of `kind`, the run's clock now, its context's
    thread and resource."""
    ctx = rc.ctx
    return Message(
        id=st.ids.next(kind),
        role=role,
        parts=tuple(parts),
        created_at=rc.clock(),
        thread_id=ctx.thread_id,
        resource_id=ctx.resource_id,
        incomplete=incomplete,
        metadata=metadata,
    )


def feedback(rc: RunConfig, st: RunState, reason: str, by: str) -> Message:
    """The user message that sends a discarded reply's `reason` back to the model (`by`:
    who discarded it), numbered with the run's retry count."""
    return loop_message(
        rc, st, "user", (TextPart(reason),), kind="feedback",
        metadata={"feedback_from": by, "retry": st.retry_count},
    )


def discarded(step: int, by: str, reason: str, retry_count: int) -> DataChunk:
    """What the caller is streamed when a step's reply is discarded for a retry."""
    return DataChunk("data-step-discarded", {
        "step_number": step,
        "processor_id": by,
        "reason": reason,
        "retry_count": retry_count,
    }, transient=True)


def keep_held(rc: RunConfig, st: RunState) -> None:
    """At the end of a run: held data goes into the run's last answer (an assistant
    message it added), or into an assistant message of its own if there is none."""
    held, st.held = st.held, ()
    if not held:
        return
    ml = st.ml
    msgs = ml.messages
    for i in range(len(msgs) - 1, -1, -1):
        if ml.sources[i] == "response" and msgs[i].role == "assistant":
            kept = msgs[i].with_parts((*msgs[i].parts, *held))
            st.ml = MessageList((*msgs[:i], kept, *msgs[i + 1 :]), ml.sources, ml.system)
            return
    st.ml = ml.add(loop_message(rc, st, "assistant", held), "response")


def unforged(st: RunState, kept: Message) -> Message:
    """The response as a processor replaced it, with a fresh id for each tool call whose
    id another message (or an earlier call of it) already has, so results pair."""
    others = {
        p.tool_call_id
        for m in st.ml.messages
        if m.id != kept.id
        for p in m.parts
        if isinstance(p, ToolCallPart | ToolResultPart)
    }
    parts = list(kept.parts)
    changed = False
    for i, p in enumerate(parts):
        if isinstance(p, ToolCallPart):
            if p.tool_call_id in others:
                p = msgspec.structs.replace(p, tool_call_id=fresh_call_id(st, others, None))
                parts[i] = p
                changed = True
            others.add(p.tool_call_id)
    if not changed:
        return kept
    fixed = kept.with_parts(parts)
    st.ml = st.ml.replace_messages(fixed if m.id == kept.id else m for m in st.ml.messages)
    return fixed
