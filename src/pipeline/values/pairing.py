"""Tool calls and their results, kept together in what is sent to a provider.

Every provider rejects a history in which a tool call has no result, a result has no
call, or a result is not in the tool messages right after its call's message (OpenAI:
"An assistant message with 'tool_calls' must be followed by tool messages..."; Anthropic:
"tool_use ids were found without tool_result blocks immediately after"). Processors trim,
cancel and summarise histories, so the shape is restored before every request, and
history trimming asks `cut_points` where it may cut.

**Paired** (`is_paired`) means: tool calls are only in assistant messages and their ids
are unique; every call has exactly one result with its id and every result has a call;
and each result is in a tool message in the unbroken run of tool messages directly
after its call's message.

**The repair policy** (`repair_pairing`), parts taken in order (message, then part):

1. A tool call outside an assistant message is dropped (no provider can encode it).
2. Results are matched to calls with the same id. A result goes to a call before it
   that has no result yet: the closest such message, the first such call in it. A
   result with no call before it goes, after that, to the first call still without a
   result. A result left over is dropped: an *orphan* when no call has its id, else a
   *duplicate* (so of two results after a call, the first is kept).
3. A call id that repeats (some servers number calls ``call_0`` per response or send
   empty ids) is kept by its first call; each later call with it, and its result, get
   a fresh id ``{id}_{n}`` (n = 2, 3, ..., skipping ids in use).
4. A matched result not in the tool run right after its call's message (placed before
   the call, in a non-tool message, or after another message) is moved; a call with no
   result gets a synthetic error result (`MISSING_RESULT`, ``is_error=True``). Both go,
   in call order, into one new tool message at the end of that tool run (id
   ``{call message id}:results``, made unique).
5. Everything else keeps its order; a message left with no parts is dropped (messages
   that came in empty stay).

The result is paired; a paired history comes back unchanged, so repair is idempotent.
It runs in linear time. The parts of a tool the provider ran (`ServerToolCallPart`,
`ServerToolResultPart`) are neither calls nor results here: the server answered them in
their own assistant message, no tool message is owed, and they stay where they are.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from itertools import chain
from operator import attrgetter
from typing import TypeVar, get_args

import msgspec

from pipeline.values.ids import unique_id
from pipeline.values.messages import Message, MessageList, Part, ToolCallPart, ToolResultPart

__all__ = ["MISSING_RESULT", "PairedHistory", "cut_points", "is_paired", "repair_pairing"]

MISSING_RESULT = (
    "Error: this tool call has no result (the run was interrupted or the history was "
    "trimmed before the tool finished)."
)
"""Content of the synthetic error result given to a call that has none."""

_Pos = tuple[int, int]
"""(message index, part index)."""


def _run_ends(messages: tuple[Message, ...]) -> list[int]:
    """ends[i]: the last index of the run of tool messages right after i (i if none)."""
    ends = list(range(len(messages)))
    for i in range(len(messages) - 2, -1, -1):
        if messages[i + 1].role == "tool":
            ends[i] = ends[i + 1]
    return ends


def _in_run(call_msg: int, result_msg: int, messages: tuple[Message, ...], ends: list[int]) -> bool:
    return messages[result_msg].role == "tool" and call_msg < result_msg <= ends[call_msg]


def is_paired(messages: tuple[Message, ...]) -> bool:
    """Whether `messages` is paired (see the module docstring); linear time."""
    calls: dict[str, int] = {}
    for i, m in enumerate(messages):
        for p in m.parts:
            if isinstance(p, ToolCallPart):
                if m.role != "assistant" or p.tool_call_id in calls:
                    return False
                calls[p.tool_call_id] = i
    ends = _run_ends(messages)
    answered: set[str] = set()
    for t, m in enumerate(messages):
        for p in m.parts:
            if isinstance(p, ToolResultPart):
                c = calls.get(p.tool_call_id)
                if c is None or p.tool_call_id in answered or not _in_run(c, t, messages, ends):
                    return False
                answered.add(p.tool_call_id)
    return len(answered) == len(calls)


_OTHER_PARTS: frozenset[type] = frozenset(get_args(Part)) - {ToolCallPart, ToolResultPart}
"""The parts pairing leaves where they are: every kind but calls and results."""


def _part_types(messages: tuple[Message, ...]) -> set[type]:
    return set(map(type, chain.from_iterable(map(_parts_of, messages))))


_parts_of = attrgetter("parts")


def _extends_paired(
    messages: tuple[Message, ...],
    start: int,
    ids: set[str],
    _call: type[ToolCallPart] = ToolCallPart,  # locals: this runs before every model call
    _result: type[ToolResultPart] = ToolResultPart,
    _other: frozenset[type] = _OTHER_PARTS,
) -> bool:
    """Whether `messages[start:]` is paired with call ids not in `ids` (adding its own).

    One pass: the calls of an assistant message are open until the run of tool messages
    right after it has answered each once; any other message closes the run. A part of
    a type other than the library's own answers False (the caller then repairs, which
    decides by isinstance). `ids` is left partly filled when this answers False.
    """
    new = messages[start:] if start else messages
    if len(new) > 16 and _part_types(new) <= _other:
        return True  # no tool part at all (a long prior chat): one pass in C
    open_: set[str] | None = None
    for m in new:
        role = m.role
        if role != "tool":
            if open_:
                return False  # the run after the calls ended before all were answered
            for p in m.parts:
                t = type(p)
                if t is _call and role == "assistant":
                    assert isinstance(p, ToolCallPart)  # exact type: no metaclass call
                    cid = p.tool_call_id
                    if cid in ids:
                        return False
                    ids.add(cid)
                    if open_ is None:
                        open_ = {cid}
                    else:
                        open_.add(cid)
                elif t not in _other:
                    return False  # a result outside a tool message, a call outside an
                    # assistant one, or a part type repair must judge
        else:
            for p in m.parts:
                if type(p) is not _result or not open_:
                    return False
                assert isinstance(p, ToolResultPart)
                rid = p.tool_call_id
                if rid not in open_:
                    return False
                open_.discard(rid)
    return not open_


_NO_IDS: frozenset[str] = frozenset()
"""No tool-call ids yet: shared, so a run that has made no call holds no set of its own."""


class PairedHistory:
    """Pairing repair before every model call, at the cost of the messages added since
    the last one: the history a run sends grows by `MessageList.add`, so the part known
    to be paired is not looked at again.

    `messages(ml)` is `repair_pairing(ml.messages)`. A paired history is a paired prefix
    followed by a paired suffix whose call ids are new (a result in the suffix cannot
    answer a call of the prefix: the prefix's calls are answered, and a second result is
    a duplicate); so only the suffix is checked when `ml` extends the list last checked.
    """

    __slots__ = ("_ids", "_ml")

    def __init__(self) -> None:
        self._ml: MessageList | None = None
        """The last list found paired; `_ids` are its tool-call ids."""
        self._ids: set[str] | frozenset[str] = _NO_IDS

    def known_paired(self, ml: MessageList) -> None:
        """`ml` has no tool call or result (its caller read every part: the loop's input
        check), so it is paired: the next `messages` checks only what comes after it."""
        self._ml, self._ids = ml, _NO_IDS

    def turn(self, before: MessageList, after: MessageList, ids: tuple[str, ...]) -> None:
        """`after` is `before` plus the loop's own turn: its assistant response, whose tool
        calls have the ids `ids` (its other parts of the library's own kinds, none a
        result), then the tool message answering each of those calls once, in order (its
        other parts data parts). When `before` is the list last found paired and `ids` are
        new to it (each once), `after` is paired: the next `messages` need not look at it.

        For the caller that made the two messages (the loop's `tool_step.run_tools`) and
        so knows their shape without a scan.
        """
        if self._ml is not before:
            return
        known = self._ids
        if len(ids) == 1:
            if ids[0] in known:
                return
        elif len(set(ids)) != len(ids) or not known.isdisjoint(ids):
            return
        if isinstance(known, set):
            known.update(ids)
        else:
            self._ids = set(ids)
        self._ml = after

    def messages(self, ml: MessageList) -> tuple[Message, ...]:
        """`ml`'s messages, repaired if they are not paired (see `repair_pairing`)."""
        msgs = ml.messages
        last = self._ml
        if last is ml:
            return msgs
        ids: set[str] | frozenset[str] | None  # (None: checked from the start)
        if last is None:
            start, ids = 0, None
        else:
            found = ml.extends(last)
            if found is None:
                start, ids = 0, None
            else:
                start, ids = found, self._ids
        if start == len(msgs):
            self._ml = ml
            if ids is None:
                self._ids = _NO_IDS
            return msgs
        if not isinstance(ids, set):
            ids = self._ids = set() if ids is None else set(ids)
        if _extends_paired(msgs, start, ids):
            self._ml = ml
            return msgs
        self._ml, self._ids = None, _NO_IDS  # checked from the start next
        return repair_pairing(msgs)


class _Call:
    """One tool call in an assistant message, as repair sees it."""

    __slots__ = ("in_place", "msg", "new_id", "part", "result", "result_msg")

    def __init__(self, msg: int, part: ToolCallPart) -> None:
        self.msg = msg
        self.part = part
        self.new_id = part.tool_call_id
        self.result: ToolResultPart | None = None
        self.result_msg = -1
        self.in_place = False


def _match(
    messages: tuple[Message, ...],
) -> tuple[dict[_Pos, _Call], dict[_Pos, _Call]]:
    """Policy steps 1-2: the kept calls and the matched results, by position."""
    calls: dict[_Pos, _Call] = {}
    by_id: dict[str, list[_Call]] = {}
    # per id, calls before the scan point without a result, grouped by message (closest last)
    open_: dict[str, list[deque[_Call]]] = {}
    deferred: list[tuple[_Pos, ToolResultPart]] = []
    answers: dict[_Pos, _Call] = {}
    for i, m in enumerate(messages):
        for j, p in enumerate(m.parts):
            if isinstance(p, ToolCallPart) and m.role == "assistant":
                call = _Call(i, p)
                calls[(i, j)] = call
                by_id.setdefault(p.tool_call_id, []).append(call)
                groups = open_.setdefault(p.tool_call_id, [])
                if groups and groups[-1][0].msg == i:
                    groups[-1].append(call)
                else:
                    groups.append(deque((call,)))
            elif isinstance(p, ToolResultPart):
                rid = p.tool_call_id
                if rid not in by_id:
                    deferred.append(((i, j), p))
                elif groups := open_[rid]:
                    call = groups[-1].popleft()
                    if not groups[-1]:
                        groups.pop()
                    call.result, call.result_msg = p, i
                    answers[(i, j)] = call
                # else: every earlier call with this id is answered: a duplicate
    # results before every call with their id: to the first call still unanswered
    cursor: dict[str, int] = {}
    for pos, p in deferred:
        same = by_id.get(p.tool_call_id, [])
        k = cursor.get(p.tool_call_id, 0)
        while k < len(same) and same[k].result is not None:
            k += 1
        cursor[p.tool_call_id] = k
        if k < len(same):
            same[k].result, same[k].result_msg = p, pos[0]
            answers[pos] = same[k]
    return calls, answers


def _fresh_ids(messages: tuple[Message, ...], calls: Iterable[_Call]) -> None:
    """Policy step 3: later calls with a repeated id get `{id}_{n}`."""
    used = {
        p.tool_call_id
        for m in messages
        for p in m.parts
        if isinstance(p, ToolCallPart | ToolResultPart)
    }
    count: dict[str, int] = {}
    for call in calls:
        old = call.part.tool_call_id
        n = count.get(old, 0) + 1
        count[old] = n
        if n == 1:
            continue
        while f"{old}_{n}" in used:
            n += 1
        call.new_id = f"{old}_{n}"
        used.add(call.new_id)


def repair_pairing(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """`messages` made paired by the policy in the module docstring; idempotent."""
    if not any(isinstance(p, ToolCallPart | ToolResultPart) for m in messages for p in m.parts):
        return messages
    calls, answers = _match(messages)
    _fresh_ids(messages, calls.values())
    ends = _run_ends(messages)
    # per tool-run end: the call message whose run it is, and the results to add there
    inserts: dict[int, tuple[int, list[ToolResultPart]]] = {}
    for call in calls.values():
        r = call.result
        if r is not None and _in_run(call.msg, call.result_msg, messages, ends):
            call.in_place = True
            continue
        if r is None:
            r = ToolResultPart(
                call.part.tool_call_id, call.part.tool_name, MISSING_RESULT, is_error=True
            )
        inserts.setdefault(ends[call.msg], (call.msg, []))[1].append(_renamed(r, call.new_id))

    msg_ids = {m.id for m in messages}
    out: list[Message] = []
    for i, m in enumerate(messages):
        parts: list[Part] = []
        for j, p in enumerate(m.parts):
            if isinstance(p, ToolCallPart):
                kept = calls.get((i, j))
                if kept is not None:
                    parts.append(_renamed(p, kept.new_id))
            elif isinstance(p, ToolResultPart):
                owner = answers.get((i, j))
                if owner is not None and owner.in_place:
                    parts.append(_renamed(p, owner.new_id))
            else:
                parts.append(p)
        if parts or not m.parts:
            out.append(m if _same(parts, m.parts) else m.with_parts(parts))
        if i in inserts:
            # one run ends here, so these come from one call message
            src_i, results = inserts[i]
            src = messages[src_i]
            out.append(
                Message(
                    id=unique_id(f"{src.id}:results", msg_ids, "-"),
                    role="tool",
                    parts=tuple(results),
                    created_at=src.created_at,
                    thread_id=src.thread_id,
                    resource_id=src.resource_id,
                )
            )
    # nothing changed: hand back the same tuple (the common case for every request)
    return messages if _same(out, messages) else tuple(out)


_P = TypeVar("_P", ToolCallPart, ToolResultPart)


def _renamed(p: _P, new_id: str) -> _P:
    return p if p.tool_call_id == new_id else msgspec.structs.replace(p, tool_call_id=new_id)


def _same(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def cut_points(messages: tuple[Message, ...]) -> tuple[int, ...]:
    """Indices i (0..len, ascending) where `messages[:i]` / `messages[i:]` separates no
    tool call or result from another part with the same id.

    On a paired history these are exactly the i where both halves are paired, so a
    trimmer that keeps `messages[i:]` never sends half a tool exchange. On an unpaired
    one the answer is conservative; repair first for the most cut points.
    """
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, m in enumerate(messages):
        for p in m.parts:
            if isinstance(p, ToolCallPart | ToolResultPart):
                first.setdefault(p.tool_call_id, i)
                last[p.tool_call_id] = i
    # +1 at first+1, -1 at last+1: cut i is blocked while some span is open
    delta = [0] * (len(messages) + 2)
    for k, f in first.items():
        if last[k] > f:
            delta[f + 1] += 1
            delta[last[k] + 1] -= 1
    out: list[int] = []
    open_spans = 0
    for i in range(len(messages) + 1):
        open_spans += delta[i]
        if open_spans == 0:
            out.append(i)
    return tuple(out)
