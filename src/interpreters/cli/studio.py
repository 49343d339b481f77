"""`pipeline studio [JOURNALS_DIR]`: a local web page for recorded runs, and a playground.

    pipeline studio journals/                              # http://127.0.0.1:8765/
    pipeline studio journals/ --agent my_app.agents:support --port 9000

It lists the journals a `Recorder("journals/")` wrote (status, agent, thread, user,
start, steps, cost, the guards that acted; each a filter) and shows one run as a
timeline, what changed the run first, clock reads and pass-through decisions folded:
each command the loop yielded (model calls with their request, published chunks, tool
runs, sleeps), every model event, each processor decision (`EffectSeen`: continued,
replaced, held, released, skipped, aborted, retried), errors, cancels, costs and the
recorded clock. With `--agent module:name` a run can be replayed against that agent and
shown side by side with the recording: where it diverges (`replay.Divergence`) and what
each processor the recording did not have changed; and the page's playground chats with
that agent (`interpreters.cli.playground`), the only thing a POST reaches: JSON from the
studio's own page only (`cross_site`).

The page is plain HTML and JavaScript served from the package (no build step); it builds
the page with `textContent` only and is served with a Content-Security-Policy that runs
no inline script, since journals hold model output. It binds to loopback only unless
`allow_remote=True`, and answers only requests whose `Host` is one of its names
(127.0.0.1, localhost, [::1], the address it serves on, with its port; more with
`allowed_hosts` / `--allow-host`): a page of another name that resolves to 127.0.0.1
(DNS rebinding) gets a 421, not the journals. Everything is bounded: the runs listed per
page, the timeline entries per page, the characters of each value shown, the files a
directory scan looks at, the journals kept parsed.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import stat
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from glob import escape as glob_escape
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from pathlib import Path
from typing import cast
from urllib.parse import parse_qs, unquote, urlsplit

import anyio
import msgspec

from interpreters.approvals.sql import open_approval_store
from interpreters.approvals.store import MAX_LISTED, ApprovalStore
from interpreters.cli.playground import DecideRequest, Playground, PlayRequest
from interpreters.cli.studio_evals import EvalReports, NoSuchReport
from interpreters.memory.store import MemoryStoreError
from interpreters.observers.observe import describe
from interpreters.providers.provider import AsyncProvider
from interpreters.record.journal import (
    MAX_JOURNAL_BYTES,
    Answered,
    CancelledAt,
    ClockRead,
    CommandSeen,
    EffectSeen,
    Entry,
    InRun,
    Journal,
    JournalError,
    ModelReplied,
    Priced,
    Raised,
    RunEnded,
    RunStarted,
    ToolsDone,
    effect_summary,
    fields_of,
)
from interpreters.record.replay import ReplayRun, replay_async
from pipeline.agent import Agent
from pipeline.approval import ApprovalError, RunNotSuspended, UnknownRun
from pipeline.tools import check_deps
from pipeline.ui_stream import SSE_DONE, UI_MESSAGE_STREAM_HEADERS, UIError, sse_frame
from pipeline.values.chunks import ModelFinish, ReasoningDelta, TextDelta, Usage

DEFAULT_PORT = 8765

MAX_TEXT = 2000
"""Characters of one value shown (a chunk's text, a tool result's JSON); the rest is
cut, and the page says how many characters were left out."""
MAX_ITEMS = 50
"""Items of one list or mapping shown; the rest are counted."""
MAX_DEPTH = 6
"""How deep a value is shown; deeper, its JSON, cut at MAX_TEXT."""
PAGE = 200
"""Timeline entries (or runs, or compared commands) per page by default."""
MAX_PAGE = 500
"""The most a page may ask for."""
MAX_SCAN = 10_000
"""Files a directory listing looks at (the newest first); beyond, the list says so."""
MAX_HEADER_BYTES = 1 << 20
"""Bytes of a journal's first line read to list it."""
CACHED = 4
"""Journals (and replays) kept parsed, so paging a large one does not read it again."""
REQUEST_TIMEOUT = 30.0
"""Seconds a connection may stay silent before it is closed."""

_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}")


class StudioError(ValueError):
    """A studio that cannot start as asked (a host beyond loopback, a missing directory)."""


class NotFound(LookupError):
    """No journal of that name in the studio's directory."""


Json = object
"""A value made of dicts, lists, strings, numbers, bools and None."""


def shown(value: object, depth: int = 0) -> Json:
    """`value` as JSON builtins, bounded: strings cut at MAX_TEXT, lists and mappings at
    MAX_ITEMS, nesting at MAX_DEPTH."""
    if isinstance(value, str):
        if len(value) <= MAX_TEXT:
            return value
        return value[:MAX_TEXT] + f"\u2026 ({len(value) - MAX_TEXT} more characters)"
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, Decimal):
        return str(value)
    if depth >= MAX_DEPTH:
        return shown(json.dumps(_builtins(value), default=repr), depth)
    if isinstance(value, Mapping):
        items = list(value.items())
        out: dict[str, Json] = {str(k): shown(v, depth + 1) for k, v in items[:MAX_ITEMS]}
        if len(items) > MAX_ITEMS:
            out["\u2026"] = f"{len(items) - MAX_ITEMS} more"
        return out
    if isinstance(value, list | tuple):
        seq: list[Json] = [shown(v, depth + 1) for v in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            seq.append(f"\u2026 {len(value) - MAX_ITEMS} more")
        return seq
    built = _builtins(value)
    if built is value:  # not a Struct either: its repr
        return shown(repr(value), depth)
    return shown(built, depth)


def _builtins(value: object) -> object:
    try:
        return cast(object, msgspec.to_builtins(value, enc_hook=repr))
    except (TypeError, ValueError):
        return repr(value)


def _title(e: Entry) -> str:
    if isinstance(e, InRun):
        return f"[{'/'.join(e.path)}] {_title(e.entry)}"
    if isinstance(e, RunStarted):
        return f"run {e.run_id}: agent {e.agent.name!r} on {e.agent.model}"
    if isinstance(e, CommandSeen):
        return e.what
    if isinstance(e, ModelReplied):
        ev = e.event
        kind = type(ev).__name__
        if isinstance(ev, TextDelta | ReasoningDelta):
            return f"{kind} {ev.text!r}"[: MAX_TEXT]
        if isinstance(ev, ModelFinish):
            u = ev.usage
            return (f"{kind} {ev.finish_reason}: {u.input_tokens} in / "
                    f"{u.output_tokens} out tokens")
        return kind
    if isinstance(e, EffectSeen):
        detail = f" ({e.detail})" if e.detail else ""
        return f"{e.processor_id}.{e.hook}: {e.effect}{detail}"[: MAX_TEXT]
    if isinstance(e, ToolsDone):
        return ", ".join(
            f"{o.tool_call_id}: {'error' if o.is_error else 'result'}" for o in e.outcomes
        )[: MAX_TEXT] or "no tool results"
    if isinstance(e, Answered):
        return "answer to a processor's request"
    if isinstance(e, Raised):
        status = f" (HTTP {e.api_error.status})" if e.api_error and e.api_error.status else ""
        return f"{e.error_type}{status}: {e.message}"[: MAX_TEXT]
    if isinstance(e, CancelledAt):
        return f"cancelled: {e.reason}"[: MAX_TEXT]
    if isinstance(e, Priced):
        return "no price known" if e.cost is None else f"cost {e.cost.total} {e.cost.currency}"
    if isinstance(e, ClockRead):
        return f"clock read: {e.value:g}"
    return f"end: {e.status or 'closed unfinished'}"


_KINDS: dict[type, str] = {
    RunStarted: "run", CommandSeen: "command", ModelReplied: "model", EffectSeen: "effect",
    ToolsDone: "tools", Answered: "answer", Raised: "error", CancelledAt: "cancel",
    Priced: "price", ClockRead: "clock", RunEnded: "end",
}


@dataclass(frozen=True)
class Timeline:
    """One journal, read: its entries as rows for the page, and a summary."""

    journal: Journal
    rows: tuple[dict[str, Json], ...]
    summary: dict[str, Json]


def timeline(journal: Journal) -> Timeline:
    """The rows and the summary of a journal (each row's values bounded by `shown`)."""
    rows: list[dict[str, Json]] = []
    highlights: list[dict[str, Json]] = []
    step = -1
    at = journal.header.at
    usage = Usage()
    cost: Decimal | None = Decimal(0)
    priced = False
    calls = tripwires = retries = errors = tool_results = 0
    steps: set[int] = set()
    tree = _RunTree(journal.header)
    for n, entry in enumerate(journal.entries):
        if isinstance(entry, InRun):  # a child run's: shown under its path, not counted
            inner = entry.entry
            node = tree.saw(n, entry.path, inner)
            if isinstance(inner, CommandSeen):
                at = inner.at
            data = _builtins(inner)
            if isinstance(data, dict):
                data.pop("t", None)
            rows.append({
                "n": n, "kind": _KINDS.get(type(inner), "entry"), "step": node.step,
                "at": at, "title": f"[{'/'.join(entry.path)}] {_title(inner)}"[: MAX_TEXT],
                "data": shown(data), "path": list(entry.path), "depth": len(entry.path),
                "agent": node.agent,
            })
            continue
        e = entry
        if isinstance(e, CommandSeen):
            at = e.at
            if e.kind == "call-model":
                calls += 1
                m = re.search(r"\(step (\d+),", e.what)
                step = int(m.group(1)) if m else step + 1
                steps.add(step)
        elif isinstance(e, ModelReplied) and isinstance(e.event, ModelFinish):
            usage = usage + e.event.usage
        elif isinstance(e, Priced):
            priced = True
            cost = None if cost is None or e.cost is None else cost + e.cost.total
        elif isinstance(e, EffectSeen):
            at = e.at or at
            if e.effect == "Abort":
                if e.detail.startswith("retry: "):
                    retries += 1
                else:
                    tripwires += 1
        elif isinstance(e, Raised):
            errors += 1
        elif isinstance(e, ToolsDone):
            tool_results += len(e.outcomes)
        elif isinstance(e, RunEnded):
            at = e.at
        kind = _KINDS[type(e)]
        data = _builtins(e)
        if isinstance(data, dict):
            data.pop("t", None)
        row: dict[str, Json] = {
            "n": n, "kind": kind, "step": step, "at": at, "title": _title(e),
            "data": shown(data),
        }
        if isinstance(e, EffectSeen):
            row["effect"] = e.effect
        why = _changed(e)
        if why is not None:
            row["highlight"] = why
            if len(highlights) < MAX_HIGHLIGHTS:
                highlights.append({"n": n, "step": step, "why": why, "title": row["title"]})
        elif _passes_through(e):
            row["fold"] = True
        rows.append(row)
    h = journal.header
    end = journal.ended
    facts = run_facts(journal)
    summary: dict[str, Json] = {
        "run_id": h.run_id, "agent": h.agent.name, "model": h.agent.model,
        "processors": list(h.agent.processors), "tools": list(h.agent.tools),
        "status": end.status if end is not None else "unfinished",
        "started_at": h.at, "duration": (end.at - h.at) if end is not None else None,
        "steps": len(steps), "model_calls": calls, "tool_results": tool_results,
        "tripwires": tripwires, "processor_retries": retries, "errors": errors,
        "usage": shown(_builtins(usage)),
        "cost": str(cost) if priced and cost is not None else None,
        "entries": len(journal.entries),
        "thread_id": shown(h.thread_id), "user": shown(h.resource_id),
        "guards": facts["guards"],
        "highlights": highlights,
        "decisions": _decisions(h),
        # What online scorers said of the run, added after it ended (`OnlineScorer`).
        "scores": [shown({"scorer": sc.scorer, "verdict": sc.verdict, "value": sc.value,
                          "label": sc.label, "reason": sc.reason})
                   for sc in journal.scores[:MAX_ITEMS]],
        "child_runs": len(journal.runs()),
    }
    tree.root.status = cast(str, summary["status"])
    tree.root.model_calls = calls
    summary["tree"] = tree.root.as_json()
    return Timeline(journal, tuple(rows), summary)


MAX_TREE_NODES = 500
"""The runs of a tree the run view lists (each child run's rows are shown all the same)."""


class _RunNode:
    """One run of a tree as the run view lists it: its agent, path, status, its own model
    calls, the row of its start (`n`), and the runs it called, in the order they began."""

    __slots__ = ("agent", "children", "model_calls", "n", "path", "run_id", "status", "step")

    def __init__(self, n: int, path: tuple[str, ...], agent: str, run_id: str) -> None:
        self.n = n
        self.path = path
        self.agent = agent
        self.run_id = run_id
        self.status = "unfinished"
        self.model_calls = 0
        self.step = -1
        self.children: list[_RunNode] = []

    def as_json(self) -> dict[str, Json]:
        return {"n": self.n, "path": list(self.path), "agent": shown(self.agent),
                "run_id": shown(self.run_id), "status": shown(self.status),
                "model_calls": self.model_calls,
                "children": [c.as_json() for c in self.children]}


class _RunTree:
    """The tree of runs a journal holds, built as its entries are read: a child run hangs
    under the run whose path is its own less its last call (the root, for a path of one)."""

    def __init__(self, header: RunStarted) -> None:
        self.root = _RunNode(0, (), header.agent.name, header.run_id)
        self.nodes: dict[tuple[str, ...], _RunNode] = {(): self.root}

    def saw(self, n: int, path: tuple[str, ...], e: Entry) -> _RunNode:
        """The node of the run an entry of `path` belongs to, told of the entry."""
        node = self.nodes.get(path)
        if node is None:
            agent, run_id = (e.agent.name, e.run_id) if isinstance(e, RunStarted) else ("?", "")
            node = _RunNode(n, path, agent, run_id)
            if len(self.nodes) <= MAX_TREE_NODES:
                parent = self.nodes.get(path[:-1], self.root)
                parent.children.append(node)
            self.nodes[path] = node
        if isinstance(e, CommandSeen) and e.kind == "call-model":
            node.model_calls += 1
            m = re.search(r"\(step (\d+),", e.what)
            node.step = int(m.group(1)) if m else node.step + 1
        elif isinstance(e, RunEnded):
            node.status = e.status or "unfinished"
        return node


MAX_HIGHLIGHTS = 200
"""The rows a run's summary names as having changed the run, at most."""


def _changed(e: Entry) -> str | None:
    """Why an entry changed the run (its row is highlighted), or None."""
    if isinstance(e, EffectSeen) and e.effect != "Continue":
        if e.effect == "Abort":
            return "retry" if e.detail.startswith("retry: ") else "tripwire"
        return "approval" if e.effect == "AskApproval" else "effect"
    if isinstance(e, Raised):
        return "error"
    if isinstance(e, CancelledAt):
        return "cancel"
    if isinstance(e, RunStarted) and e.resume is not None:
        return "approval"
    if isinstance(e, RunEnded) and e.status not in ("finished", None):
        return e.status
    if isinstance(e, ToolsDone) and any(o.is_error for o in e.outcomes):
        return "tool error"
    return None


def _passes_through(e: Entry) -> bool:
    """Rows a reader skips: clock reads and decisions that let everything pass (folded)."""
    return isinstance(e, ClockRead) or (isinstance(e, EffectSeen) and e.effect == "Continue")


def _decisions(h: RunStarted) -> list[Json]:
    """What a resumed run went on with: each call's decision, and who gave it (the run's
    user, the `resource_id` it was resumed for, when the caller said)."""
    if h.resume is None:
        return []
    pending = {p.tool_call_id: p for p in h.resume.suspension.pending}
    out: list[Json] = []
    for d in h.resume.decisions:
        p = pending.get(d.tool_call_id)
        out.append({
            "decision": type(d).__name__.lower(), "tool_call_id": d.tool_call_id,
            "tool": p.tool_name if p is not None else None,
            "message": shown(p.message) if p is not None else None,
            "reason": shown(getattr(d, "reason", None)),
            "by": shown(h.resource_id),
        })
    return out


def run_facts(journal: Journal) -> dict[str, Json]:
    """What the runs list shows and filters on, read from a whole journal: status, agent,
    thread, user, start, steps, cost, the guards that acted (processors whose effect was
    not `Continue`), and the part a resumed run went on from."""
    h = journal.header
    end = journal.ended
    steps: set[int] = set()
    cost: Decimal | None = Decimal(0)
    priced = False
    guards: set[str] = set()
    for e in journal.entries:
        if isinstance(e, CommandSeen) and e.kind == "call-model":
            m = re.search(r"\(step (\d+),", e.what)
            steps.add(int(m.group(1)) if m else len(steps))
        elif isinstance(e, Priced):
            priced = True
            cost = None if cost is None or e.cost is None else cost + e.cost.total
        elif isinstance(e, EffectSeen) and e.effect != "Continue":
            guards.add(e.processor_id)
    return {
        "run_id": h.run_id, "agent": h.agent.name, "model": h.agent.model,
        "status": end.status if end is not None and end.status else "unfinished",
        "thread_id": h.thread_id, "user": h.resource_id, "started_at": h.at,
        "steps": len(steps),
        "cost": str(cost) if priced and cost is not None else None,
        "guards": sorted(guards),
        "resumed_from": h.run_id if h.resume is not None else None,
    }


def _page(items: tuple[dict[str, Json], ...] | list[dict[str, Json]], offset: int,
          limit: int) -> dict[str, Json]:
    return {"offset": offset, "limit": limit, "total": len(items),
            "items": list(items[offset:offset + limit])}


def _text_of(chunks: object) -> str:
    return "".join(c.text for c in cast(list[object], chunks) if isinstance(c, TextDelta))


def compare(journal: Journal, run: ReplayRun, recorded_processors: tuple[str, ...]
            ) -> tuple[dict[str, Json], list[dict[str, Json]]]:
    """A replay beside its recording: a summary (the divergence, the replay's outcome,
    what each processor the recording did not have did) and one row per command."""
    div = run.divergence
    new = [e for e in run.trace.effects if e.processor_id not in recorded_processors]
    changes = [
        {"processor": e.processor_id, "hook": e.hook, "effect": type(e.effect).__name__,
         "detail": effect_summary(e.effect), "value": shown(_builtins(e.effect))}
        for e in new if type(e.effect).__name__ != "Continue"
    ]
    model_text = "".join(
        e.event.text for e in journal.entries
        if isinstance(e, ModelReplied) and isinstance(e.event, TextDelta)
    )
    summary: dict[str, Json] = {
        "identical": run.identical,
        "result_matches": run.result_matches,
        "divergence": None if div is None else {
            "index": div.index, "expected": div.expected, "got": div.got,
            "field": div.field, "recorded": div.recorded, "replayed": div.replayed,
            "text": shown(str(div)),
        },
        "recorded_status": journal.ended.status if journal.ended is not None else None,
        "replay_status": run.result.status,
        "recorded_model_text": shown(model_text),
        "replay_text": shown(_text_of(run.trace.chunks)),
        "new_processors": sorted({e.processor_id for e in new}),
        "changes": shown(changes[:MAX_PAGE]),
        "changes_total": len(changes),
        "continued_total": len(new) - len(changes),
    }
    recorded = journal.commands()
    replayed = run.trace.commands
    rows: list[dict[str, Json]] = []
    for i in range(max(len(recorded), len(replayed))):
        rec = recorded[i] if i < len(recorded) else None
        rep = replayed[i] if i < len(replayed) else None
        rep_fields = fields_of(rep) if rep is not None else ()
        rows.append({
            "index": i,
            "same": rec is not None and rep is not None
            and {f.digest for f in rec.fields} == {f.digest for f in rep_fields}
            and rec.what == describe(rep)[1],
            "diverges": div is not None and div.index == i,
            "recorded": None if rec is None else {
                "what": rec.what, "fields": shown([[f.path, f.value] for f in rec.fields])},
            "replay": None if rep is None else {
                "what": describe(rep)[1],
                "fields": shown([[f.path, f.value] for f in rep_fields])},
        })
    return summary, rows


@dataclass(frozen=True)
class RunFilter:
    """Which runs the list keeps: each field given must match (None: any)."""

    status: str | None = None
    agent: str | None = None
    thread: str | None = None
    """A part of the thread id."""
    user: str | None = None
    """A part of the user (resource) id."""
    guard: str | None = None
    """A processor that acted in the run (an effect other than `Continue`)."""
    since: float | None = None
    """Started at or after (Unix time)."""
    until: float | None = None
    min_steps: int | None = None
    min_cost: Decimal | None = None

    def keeps(self, row: Mapping[str, Json]) -> bool:
        def text(key: str) -> str:
            value = row.get(key)
            return value if isinstance(value, str) else ""

        started = row.get("started_at")
        at = float(started) if isinstance(started, int | float) else None
        steps = row.get("steps")
        cost = row.get("cost")
        guards = row.get("guards")
        checks = (
            self.status is None or text("status") == self.status,
            self.agent is None or text("agent") == self.agent,
            self.thread is None or self.thread in text("thread_id"),
            self.user is None or self.user in text("user"),
            self.guard is None or (isinstance(guards, list) and self.guard in guards),
            self.since is None or (at is not None and at >= self.since),
            self.until is None or (at is not None and at <= self.until),
            self.min_steps is None or (isinstance(steps, int) and steps >= self.min_steps),
            self.min_cost is None or (isinstance(cost, str) and Decimal(cost) >= self.min_cost),
        )
        return all(checks)

    @classmethod
    def of(cls, query: Mapping[str, list[str]]) -> RunFilter:
        """The filter a query string gives (`status=tripped&guard=pii&since=...`);
        ValueError naming a value that does not read."""
        def one(key: str) -> str | None:
            values = query.get(key)
            return values[0][:200] if values and values[0] else None

        def number(key: str) -> float | None:
            raw = one(key)
            if raw is None:
                return None
            try:
                return float(raw)
            except ValueError:
                raise ValueError(f"{key} must be a number, got {raw[:40]!r}") from None

        steps = number("min_steps")
        cost = one("min_cost")
        try:
            min_cost = Decimal(cost) if cost is not None else None
        except ArithmeticError:
            raise ValueError(f"min_cost must be a number, got {str(cost)[:40]!r}") from None
        return cls(status=one("status"), agent=one("agent"), thread=one("thread"),
                   user=one("user"), guard=one("guard"), since=number("since"),
                   until=number("until"), min_steps=int(steps) if steps is not None else None,
                   min_cost=min_cost)


class Studio:
    """What the pages read: the journals of one directory, and an optional agent to
    replay them with. Read-only; every answer is bounded."""

    def __init__(self, directory: str | Path, agent: Agent | None = None, *,
                 deps: object = None, max_bytes: int = MAX_JOURNAL_BYTES,
                 evals: str | Path | None = None) -> None:
        """`deps`: what the agent's tools that take a `ToolContext` get in a replay;
        `evals`: where the eval reports are (`Report.write`), the journals' directory by
        default."""
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise StudioError(f"{self.directory} is not a directory")
        if evals is not None and not Path(evals).is_dir():
            raise StudioError(f"{evals} is not a directory (the eval reports')")
        self.evals = EvalReports(Path(evals) if evals is not None else self.directory,
                                 self.directory)
        """The eval reports' pages."""
        if agent is not None:
            try:
                check_deps(agent.tools, deps)
            except TypeError as e:
                raise StudioError(f"{e} (--deps module:name gives them)") from None
        self.agent = agent
        self.deps = deps
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._timelines: OrderedDict[tuple[str, int, int], Timeline] = OrderedDict()
        self._replays: OrderedDict[tuple[str, int, int],
                                   tuple[dict[str, Json], list[dict[str, Json]]]] = OrderedDict()
        self._facts: OrderedDict[tuple[str, int, int], dict[str, Json]] = OrderedDict()
        self.playground: Playground | None = None
        """Chats with the agent from the page (`pipeline studio --agent`), when set."""
        self.approvals: ApprovalStore | None = None
        """The approval store whose audit trail the Approvals page shows (`--approvals
        URL`; else the playground's), when set."""

    def audit(self, offset: int = 0, limit: int = PAGE) -> dict[str, Json]:
        """One page of the approval store's audit records (the first `MAX_LISTED`), in
        the order they were appended."""
        store = self.approvals
        if store is None:
            return {"kept": False, "offset": 0, "limit": limit, "total": 0, "items": []}
        records = store.audit(limit=MAX_LISTED)
        page = _page([cast("dict[str, Json]", msgspec.to_builtins(r)) for r in records],
                      offset, limit)
        return {"kept": True, "truncated": len(records) == MAX_LISTED, **page}

    def _path(self, name: str) -> Path:
        if not _NAME.fullmatch(name) or name.startswith("."):
            raise NotFound(name)
        path = self.directory / f"{name}.ndjson"
        try:
            # As the listing: a regular file of the directory itself, not a symlink out.
            if not stat.S_ISREG(path.lstat().st_mode):
                raise NotFound(name)
        except FileNotFoundError:
            raise NotFound(name) from None
        return path

    def runs(self, offset: int = 0, limit: int = PAGE,
             where: RunFilter | None = None) -> dict[str, Json]:
        """One page of the directory's journals, the newest first, those `where` keeps."""
        found: list[tuple[float, str, int]] = []
        truncated = False
        with os.scandir(self.directory) as it:
            for entry in it:
                if len(found) >= MAX_SCAN:
                    truncated = True
                    break
                name = entry.name
                if (name.endswith(".ndjson") and _NAME.fullmatch(name[:-7])
                        and entry.is_file(follow_symlinks=False)):
                    st = entry.stat(follow_symlinks=False)
                    found.append((st.st_mtime, name[:-7], st.st_size))
        found.sort(key=lambda f: (-f[0], f[1]))
        names = {name for _, name, _ in found}
        rows = [self._listed(name, mtime, size) for mtime, name, size in found]
        facets: dict[str, set[str]] = {"status": set(), "agent": set(), "guard": set()}
        for r in rows:
            for key, field in (("status", "status"), ("agent", "agent")):
                if isinstance(r.get(field), str):
                    facets[key].add(cast(str, r[field]))
            facets["guard"].update(str(g) for g in cast(list[object], r.get("guards", [])))
            first = r.get("resumed_from")
            if first is not None and first not in names:
                r["resumed_from"] = None  # its first part was pruned or moved
        kept = [r for r in rows if where is None or where.keeps(r)]
        return {"offset": offset, "limit": limit, "total": len(kept), "scanned": len(rows),
                "truncated": truncated, "items": kept[offset:offset + limit],
                "facets": {k: sorted(v) for k, v in facets.items()},
                "can_replay": self.agent is not None, "can_play": self.playground is not None,
                "agent": self.agent.name if self.agent is not None else None}

    def _listed(self, name: str, mtime: float, size: int) -> dict[str, Json]:
        row: dict[str, Json] = {"name": name, "modified": mtime, "bytes": size}
        key = (str(self.directory / f"{name}.ndjson"), int(mtime * 1e9), size)
        with self._lock:
            facts = self._facts.get(key)
        if facts is None:
            try:
                facts = {k: shown(v) for k, v in self._read_facts(name).items()}
            except (OSError, JournalError) as e:
                facts = {"problem": shown(str(e))}
            with self._lock:
                self._facts[key] = facts
                while len(self._facts) > MAX_SCAN:
                    self._facts.popitem(last=False)
        row.update(facts)
        return row

    def _read_facts(self, name: str) -> dict[str, Json]:
        """What the list shows of one journal; its header alone when the whole is over
        `max_bytes`."""
        path = self.directory / f"{name}.ndjson"
        with path.open("rb") as f:
            first = f.readline(MAX_HEADER_BYTES + 1)
        if len(first) > MAX_HEADER_BYTES:
            raise JournalError("its header (the run's input) is over 1 MiB: open it to read")
        header = Journal.from_ndjson(first).header
        facts: dict[str, Json] = {"input": _input_preview(header)}
        try:
            facts.update(run_facts(Journal.read(path, max_bytes=self.max_bytes)))
        except JournalError:  # too large to read whole for the list: what its header says
            facts.update({"run_id": header.run_id, "agent": header.agent.name,
                          "model": header.agent.model, "started_at": header.at,
                          "thread_id": header.thread_id, "user": header.resource_id,
                          "status": "unread", "guards": []})
        return facts

    def timeline(self, name: str) -> Timeline:
        path = self._path(name)
        key = _key(path)
        with self._lock:
            cached = self._timelines.get(key)
            if cached is not None:
                self._timelines.move_to_end(key)
                return cached
        made = timeline(Journal.read(path, max_bytes=self.max_bytes))
        with self._lock:
            self._timelines[key] = made
            while len(self._timelines) > CACHED:
                self._timelines.popitem(last=False)
        return made

    def run(self, name: str, offset: int = 0, limit: int = PAGE,
            kinds: frozenset[str] | None = None) -> dict[str, Json]:
        """One page of a run's timeline (only the rows of `kinds`, when given), with the
        journal of the part a resumed run went on from and those that went on from it."""
        t = self.timeline(name)
        rows = t.rows if kinds is None else tuple(r for r in t.rows if r["kind"] in kinds)
        first = name.partition(".resumed-")[0]
        resumed_from = (first if t.journal.header.resume is not None and first != name
                        and (self.directory / f"{first}.ndjson").is_file() else None)
        continued = sorted(
            p.name[:-7] for p in self.directory.glob(f"{glob_escape(name)}.resumed-*.ndjson")
            if _NAME.fullmatch(p.name[:-7]))[:MAX_ITEMS]
        return {"name": name, "summary": t.summary, "page": _page(rows, offset, limit),
                "can_replay": self.agent is not None, "resumed_from": resumed_from,
                "continued_in": cast(Json, continued)}

    def replay(self, name: str, offset: int = 0, limit: int = PAGE) -> dict[str, Json]:
        """The run replayed against the studio's agent, beside the recording."""
        if self.agent is None:
            raise StudioError("no agent to replay with: start the studio with --agent")
        path = self._path(name)
        key = _key(path)
        with self._lock:
            cached = self._replays.get(key)
        if cached is None:
            t = self.timeline(name)
            journal = t.journal
            agent, deps = self.agent, self.deps
            try:
                run = anyio.run(lambda: replay_async(journal, agent, deps=deps))
            except Exception as e:  # the agent's own code failed: say so on the page
                return {"name": name, "error": shown(f"{type(e).__name__}: {e}")}
            cached = compare(journal, run, journal.header.agent.processors)
            with self._lock:
                self._replays[key] = cached
                while len(self._replays) > CACHED:
                    self._replays.popitem(last=False)
        summary, rows = cached
        return {"name": name, "agent": self.agent.name, "summary": summary,
                "page": _page(rows, offset, limit)}


def _key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return str(path), st.st_mtime_ns, st.st_size


def _input_preview(h: RunStarted) -> str:
    for m in reversed(h.messages.messages):
        if m.role == "user":
            return " ".join(getattr(p, "text", "") for p in m.parts)[:200]
    return ""


# --- HTTP ----------------------------------------------------------------------------------

_STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/studio.js": ("studio.js", "text/javascript; charset=utf-8"),
    "/static/studio.css": ("studio.css", "text/css; charset=utf-8"),
}

_HEADERS = (
    ("Content-Security-Policy",
     "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
     "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
)


def _static(name: str) -> bytes:
    return (files("interpreters.cli") / "studio_static" / name).read_bytes()


def _int(query: dict[str, list[str]], key: str, default: int, high: int) -> int:
    raw = query.get(key, [str(default)])[0]
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"{key} must be a whole number, got {raw[:40]!r}") from None
    if not 0 <= n <= high:
        raise ValueError(f"{key} must be between 0 and {high}, got {n}")
    return n


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
"""The host names the studio answers to by default."""
_HOST_NAME = re.compile(r"[a-z0-9]([a-z0-9.-]{0,252}[a-z0-9])?|\[[0-9a-f:.]{2,45}\]")


def host_names(extra: tuple[str, ...] = ()) -> frozenset[str]:
    """The loopback names and `extra` (a name, an IPv4 address or a bracketed IPv6
    one), lower case; StudioError for anything else."""
    names = set(LOOPBACK_NAMES)
    for name in extra:
        if not isinstance(name, str) or not _HOST_NAME.fullmatch(name.lower()):
            raise StudioError(f"not a host name: {name!r} (give it without scheme or port)")
        names.add(name.lower())
    return frozenset(names)


def host_allowed(host: str | None, names: frozenset[str], port: int) -> bool:
    """Whether a request's `Host` header is one of `names`, with the studio's port (no
    port: 80)."""
    if not host:
        return False
    name, colon, given = host.lower().rpartition(":")
    if not colon or name.endswith(":") or (name.startswith("[") != name.endswith("]")):
        name, given = host.lower(), "80"  # no port ("localhost", "[::1]")
    return name in names and given.isdigit() and int(given) == port


def _handler(studio: Studio, names: frozenset[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = REQUEST_TIMEOUT
        server_version = "pipeline-studio"
        sys_version = ""

        def log_message(self, format: str, *args: object) -> None:  # quiet by default
            pass

        def _send(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in _HEADERS:
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, status: int, value: Json) -> None:
            # `<`, `>` and `&` only occur inside JSON strings: escaped, no browser that
            # sniffs the body as HTML finds markup in it.
            body = (json.dumps(value, ensure_ascii=True).replace("<", "\\u003c")
                    .replace(">", "\\u003e").replace("&", "\\u0026").encode())
            self._send(status, body, "application/json")

        def do_HEAD(self) -> None:
            self.do_GET()

        def _misdirected(self) -> bool:
            """Refuse a request for a host name that is not the studio's: a page of
            another site whose name was made to resolve to loopback (DNS rebinding)."""
            address = self.server.server_address
            port = int(address[1]) if isinstance(address, tuple) else -1
            if host_allowed(self.headers.get("Host"), names, port):
                return False
            self._json(HTTPStatus.MISDIRECTED_REQUEST, {"error": (
                f"the studio answers to {', '.join(sorted(names))} with its port, not "
                f"{shown(self.headers.get('Host', ''))!r} (--allow-host NAME for more)")})
            return True

        def do_GET(self) -> None:
            if self._misdirected():
                return
            url = urlsplit(self.path)
            path = url.path
            if path in _STATIC:
                name, ctype = _STATIC[path]
                self._send(HTTPStatus.OK, _static(name), ctype)
                return
            try:
                query = parse_qs(url.query, max_num_fields=16)
                offset = _int(query, "offset", 0, 10**9)
                limit = _int(query, "limit", PAGE, MAX_PAGE) or PAGE
                self._json(HTTPStatus.OK, self._api(path, query, offset, limit))
            except NotFound:
                self._json(HTTPStatus.NOT_FOUND, {"error": "no such run"})
            except NoSuchReport:
                self._json(HTTPStatus.NOT_FOUND, {"error": "no such eval report"})
            except (ValueError, JournalError) as e:
                self._json(HTTPStatus.BAD_REQUEST, {"error": shown(str(e))})
            except OSError as e:
                self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": shown(str(e))})

        def _api(self, path: str, query: dict[str, list[str]], offset: int,
                 limit: int) -> Json:
            if path == "/api/runs":
                return studio.runs(offset, limit, RunFilter.of(query))
            if path == "/api/approvals":
                return studio.audit(offset, limit)
            parts = path.split("/")
            if len(parts) == 4 and parts[:3] == ["", "api", "runs"]:
                kinds = query.get("kinds")
                only = frozenset(kinds[0].split(",")) if kinds else None
                return studio.run(unquote(parts[3]), offset, limit, only)
            if len(parts) == 5 and parts[:3] == ["", "api", "runs"] and parts[4] == "replay":
                return studio.replay(unquote(parts[3]), offset, limit)
            if path == "/api/evals":
                return studio.evals.listing(offset, limit)
            if len(parts) == 4 and parts[:3] == ["", "api", "evals"]:
                return studio.evals.report(unquote(parts[3]), offset, limit)
            if len(parts) == 6 and parts[:3] == ["", "api", "evals"] and parts[4] == "diff":
                return studio.evals.diff(unquote(parts[3]), unquote(parts[5]), offset, limit)
            raise NotFound(path)

        def _refuse(self) -> None:
            if self._misdirected():
                return
            self._json(HTTPStatus.METHOD_NOT_ALLOWED, {"error": "the studio is read-only"})

        do_PUT = do_DELETE = do_PATCH = _refuse

        def do_POST(self) -> None:
            """The playground (`/api/play`, `/api/play/decide`): JSON from the studio's
            own page only; everything else is read-only."""
            if self._misdirected():
                return
            path = urlsplit(self.path).path
            play = studio.playground
            if path not in ("/api/play", "/api/play/decide") or play is None:
                self._json(HTTPStatus.METHOD_NOT_ALLOWED, {"error": (
                    "the studio is read-only" if play is None or not path.startswith("/api/")
                    else "no such endpoint")})
                return
            refused = cross_site({k.lower(): v for k, v in self.headers.items()})
            if refused is not None:
                self._json(refused[0], {"error": refused[1]})
                return
            try:
                body = self._body()
                if path == "/api/play":
                    chat = msgspec.json.decode(body, type=PlayRequest)
                    self._stream(lambda write: play.chat(chat, write))
                else:
                    decided = msgspec.json.decode(body, type=DecideRequest)
                    resumed = play.resumption(decided)  # refused before any byte is sent
                    self._stream(lambda write: play.resume(decided.chat, resumed, write))
            except UnknownRun as e:
                self._json(HTTPStatus.NOT_FOUND, {"error": shown(str(e))})
            except RunNotSuspended as e:
                self._json(HTTPStatus.CONFLICT, {"error": shown(str(e))})
            except (ApprovalError, ValueError, msgspec.DecodeError) as e:
                self._json(HTTPStatus.UNPROCESSABLE_ENTITY, {"error": shown(str(e))})

        def _body(self) -> bytes:
            raw = self.headers.get("Content-Length", "")
            if not raw.isdigit() or int(raw) > MAX_BODY_BYTES:
                raise ValueError(f"a JSON body of at most {MAX_BODY_BYTES} bytes, with its "
                                 "Content-Length")
            return self.rfile.read(int(raw))

        def _stream(self, run: Callable[[Callable[[bytes], None]], None]) -> None:
            """A response of server-sent events, written as `run` gives them; the
            connection ends it."""
            started = False

            def write(frame: bytes) -> None:
                nonlocal started
                if not started:
                    started = True
                    self.send_response(HTTPStatus.OK)
                    for k, v in UI_STREAM_HEADERS:
                        self.send_header(k, v)
                    for k, v in _HEADERS:
                        if k != "Cache-Control":
                            self.send_header(k, v)
                    self.send_header("Connection", "close")
                    self.end_headers()
                self.wfile.write(frame)
                self.wfile.flush()

            self.close_connection = True
            try:
                run(write)
            except Exception as e:
                if not started:
                    raise  # answered as JSON
                # The page shows it as the stream's error part (nothing else can be sent).
                text = shown(f"{type(e).__name__}: {e}")
                write(sse_frame(UIError(str(text))) + SSE_DONE)

    return Handler


MAX_BODY_BYTES = 64 * 1024
"""A playground request's body at most."""
UI_STREAM_HEADERS = tuple((k.decode(), v.decode()) for k, v in UI_MESSAGE_STREAM_HEADERS)


def cross_site(headers: Mapping[str, str]) -> tuple[int, str] | None:
    """Why a POST is refused, if it is (`headers` by lower-case name): a browser says it
    comes from another site (`Sec-Fetch-Site`, an `Origin` that is not the `Host`), or
    its body is not JSON. A page elsewhere may send a form or `text/plain` without
    asking; JSON needs a CORS preflight, which the studio never grants (as
    examples/asgi_stream.py)."""
    site = headers.get("sec-fetch-site")
    origin = headers.get("origin")
    host = headers.get("host")
    if site not in (None, "same-origin", "none") or (
            origin is not None and origin.partition("://")[2] != host):
        return HTTPStatus.FORBIDDEN, "a request from another site"
    ctype = headers.get("content-type") or ""
    if ctype.partition(";")[0].strip().lower() != "application/json":
        return HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "send JSON (content-type: application/json)"
    return None


def check_host(host: str, allow_remote: bool) -> None:
    """Refuse to bind beyond loopback unless `allow_remote`."""
    if allow_remote or host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise StudioError(
            f"refusing to serve on {host!r}: the studio shows recorded runs (model output, "
            "tool results) and binds to loopback only; pass --allow-remote to serve beyond it"
        )


def _own_address(host: str) -> tuple[str, ...]:
    """The address the studio serves on, as a `Host` names it (an IP address, not a
    wildcard one: a name or 0.0.0.0 is given with --allow-host)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return ()
    if ip.is_unspecified:
        return ()
    return (f"[{ip}]",) if ip.version == 6 else (str(ip),)


class StudioServer:
    """The studio's HTTP server on a thread: `with StudioServer(studio) as s: s.url`."""

    def __init__(self, studio: Studio, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                 *, allow_remote: bool = False, allowed_hosts: tuple[str, ...] = ()) -> None:
        """`allowed_hosts`: the names (or addresses) the studio answers to besides
        127.0.0.1, localhost, [::1] and the address it serves on (`host`)."""
        check_host(host, allow_remote)
        names = host_names((*allowed_hosts, *_own_address(host)))
        self.httpd = ThreadingHTTPServer((host, port), _handler(studio, names))
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        if ":" in name:
            name = f"[{name}]"
        return f"http://{name}:{port}/"

    def start(self) -> StudioServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True,
                                        name="pipeline-studio")
        self._thread.start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> StudioServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def serve(directory: str, agent_spec: str | None, host: str, port: int, allow_remote: bool,
          *, deps_spec: str | None = None, allowed_hosts: tuple[str, ...] = (),
          model_spec: str | None = None, evals: str | None = None,
          approvals_url: str | None = None,
          say: Callable[[str], None] = _stderr) -> int:
    """`pipeline studio`: serve until interrupted; exit code 2 for a bad setting. With an
    agent, the page's playground chats with it (on `model_spec`'s model, when given, else
    on the agent's own provider), recording its runs to `directory` (made if missing)."""
    from interpreters.cli.replay import AgentNotFound, escaped, load_agent, load_value

    try:
        agent = load_agent(agent_spec) if agent_spec is not None else None
        deps = load_value(deps_spec, "--deps") if deps_spec is not None else None
        model = load_playground_model(model_spec) if model_spec is not None else None
        if model is not None and agent is None:
            raise StudioError("--model is the playground's: give the agent too (--agent)")
        if agent is not None:
            Path(directory).mkdir(parents=True, exist_ok=True)
        studio = Studio(directory, agent, deps=deps, evals=evals)
        if agent is not None:
            studio.playground = Playground(agent, model=model, directory=Path(directory),
                                           deps=deps)
            studio.approvals = studio.playground.approvals.store
        if approvals_url is not None:
            studio.approvals = open_approval_store(approvals_url)
        server = StudioServer(studio, host, port, allow_remote=allow_remote,
                              allowed_hosts=allowed_hosts)
    except (AgentNotFound, StudioError, OSError, MemoryStoreError) as e:
        say(f"pipeline studio: {escaped(str(e))}")
        return 2
    play = f"; the playground chats with {agent.name!r}" if agent is not None else ""
    say(f"pipeline studio: serving {escaped(directory)} on {server.url}{escaped(play)} "
        "(Ctrl-C stops)")
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
    return 0


def load_playground_model(spec: str) -> AsyncProvider:
    """The model `module:name` names for the playground (a `ScriptedModel`, or any
    async provider: an object with `astream`; a function of no arguments returning one)."""
    from interpreters.cli.replay import AgentNotFound, load_value

    value = load_value(spec, "--model")
    if not callable(getattr(value, "astream", None)):
        raise AgentNotFound(f"{spec!r} is a {type(value).__name__}, not a model (an object "
                            "with astream, such as a ScriptedModel)")
    return cast(AsyncProvider, value)


__all__ = [
    "DEFAULT_PORT", "LOOPBACK_NAMES", "MAX_PAGE", "MAX_TEXT", "NotFound", "RunFilter",
    "Studio", "StudioError", "StudioServer", "Timeline", "check_host", "compare",
    "cross_site", "host_allowed", "host_names", "load_playground_model", "run_facts",
    "serve", "shown", "timeline",
]
