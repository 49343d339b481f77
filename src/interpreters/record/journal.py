"""Record a run to an NDJSON journal, and replay it offline.

A run is a pure function of its input and of what the interpreter fed the loop: model
events, tool outcomes, judge (and other I/O) answers, clock readings, and where it was
cancelled; and, for readers such as `pipeline studio`, each processor decision
(`EffectSeen`, which a replay ignores and computes again). `Recorder` (an observer, so
it works under every interpreter) writes exactly that, one msgspec-encoded JSON line per
entry, as the run goes:

    interp = SyncInterpreter(resolve=Resolver(), observers=[Recorder("journals/")])
    ...                                       # journals/<run_id>.ndjson, line by line
    run = Simulator.replay(Journal.read("journals/abc.ndjson"), agent)
    assert run.identical                      # same result, same trace, no model, no network

Replay (`interpreters.record.replay`: `replay_sync`, `replay_async`) drives the loop with the
recorded replies. The agent's processors run again, so a replay against a changed agent
(a new processor, say) runs the new processors on the recorded model output;
`divergence` says at which command the run first went another way. Each command is
recorded as a digest of its content (the request sent, the chunks published...), never
the request itself.

A tree of runs (agents calling agents, `docs/agents.md`) is one journal: each child
run's entries are recorded in its root's, each under its path (`InRun`: the tool-call
ids from the root's call down), and a replay runs the tree again, each child on its own
entries, against the tree's agents as they are now (`Divergence.path` names the run
that went another way first).

What a journal holds: the run's input, the model's output, tool results and judge
answers. Tool results and the answers of custom I/O handlers are recorded as JSON (a
value JSON cannot encode, as its repr), so a replay sees them as JSON values. It never
holds an API key: keys are not part of anything recorded, and the values of `*_API_KEY`
environment variables and the `secrets` you give are scrubbed in every encoded form and
across streamed deltas (`interpreters.record.scrub`). By default it stores what the
agent's PII guards let out (`pii="agent"`); `Recorder(pii="keep")` stores personal data
as the run saw it. A directory of journals is pruned as runs start: journals older than
`max_age_days` (30) go, then the oldest until the rest fit in `max_total_bytes` (1 GiB).
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Literal, cast

import msgspec

from effects import (
    Abort,
    AwaitHook,
    CallModel,
    Emit,
    Out,
    Perform,
    Publish,
    Pull,
    Replace,
    Retry,
    RunTools,
)
from interpreters.approvals.writes import StoredWrite, without_writes
from interpreters.core.trace import comparable_command
from interpreters.observers.observe import RunInfo, RunObserver, describe
from interpreters.providers.provider import ProviderError
from interpreters.record.scrub import (
    DeltaScrubber,
    LineScrubber,
    PIIRedactor,
    Redactor,
    SecretRedactor,
    apply,
    merged,
)
from pipeline.agent import Agent
from pipeline.approval import Resumption
from pipeline.processor import ModelAnswer
from pipeline.protocol import (
    EffectRecord,
    LoopCommand,
    ModelReply,
    RunCancelled,
    ToolInvocation,
    ToolOutcome,
)
from pipeline.tools.context import ToolContext, ToolWriter
from pipeline.values.bounds import MAX_JSON_DEPTH, json_too_deep
from pipeline.values.chunks import DataChunk, ReasoningDelta, TextDelta, ToolCallDelta
from pipeline.values.cost import Cost, PriceQuery
from pipeline.values.messages import JsonObject, MessageList
from pipeline.values.model import ApiError
from pipeline.values.result import RunResult

VERSION = 1

PIIHandling = Literal["keep", "agent"]
"""What a `Recorder` does with personal data: "agent" (the default) stores what the
agent's PII guards (its `PIIDetector`s) would let out, "keep" stores it as the run saw it."""

MAX_AGE_DAYS = 30.0
"""How long a `Recorder` keeps a journal in its directory by default (days)."""
MAX_TOTAL_BYTES = 1 << 30
"""What a `Recorder`'s directory of journals holds at most by default (bytes)."""
PRUNE_EVERY = 100
"""A `Recorder` prunes its directory when made and then every this many runs."""


class AgentInfo(msgspec.Struct, frozen=True):
    """What the recorded run's agent was (for reading a journal; replay needs the agent)."""

    name: str
    model: str
    processors: tuple[str, ...]
    tools: tuple[str, ...]


class RunStarted(msgspec.Struct, frozen=True, tag="run", tag_field="t"):
    version: int
    run_id: str
    thread_id: str | None
    resource_id: str | None
    values: JsonObject | None
    messages: MessageList
    agent: AgentInfo
    at: float
    resume: Resumption | None = None
    """What a resumed run went on from: its suspension and the decisions (processor
    states as JSON, a value JSON cannot encode as its repr)."""
    resume_writes: tuple[StoredWrite, ...] = ()
    """The memory writes finished child runs left in `resume`'s suspension, with their
    classes (`interpreters.approvals.writes`): read back typed."""


class ClockRead(msgspec.Struct, frozen=True, tag="clock", tag_field="t"):
    value: float


class FieldSeen(msgspec.Struct, frozen=True, array_like=True):
    """One field of a command: its path (`publish[0].text`), a digest of its value and
    the start of it (at most `PREVIEW` characters of its JSON), to say how a replay's
    command differs."""

    path: str
    digest: str
    value: str


class CommandSeen(msgspec.Struct, frozen=True, tag="cmd", tag_field="t"):
    """A command the loop yielded: its kind, a short description, a digest of its content
    and of each of its fields (down to `FIELD_DEPTH` levels, at most `MAX_FIELDS`)."""

    kind: str
    what: str
    digest: str
    at: float
    fields: tuple[FieldSeen, ...] = ()


class ModelReplied(msgspec.Struct, frozen=True, tag="model", tag_field="t"):
    """A reply to CallModel (`first`) or Pull."""

    event: ModelReply
    first: bool = False


class ToolsDone(msgspec.Struct, frozen=True, tag="tools", tag_field="t"):
    outcomes: tuple[ToolOutcome, ...]
    written: tuple[tuple[str, tuple[DataChunk, ...]], ...] = ()
    """The data chunks each call (by id) wrote through its context's writer."""
    children: tuple[str, ...] = ()
    """The calls (by id) that ran child runs: their outcomes here are empty (their
    results are their runs', recorded under their paths: `InRun`)."""


def written_by(
    cmd: RunTools[ToolInvocation, ToolOutcome],
) -> tuple[tuple[str, tuple[DataChunk, ...]], ...]:
    """The data chunks each call of `cmd` (by id) wrote through its context's writer."""
    return tuple((cid, w.written) for cid, w in tool_writers(cmd) if w.written)


def tool_writers(cmd: RunTools[ToolInvocation, ToolOutcome]) -> list[tuple[str, ToolWriter]]:
    """The writer of each call of `cmd` whose tool takes a context, by call id."""
    out: list[tuple[str, ToolWriter]] = []
    for inv in cmd.calls:
        param = inv.tool.context_param if inv.tool is not None else None
        ctx = inv.kwargs.get(param) if param is not None and inv.kwargs is not None else None
        if isinstance(ctx, ToolContext):
            out.append((inv.call.tool_call_id, ctx.writer))
    return out


class Answered(msgspec.Struct, frozen=True, tag="answer", tag_field="t"):
    """The reply to a processor's I/O request (`Perform`): a judge's answer, or another."""

    answer: ModelAnswer | None = None
    value: object = None


class Raised(msgspec.Struct, frozen=True, tag="error", tag_field="t"):
    """Carrying out a command failed; the exception was thrown into the loop."""

    error_type: str
    message: str
    api_error: ApiError | None = None


class CancelledAt(msgspec.Struct, frozen=True, tag="cancel", tag_field="t"):
    reason: str
    done: tuple[ToolOutcome, ...] = ()
    """Cancelled at a RunTools: the outcomes of the calls that had finished (kept; a
    child run's empty, as in `ToolsDone`)."""
    written: tuple[tuple[str, tuple[DataChunk, ...]], ...] = ()
    """Cancelled at a RunTools: the data chunks each call (by id) had written."""


class Priced(msgspec.Struct, frozen=True, tag="price", tag_field="t"):
    """What the run's pricer said a model call cost (None: no price known)."""

    cost: Cost | None


class EffectSeen(msgspec.Struct, frozen=True, tag="effect", tag_field="t"):
    """What a processor hook returned: the effect's kind (`Continue`, `Replace`, `Skip`,
    `Abort`, `Retry`, `Emit`) and what it carries, named, never the content itself (an
    abort's reason is kept, scrubbed as any line). For a journal's readers (`pipeline
    studio`); a replay computes the effects again."""

    processor_id: str
    hook: str
    effect: str
    detail: str = ""
    at: float = 0.0


def effect_summary(effect: object) -> str:
    """What an effect carries, in a few words (a tuple of chunks: how many, and which)."""
    if isinstance(effect, Out):
        inner = effect_summary(effect.effect)
        return f"{inner}; emits {len(effect.emit)}" if effect.emit else inner
    if isinstance(effect, Abort):
        return ("retry: " if effect.retry else "") + effect.reason
    if isinstance(effect, Replace):
        value = effect.value
        if isinstance(value, tuple):
            return ("held (no chunk)" if not value else
                    f"{len(value)} chunk(s): " + ", ".join(type(v).__name__ for v in value[:8]))
        return type(value).__name__
    if isinstance(effect, Retry):
        return "with new messages" if effect.value is not None else ""
    if isinstance(effect, Emit):
        return f"{len(effect.chunks)} data chunk(s)"
    return ""


class RunEnded(msgspec.Struct, frozen=True, tag="end", tag_field="t"):
    """The run's end: its status and a digest of its result (None: closed unfinished)."""

    status: str | None
    digest: str | None
    at: float


class InRun(msgspec.Struct, frozen=True, tag="in", tag_field="t"):
    """An entry of a child run, in its root's journal: the run's path (the tool-call ids
    from the root's call down to the call that ran it) and the entry."""

    path: tuple[str, ...]
    entry: Entry


Entry = (
    RunStarted | ClockRead | CommandSeen | ModelReplied | ToolsDone | Answered | Raised
    | CancelledAt | Priced | EffectSeen | RunEnded | InRun
)


class Scored(msgspec.Struct, frozen=True, tag="score", tag_field="t"):
    """A scorer's verdict on the run (`interpreters.evals.OnlineScorer`), added after the
    run ended (`Recorder.annotate`). Not an entry of the run: `Journal.scores` holds
    them, and a replay or a reader of `entries` never sees them."""

    scorer: str
    verdict: str
    """"pass", "fail" or "could-not-judge"."""
    value: float | None = None
    label: str | None = None
    reason: str = ""
    at: float = 0.0

MAX_JOURNAL_BYTES = 256 * 1024 * 1024
"""The largest journal file `Journal.read` reads (`max_bytes=` to change it)."""
MAX_ENTRY_DEPTH = MAX_JSON_DEPTH + 16
"""How deeply one journal line may nest: a value's bound (`MAX_JSON_DEPTH`) and room for
the entry around it (a tool result in the history of a resumed run's suspension).
Deeper is refused before decoding, which would otherwise overflow the stack."""

_encoder = msgspec.json.Encoder(enc_hook=repr)
_decoder: msgspec.json.Decoder[Entry | Scored] = msgspec.json.Decoder(Entry | Scored)


class JournalError(ValueError):
    """A journal that cannot be read: not NDJSON of this format, or no run header."""


class Journal:
    """One recorded run: its entries in order, and the scores added to it (`scores`)."""

    __slots__ = ("entries", "scores")

    def __init__(self, entries: Iterable[Entry], scores: Iterable[Scored] = ()) -> None:
        self.entries: tuple[Entry, ...] = tuple(entries)
        self.scores: tuple[Scored, ...] = tuple(scores)
        if not self.entries or not isinstance(self.entries[0], RunStarted):
            raise JournalError("a journal starts with its run header")
        if self.entries[0].version != VERSION:
            raise JournalError(
                f"journal format version {self.entries[0].version}, this library reads {VERSION}"
            )

    @property
    def header(self) -> RunStarted:
        h = self.entries[0]
        assert isinstance(h, RunStarted)
        return h

    @property
    def ended(self) -> RunEnded | None:
        last = self.entries[-1]
        return last if isinstance(last, RunEnded) else None

    def commands(self) -> tuple[CommandSeen, ...]:
        """The root run's commands (a child run's are in its `InRun` entries)."""
        return tuple(e for e in self.entries if isinstance(e, CommandSeen))

    def runs(self) -> dict[tuple[str, ...], tuple[Entry, ...]]:
        """Each child run's entries, by path, in order (its `RunStarted` first)."""
        out: dict[tuple[str, ...], list[Entry]] = {}
        for e in self.entries:
            if isinstance(e, InRun):
                out.setdefault(e.path, []).append(e.entry)
        return {path: tuple(entries) for path, entries in out.items()}

    def to_ndjson(self) -> bytes:
        return b"".join(_encoder.encode(e) + b"\n" for e in (*self.entries, *self.scores))

    @classmethod
    def from_ndjson(cls, data: bytes | str) -> Journal:
        raw = data.encode() if isinstance(data, str) else data
        entries: list[Entry] = []
        scores: list[Scored] = []
        for n, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            if json_too_deep(line, MAX_ENTRY_DEPTH):
                raise JournalError(f"line {n}: nests deeper than {MAX_ENTRY_DEPTH} levels")
            try:
                e = _decoder.decode(line)
            except msgspec.DecodeError as x:
                raise JournalError(f"line {n}: {x}") from x
            if isinstance(e, Scored):
                scores.append(e)
            else:
                entries.append(e)
        return cls(entries, scores)

    @classmethod
    def read(cls, path: str | Path, *, max_bytes: int = MAX_JOURNAL_BYTES) -> Journal:
        """The journal in the file at `path`: a regular file of at most `max_bytes`.

        A device, FIFO, socket or directory is refused without being read (opened
        non-blocking, so a FIFO with no writer does not wait), as is a larger file:
        JournalError, and nothing else is read.
        """
        return cls.from_ndjson(read_bounded(path, max_bytes))

    def write(self, path: str | Path) -> None:
        Path(path).write_bytes(self.to_ndjson())


def read_bounded(path: str | Path, max_bytes: int) -> bytes:
    """A regular file's bytes, at most `max_bytes` of them; JournalError otherwise."""
    if max_bytes < 0:
        raise ValueError(f"max_bytes must be at least 0, got {max_bytes}")
    # O_NONBLOCK: opening a FIFO without a writer returns at once, so fstat can refuse it.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise JournalError("not a regular file")
        if st.st_size > max_bytes:
            raise JournalError(f"{st.st_size} bytes, more than the bound of {max_bytes} bytes")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(max_bytes + 1)  # a file that grew since fstat is still bounded
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise JournalError(f"more than the bound of {max_bytes} bytes")
    return data


# --- recording -----------------------------------------------------------------------------


def _env_secrets() -> tuple[str, ...]:
    return tuple(
        v for k, v in os.environ.items() if k.upper().endswith("_API_KEY") and len(v) >= 8
    )


class Recorder:
    """An observer that records every run to a journal.

    With a `directory`, each run goes to `<directory>/<run_id>.ndjson`, written and
    flushed line by line (a crash keeps what happened up to it). Without one, the
    journals stay in memory: `recorder.journal(run_id)`, `recorder.last()`, the last
    `keep` runs only. A run whose id was recorded before replaces that journal. A
    resumed run (`pipeline.approval`) is recorded as `<run_id>.resumed-<step>` (the step
    it went on at), beside the journal of the part that suspended; it replays on its
    own: its header holds the suspension and the decisions.

    `pii`: "agent" (the default) stores what the agent's PII guards let out; "keep"
    stores the run's personal data as it saw it (ask for it only where the journals are
    kept as safely as the data itself). A directory is pruned when the recorder is made
    and every `PRUNE_EVERY` runs: journals not written for `max_age_days` are removed,
    then the oldest until the rest take at most `max_total_bytes` (None: no such bound);
    a journal being written is never removed.
    """

    def __init__(
        self,
        directory: str | Path | None = None,
        *,
        secrets: Iterable[str] = (),
        keep: int = 100,
        pii: PIIHandling = "agent",
        max_age_days: float | None = MAX_AGE_DAYS,
        max_total_bytes: int | None = MAX_TOTAL_BYTES,
    ) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        if pii not in ("keep", "agent"):
            raise ValueError(f"pii must be 'keep' or 'agent', got {pii!r}")
        if max_age_days is not None and not max_age_days > 0:
            raise ValueError(f"max_age_days must be above 0 (or None), got {max_age_days!r}")
        if max_total_bytes is not None and (
                type(max_total_bytes) is not int or max_total_bytes < 1):
            raise ValueError(
                f"max_total_bytes must be an int of at least 1 (or None), got {max_total_bytes!r}")
        self.pii: PIIHandling = pii
        self.keep = keep
        self.max_age_days = max_age_days
        self.max_total_bytes = max_total_bytes
        self.directory = Path(directory) if directory is not None else None
        self._writing: set[str] = set()
        self._started = 0
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self.prune()
        self._secrets = tuple(s for s in (*secrets, *_env_secrets()) if s)
        self._scrub = LineScrubber(self._secrets, _encoder.encode)
        self._lines: dict[str, list[bytes]] = {}
        self._order: list[str] = []
        self._live: dict[str, _Recording] = {}
        """The roots being recorded, by journal name: a score added meanwhile waits for
        the run's end (`annotate`)."""
        self._running: dict[str, _Recording] = {}
        """The runs being recorded, by run id: a child run's entries go in its root's."""
        self._annotating = threading.Lock()

    def prune(self) -> list[str]:
        """Remove the directory's journals past `max_age_days`, then the oldest until the
        rest fit in `max_total_bytes`; the names removed. Only `*.ndjson` regular files
        of the directory itself, never one being written."""
        if self.directory is None:
            return []
        found: list[tuple[float, int, str]] = []
        with os.scandir(self.directory) as it:
            for entry in it:
                if (entry.name.endswith(".ndjson") and entry.name not in self._writing
                        and entry.is_file(follow_symlinks=False)):
                    st = entry.stat(follow_symlinks=False)
                    found.append((st.st_mtime, st.st_size, entry.name))
        found.sort(reverse=True)  # the newest first
        cutoff = (time.time() - self.max_age_days * 86400.0
                  if self.max_age_days is not None else None)
        removed: list[str] = []
        total = 0
        for mtime, size, name in found:
            total += size
            if (cutoff is not None and mtime < cutoff) or (
                    self.max_total_bytes is not None and total > self.max_total_bytes):
                # (removed meanwhile by another recorder: gone all the same)
                (self.directory / name).unlink(missing_ok=True)
                removed.append(name)
                total -= size
        return removed

    def start(self, run: RunInfo) -> RunObserver:
        parent = (self._running.get(run.parent_run_id) if run.parent_run_id is not None
                  else None)
        redactors: list[Redactor] = []
        secrets = SecretRedactor(self._secrets)
        if secrets:
            redactors.append(secrets)
        guards = _pii_guards(run.agent) if self.pii == "agent" else []
        if parent is not None and run.parent_call_id is not None:
            # A child run: its entries in its root's journal, under its path; what its
            # own guards and those of every run above it let out (theirs cover it).
            guards = [*guards, *parent.guards]
            redactors.extend(guards)
            child = _Recording(run, self._scrub, parent.sink, redactors, guards,
                               path=(*parent.path, run.parent_call_id),
                               done=self._running.pop)
            self._running[run.run_id] = child
            return child
        out: IO[bytes] | None = None
        lines: list[bytes] | None = None
        key = journal_name(run)
        if self.directory is not None:
            self._started += 1
            if self._started % PRUNE_EVERY == 0:
                self.prune()
            name = f"{_safe(key)}.ndjson"
            out = (self.directory / name).open("wb")
            self._writing.add(name)
        else:
            # A run id seen before (another simulator's "run1") starts its journal afresh.
            lines = self._lines[key] = []
            if key in self._order:
                self._order.remove(key)
            self._order.append(key)
            while len(self._order) > self.keep:  # a cap: the oldest journals go first
                del self._lines[self._order.pop(0)]
        redactors.extend(guards)
        done = None
        if out is not None:
            written = f"{_safe(key)}.ndjson"

            def done() -> None:
                self._writing.discard(written)
        rec = _Recording(run, self._scrub, _Sink(out, lines), redactors, guards,
                         closed=done, done=self._running.pop)
        rec.owner = self
        with self._annotating:
            self._live[key] = rec
        self._running[run.run_id] = rec
        return rec

    def annotate(self, run_id: str, score: Scored) -> None:
        """Add a score to a run's journal (`run_id`: its journal's name), after its end:
        one still being recorded gets it once it ended. Scrubbed as any line. LookupError
        for a run this recorder does not hold."""
        line = self._scrub(_encoder.encode(score)) + b"\n"
        with self._annotating:
            live = self._live.get(run_id)
            if live is not None:
                live.later.append(line)
                return
            if self.directory is None:
                lines = self._lines.get(run_id)
                if lines is None:
                    raise LookupError(f"no journal of run {run_id!r} in memory")
                lines.append(line)
                return
            path = self.path(run_id)
            if not path.is_file():
                raise LookupError(f"no journal of run {run_id!r} in {self.directory}")
            with path.open("ab") as f:
                f.write(line)

    def _ended(self, rec: _Recording) -> None:
        """A run's end was written: the scores that waited for it follow it."""
        with self._annotating:
            for key, r in list(self._live.items()):
                if r is rec:
                    del self._live[key]
            rec.write_later()

    def path(self, run_id: str) -> Path:
        if self.directory is None:
            raise LookupError("this recorder keeps its journals in memory")
        return self.directory / f"{_safe(run_id)}.ndjson"

    def journal(self, run_id: str) -> Journal:
        """A recorded run's journal (in memory, or read back from its file)."""
        if self.directory is not None:
            return Journal.read(self.path(run_id))
        return Journal.from_ndjson(b"".join(self._lines[run_id]))

    def last(self) -> Journal:
        """The journal of the last run recorded in memory."""
        if not self._order:
            raise LookupError("no run recorded in memory")
        return self.journal(self._order[-1])



def _pii_guards(agent: Agent) -> list[PIIRedactor]:
    """The agent's PII guards, as redactors of what a journal stores."""
    from pipeline.processors.guards.pii import PIIDetector

    out: list[PIIRedactor] = []
    for p in agent.all_processors():
        if isinstance(p, PIIDetector):
            guard = p

            def find(text: str, g: PIIDetector = guard) -> list[tuple[int, int, str]]:
                try:
                    return [(f.start, f.end, f.kind) for f in g.find(text)]
                except Exception:  # a detector that fails stores nothing of the text
                    return [(0, len(text), "unchecked")] if text else []

            def replacement(kind: str, value: str, g: PIIDetector = guard) -> str:
                # A kind the guard blocks is not stored either.
                if kind == "unchecked" or g.strategy_for(kind) == "block":
                    return f"[REDACTED:{kind}]"
                return g.replacement(kind, value)

            out.append(PIIRedactor(find, replacement))
    return out


def _delta(e: Entry) -> tuple[str, str] | None:
    """A streamed delta's stream key and text, or None."""
    if type(e) is ModelReplied:
        ev = e.event
        if type(ev) is TextDelta:
            return f"text:{ev.id}", ev.text
        if type(ev) is ReasoningDelta:
            return f"reasoning:{ev.id}", ev.text
        if type(ev) is ToolCallDelta:
            return f"call:{ev.tool_call_id}", ev.args_delta
    return None


def _with_text(e: Entry, text: str) -> Entry:
    assert isinstance(e, ModelReplied)
    ev = e.event
    if isinstance(ev, ToolCallDelta):
        return msgspec.structs.replace(e, event=msgspec.structs.replace(ev, args_delta=text))
    assert isinstance(ev, TextDelta | ReasoningDelta)
    return msgspec.structs.replace(e, event=msgspec.structs.replace(ev, text=text))


_IDS = frozenset({
    "t", "type", "id", "tool_call_id", "tool_name", "run_id", "thread_id", "resource_id",
    "path",
    "role", "model", "model_id", "response_id", "finish_reason", "status", "processors",
    "tools", "error_type",
})
"""Fields of an entry that name or identify (a tool, a call, a run), never content."""


def _redact_strings(value: object, redact: Callable[[str], str]) -> object:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redact_strings(v, redact) for v in value]
    if isinstance(value, dict):
        return {
            k: v if k in _IDS else _redact_strings(v, redact) for k, v in value.items()
        }
    return value


def journal_name(run: RunInfo) -> str:
    """What a run's journal is called: its run id; a resumed run's, the run id and the
    step it went on at (`<run_id>.resumed-<step>`), so the part before the suspension
    stays."""
    if run.resume is None:
        return run.run_id
    return f"{run.run_id}.resumed-{run.resume.suspension.step.step_number}"


def _safe(run_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id) or "run"


class _Sink:
    """Where a journal's lines go: its file, or its lines in memory; a tree's runs share
    their root's."""

    __slots__ = ("lines", "out")

    def __init__(self, out: IO[bytes] | None, lines: list[bytes] | None) -> None:
        self.out = out
        self.lines = lines

    def write(self, line: bytes) -> None:
        if self.out is not None:
            self.out.write(line)
            self.out.flush()
        elif self.lines is not None:
            self.lines.append(line)

    def close(self) -> None:
        if self.out is not None:
            self.out.close()
            self.out = None


class _Recording(RunObserver):
    def __init__(
        self,
        run: RunInfo,
        scrub: Callable[[bytes], bytes],
        sink: _Sink,
        redactors: Sequence[Redactor] = (),
        guards: Sequence[PIIRedactor] = (),
        *,
        path: tuple[str, ...] = (),
        done: Callable[[str], object] | None = None,
        closed: Callable[[], None] | None = None,
    ) -> None:
        self._scrub = scrub
        self.sink = sink
        self.path = path
        """Where the run is in its tree (empty: the root, whose journal this is)."""
        self._run_id = run.run_id
        self._done = done
        """Told the run's id at its end (the recorder's runs being recorded)."""
        self._closed = closed
        """Told once the journal is whole (a file no longer being written)."""
        self._held: DeltaScrubber[Entry] | None = DeltaScrubber(redactors) if redactors else None
        self.owner: Recorder | None = None
        self.later: list[bytes] = []
        """Score lines added before the run ended (`Recorder.annotate`)."""
        self.guards = tuple(guards)
        self._clean: Callable[[str], str] | None = None
        """Scrubs a whole text (a field's value, before it is cut to a preview)."""
        if redactors:
            found = tuple(redactors)
            self._clean = lambda text: apply(
                text, merged(sp for r in found for sp in r.find(text))
            )
        agent = run.agent
        resume = run.resume
        resume_writes: tuple[StoredWrite, ...] = ()
        if resume is not None:
            bare, resume_writes = without_writes(resume.suspension, _encoder.encode)
            resume = msgspec.structs.replace(resume, suspension=bare)
        self._write(RunStarted(
            version=VERSION,
            run_id=run.run_id,
            thread_id=run.context.thread_id,
            resource_id=run.context.resource_id,
            values=run.context.values,
            messages=run.messages,
            agent=AgentInfo(
                agent.name, agent.model, tuple(p.id for p in agent.all_processors()),
                tuple(t.name for t in agent.tools),
            ),
            at=run.started_at,
            resume=resume,
            resume_writes=resume_writes,
        ))

    def _write(self, e: Entry) -> None:
        if self._held is None:
            self._store(e)
            return
        delta = _delta(e)
        ends = delta is None and type(e) not in (CommandSeen, ClockRead, EffectSeen)
        for entry, text in self._held.push(e, delta, ends_streams=ends):
            self._store(entry if text is None else _with_text(entry, text), text is None)

    def _store(self, e: Entry, whole: bool = True) -> None:
        line = _encoder.encode(e)
        if whole and self.guards and type(e) not in (ClockRead, Priced, RunEnded):
            # What is not streamed (the input, tool results, answers...): each string
            # handled as the agent's PII guards handle a text.
            data = msgspec.json.decode(line)
            for g in self.guards:
                data = _redact_strings(data, g.text)
            line = _encoder.encode(data)
        if self.path:  # a child run's entry, in its root's journal
            line = b'{"t":"in","path":' + _encoder.encode(self.path) + b',"entry":' + line + b"}"
        self.sink.write(self._scrub(line) + b"\n")

    def command(self, cmd: LoopCommand, at: float) -> None:
        kind, what = describe(cmd)
        if self._clean is not None and type(cmd) in (Pull, Publish):
            # What the stream published, piece by piece: a piece could be part of a
            # secret split over deltas, so only its digest is kept.
            fields = tuple(FieldSeen(f.path, f.digest, "") for f in fields_of(cmd))
        else:
            fields = fields_of(cmd, self._clean)
        self._write(CommandSeen(kind, what, digest(cmd), at, fields))

    def reply(self, cmd: LoopCommand, reply: object, at: float) -> None:
        t = type(cmd)
        if t is Pull or t is CallModel:
            self._write(ModelReplied(cast(ModelReply, reply), t is CallModel))
        elif isinstance(cmd, RunTools):
            outcomes, children = _child_runs(cmd, cast(tuple[ToolOutcome, ...], reply))
            self._write(ToolsDone(outcomes, written_by(cmd), children))
        elif t is Perform:
            if isinstance(reply, ModelAnswer):
                self._write(Answered(answer=reply))
            else:
                self._write(Answered(value=reply))
        # Publish and Sleep are answered None; AwaitHook's reply is the processor's own
        # result, which a replay computes again.

    def failed(self, cmd: LoopCommand, error: BaseException, at: float) -> None:
        if isinstance(error, RunCancelled):
            if isinstance(cmd, RunTools):  # a replay cancels with what had finished
                done, _ = _child_runs(cmd, error.tool_outcomes)
                self._write(CancelledAt(error.reason, done, written_by(cmd)))
            else:
                self._write(CancelledAt(error.reason))
        elif not isinstance(cmd, AwaitHook):
            api = error.error if isinstance(error, ProviderError) else None
            self._write(Raised(type(error).__name__, str(error), api))

    def effect(self, record: EffectRecord, at: float) -> None:
        e = record.effect
        kind = type(e.effect if isinstance(e, Out) else e).__name__
        self._write(EffectSeen(record.processor_id, record.hook, kind, effect_summary(e), at))

    def clock(self, reading: float) -> None:
        self._write(ClockRead(reading))

    def priced(self, query: PriceQuery, cost: Cost | None) -> None:
        self._write(Priced(cost))

    def end(self, result: RunResult | None, at: float) -> None:
        if result is None:
            self._write(RunEnded(None, None, at))
        else:
            self._write(RunEnded(result.status, result_digest(result), at))
        if self._done is not None:
            self._done(self._run_id)
        if self.path:  # a child: its root's journal goes on
            return
        if self.owner is not None:
            self.owner._ended(self)  # writes the scores that waited, then closes
        else:
            self.write_later()

    def write_later(self) -> None:
        """The scores that waited for the end (`Recorder.annotate`), then the journal is
        whole: closed."""
        for line in self.later:
            self.sink.write(line)
        self.later.clear()
        if self.sink.out is not None:
            self.sink.close()
            if self._closed is not None:
                self._closed()


def _child_runs(
    cmd: RunTools[ToolInvocation, ToolOutcome], outcomes: tuple[ToolOutcome, ...]
) -> tuple[tuple[ToolOutcome, ...], tuple[str, ...]]:
    """`outcomes` with a child run's emptied (its run is recorded under its path), and
    the ids of those calls."""
    children = tuple(i.call.tool_call_id for i in cmd.calls if i.child is not None)
    if not children:
        return outcomes, ()
    ran = set(children)
    return tuple(
        ToolOutcome(o.tool_call_id, None, o.is_error) if o.tool_call_id in ran else o
        for o in outcomes
    ), children


def digest(cmd: LoopCommand) -> str:
    """A short digest of a command's content (equal commands, equal digests)."""
    return _hash(_encoder.encode(comparable_command(cmd)))


FIELD_DEPTH = 4
"""How deep a journal records a command's fields (deeper: a field's whole value)."""
MAX_FIELDS = 48
"""The most fields a journal records of one command (then: whole values)."""
PREVIEW = 160
"""How much of a field's value a journal keeps to show (its JSON, cut)."""


def fields_of(
    cmd: LoopCommand, clean: Callable[[str], str] | None = None
) -> tuple[FieldSeen, ...]:
    """Each field of a command's content (as `digest` sees it), with a digest and a
    preview (`clean`ed whole before it is cut, so no cut keeps a piece of a secret)."""
    out: list[FieldSeen] = []
    budget = [MAX_FIELDS]

    def walk(path: str, value: object, depth: int) -> None:
        children: list[tuple[str, object]] = []
        if isinstance(value, dict):
            children = [(f"{path}.{k}" if path else str(k), v) for k, v in value.items()]
        elif isinstance(value, list | tuple):
            children = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
        if children and depth < FIELD_DEPTH and len(children) - 1 <= budget[0]:
            budget[0] -= len(children) - 1
            for p, v in children:
                walk(p, v, depth + 1)
            return
        data = _encoder.encode(value)
        text = data.decode(errors="replace")
        if clean is not None:
            text = clean(text)
        preview = text if len(text) <= PREVIEW else text[:PREVIEW - 1] + "\u2026"
        out.append(FieldSeen(path or "(value)", _hash(data), preview))

    walk("", msgspec.to_builtins(comparable_command(cmd), enc_hook=repr), 0)
    return tuple(out)


def result_digest(result: RunResult) -> str:
    return _hash(_encoder.encode(result))


def _hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=10).hexdigest()


# --- replaying -----------------------------------------------------------------------------


__all__ = [
    "MAX_ENTRY_DEPTH", "MAX_JOURNAL_BYTES", "AgentInfo", "EffectSeen", "Entry", "FieldSeen",
    "InRun", "Journal",
    "JournalError", "MAX_AGE_DAYS", "MAX_TOTAL_BYTES", "PIIHandling", "Priced", "Recorder",
    "Scored", "describe", "digest",
    "effect_summary", "fields_of",
]
