"""Strategies for tool-call histories and ids, an independent pairing oracle, and a
compact rendering of histories for readable counterexamples.

Histories come two ways: a well-formed conversation damaged by the things processors,
cancellations and trimmers do (drop, duplicate, move, trim, orphan, reuse ids), and
messages of any role holding any parts. Ids come from a small pool first (so shrinking
lands on ``"a"`` and collisions are common), then arbitrary unicode.
"""

from __future__ import annotations

import string

from hypothesis import strategies as st

from pipeline.values.messages import Message, Part, Role, TextPart, ToolCallPart, ToolResultPart

SAFE = string.ascii_letters + string.digits + "_-"

# small pool: frequent collisions, near-collisions ("a:b"/"a.b"/"a_b"), the empty id, and
# ids shaped like repair's fresh ones ("a_2", "a_3") beside a repeated "a"
POOL_IDS = ("a", "b", "c", "", "a:b", "a.b", "a_b", "call_0", "a_2", "a_3")
NAMES = ("f", "g", "get.weather", "")

pool_ids = st.sampled_from(POOL_IDS)
any_ids = st.one_of(pool_ids, st.text(max_size=6))
tool_names = st.one_of(st.sampled_from(NAMES), st.text(max_size=6))
ROLES: tuple[Role, ...] = ("user", "assistant", "tool", "system")


def call(i: str, name: str = "f") -> ToolCallPart:
    return ToolCallPart(i, name, {})


def result(i: str, value: object = "ok", name: str = "f", is_error: bool = False) -> ToolResultPart:
    return ToolResultPart(i, name, value, is_error)


def msg(mid: str, role: Role, *parts: Part) -> Message:
    return Message(id=mid, role=role, parts=parts)


# --- strategies -------------------------------------------------------------------------


@st.composite
def raw_parts(draw: st.DrawFn, ids: st.SearchStrategy[str] = any_ids) -> Part:
    kind = draw(st.sampled_from(("call", "result", "text")))
    if kind == "text":
        return TextPart(draw(st.sampled_from(("hi", "ok"))))
    i = draw(ids)
    name = draw(tool_names)
    if kind == "call":
        return ToolCallPart(i, name, {"n": draw(st.integers(0, 3))})
    return ToolResultPart(i, name, draw(st.integers(0, 3)), draw(st.booleans()))


@st.composite
def raw_histories(draw: st.DrawFn) -> tuple[Message, ...]:
    """Messages of any role with any parts: calls in user messages, results anywhere."""
    n = draw(st.integers(0, 8))
    return tuple(
        Message(
            id=f"r{k}",
            role=draw(st.sampled_from(ROLES)),
            parts=tuple(draw(st.lists(raw_parts(), max_size=3))),
        )
        for k in range(n)
    )


@st.composite
def well_formed(
    draw: st.DrawFn, *, reuse_ids: bool | None = None, shuffle: bool = True
) -> tuple[Message, ...]:
    """A paired conversation: user turns, assistant calls, their results in one or
    more tool messages (in any order unless not `shuffle`), answers. With `reuse_ids`
    the calls of every turn are numbered ``call_0...`` like some servers do (ids repeat
    across turns). A call's args and its result's value both name its id."""
    reuse = draw(st.booleans()) if reuse_ids is None else reuse_ids
    out: list[Message] = []
    fresh = 0
    for turn in range(draw(st.integers(0, 4))):
        out.append(msg(f"u{turn}", "user", TextPart("q")))
        for step in range(draw(st.integers(0, 2))):
            k = draw(st.integers(1, 3))
            if reuse:
                ids = [f"call_{j}" for j in range(k)]
            else:
                ids = [f"{draw(pool_ids)}#{fresh + j}" for j in range(k)]
                fresh += k
            names = [draw(st.sampled_from(NAMES)) for _ in ids]
            mid = f"a{turn}.{step}"
            out.append(
                msg(
                    mid,
                    "assistant",
                    *(ToolCallPart(i, n, {"id": i}) for i, n in zip(ids, names, strict=True)),
                )
            )
            results = [result(i, f"r:{i}", n) for i, n in zip(ids, names, strict=True)]
            if shuffle:
                results = draw(st.permutations(results))
            if draw(st.booleans()):
                out.append(msg(f"t{turn}.{step}", "tool", *results))
            else:
                out.extend(msg(f"t{turn}.{step}.{j}", "tool", r) for j, r in enumerate(results))
        if draw(st.booleans()):
            out.append(msg(f"a{turn}", "assistant", TextPart("answer")))
    return tuple(out)


@st.composite
def damaged(draw: st.DrawFn) -> tuple[Message, ...]:
    """A well-formed history after a few damaging edits."""
    h = list(draw(well_formed()))
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(("drop", "dup", "move", "trim", "drop_part", "insert")))
        if op == "insert":
            at = draw(st.integers(0, len(h)))
            role = draw(st.sampled_from(ROLES))
            h.insert(
                at,
                Message(
                    id=f"x{at}", role=role, parts=tuple(draw(st.lists(raw_parts(), max_size=2)))
                ),
            )
            continue
        if not h:
            continue
        k = draw(st.integers(0, len(h) - 1))
        if op == "drop":
            del h[k]
        elif op == "dup":
            h.insert(draw(st.integers(0, len(h))), h[k])
        elif op == "move":
            m = h.pop(k)
            h.insert(draw(st.integers(0, len(h))), m)
        elif op == "trim":
            h = h[k:] if draw(st.booleans()) else h[:k]
        elif h[k].parts:
            p = draw(st.integers(0, len(h[k].parts) - 1))
            h[k] = h[k].with_parts(h[k].parts[:p] + h[k].parts[p + 1 :])
    return tuple(h)


histories = st.one_of(damaged(), raw_histories())
"""Arbitrary histories: mostly realistic damage, plus pure noise."""


# --- oracle and rendering -------------------------------------------------------------


def pairing_problems(messages: tuple[Message, ...]) -> list[str]:
    """Why `messages` is not paired, checked the slow, obvious way (empty: paired).

    Independent of `pipeline.values.pairing`, so it can judge `is_paired` too.
    """
    problems: list[str] = []
    calls = [(i, p) for i, m in enumerate(messages) for p in m.parts if isinstance(p, ToolCallPart)]
    results = [
        (i, p) for i, m in enumerate(messages) for p in m.parts if isinstance(p, ToolResultPart)
    ]
    for i, c in calls:
        if messages[i].role != "assistant":
            problems.append(f"call {c.tool_call_id!r} in a {messages[i].role} message #{i}")
        same_calls = [j for j, d in calls if d.tool_call_id == c.tool_call_id]
        if len(same_calls) > 1:
            problems.append(f"call id {c.tool_call_id!r} used by {len(same_calls)} calls")
        mine = [t for t, r in results if r.tool_call_id == c.tool_call_id]
        if len(mine) != 1:
            problems.append(f"call {c.tool_call_id!r} (#{i}) has {len(mine)} results")
        for t in mine:
            between = messages[i + 1 : t + 1]
            if t <= i or any(m.role != "tool" for m in between):
                problems.append(
                    f"result {c.tool_call_id!r} (#{t}) not in the tool run after its call (#{i})"
                )
    call_ids = {c.tool_call_id for _, c in calls}
    for t, r in results:
        if r.tool_call_id not in call_ids:
            problems.append(f"result {r.tool_call_id!r} (#{t}) has no call")
    return problems


def render(messages: tuple[Message, ...]) -> str:
    """One line per message: ``#2 tool t1: result('a'), text('ok')``."""

    def part(p: Part) -> str:
        if isinstance(p, ToolCallPart):
            return f"call({p.tool_call_id!r}, {p.tool_name!r})"
        if isinstance(p, ToolResultPart):
            err = ", error" if p.is_error else ""
            return f"result({p.tool_call_id!r}, {p.result!r}{err})"
        if isinstance(p, TextPart):
            return f"text({p.text!r})"
        return type(p).__name__

    lines = [
        f"#{i} {m.role} {m.id}: " + ", ".join(part(p) for p in m.parts)
        for i, m in enumerate(messages)
    ]
    return "\n".join(lines) or "(empty history)"
