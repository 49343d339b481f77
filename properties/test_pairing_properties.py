"""Properties of pairing repair and of the cut points used by history trimming."""

from __future__ import annotations

import msgspec
from hypothesis import given, note
from hypothesis import strategies as st

from pipeline.values.messages import Message, ToolCallPart, ToolResultPart
from pipeline.values.pairing import MISSING_RESULT, cut_points, is_paired, repair_pairing

from .tool_histories import damaged, histories, pairing_problems, render, well_formed


def _show(label: str, messages: tuple[Message, ...]) -> None:
    note(f"{label}:\n{render(messages)}")


def _kept_calls(messages: tuple[Message, ...]) -> list[ToolCallPart]:
    """The calls repair keeps: those in assistant messages, in order."""
    return [c for m in messages if m.role == "assistant" for c in m.tool_calls()]


def _results_by_id(messages: tuple[Message, ...]) -> dict[str, ToolResultPart]:
    return {r.tool_call_id: r for m in messages for r in m.tool_results()}


@given(histories)
def test_repair_always_gives_a_paired_history(h: tuple[Message, ...]) -> None:
    """For any history, after repair every call (only in assistant messages, ids unique)
    has exactly one result with its id, in the tool run right after the call's message,
    and every result has its call (checked by an oracle independent of is_paired)."""
    _show("input", h)
    r = repair_pairing(h)
    _show("repaired", r)
    assert pairing_problems(r) == []


@given(histories)
def test_is_paired_agrees_with_the_oracle(h: tuple[Message, ...]) -> None:
    """is_paired(h) holds exactly when the slow oracle finds no problem, on raw and on
    repaired histories."""
    _show("input", h)
    assert is_paired(h) == (pairing_problems(h) == [])
    r = repair_pairing(h)
    assert is_paired(r) == (pairing_problems(r) == [])


@given(histories)
def test_repair_is_idempotent(h: tuple[Message, ...]) -> None:
    """repair(repair(h)) == repair(h)."""
    _show("input", h)
    once = repair_pairing(h)
    assert repair_pairing(once) == once


@given(well_formed(reuse_ids=False))
def test_repair_leaves_paired_histories_alone(h: tuple[Message, ...]) -> None:
    """A history that is already paired comes back equal (and is reported paired)."""
    _show("input", h)
    assert is_paired(h)
    assert repair_pairing(h) == h


@given(histories)
def test_repair_keeps_everything_but_results_in_order(h: tuple[Message, ...]) -> None:
    """Every part that is not a tool result survives in its message, in order, unchanged,
    except calls outside assistant messages (dropped) and the ids of later calls that
    repeat an id (renamed to a fresh `{id}_{n}`). Messages keep their other fields."""
    _show("input", h)
    r = repair_pairing(h)
    _show("repaired", r)

    def shape(messages: tuple[Message, ...]) -> list[tuple[str, object]]:
        out: list[tuple[str, object]] = []
        for m in messages:
            for p in m.parts:
                if isinstance(p, ToolCallPart) and m.role == "assistant":
                    out.append((m.id, (p.tool_name, p.args)))
                elif not isinstance(p, ToolResultPart | ToolCallPart):
                    out.append((m.id, p))
        return out

    assert shape(r) == shape(h)
    # call ids: the first call with an id keeps it, later ones get a fresh, unused one
    input_ids = {
        p.tool_call_id for m in h for p in m.parts if isinstance(p, ToolCallPart | ToolResultPart)
    }
    seen: set[str] = set()
    for before, after in zip(_kept_calls(h), _kept_calls(r), strict=True):
        if before.tool_call_id not in seen:
            assert after.tool_call_id == before.tool_call_id
        else:
            assert after.tool_call_id.startswith(before.tool_call_id + "_")
            assert after.tool_call_id not in input_ids
        seen.add(before.tool_call_id)

    def fields(m: Message) -> tuple[object, ...]:
        return (m.id, m.role, m.created_at, m.thread_id, m.metadata, m.incomplete)

    known = {fields(m) for m in h}
    new_ids = [m for m in r if fields(m) not in known]
    assert all(m.role == "tool" and m.tool_results() for m in new_ids)
    # a message that came in empty stays; one emptied by repair goes
    assert sum(1 for m in r if not m.parts) == sum(1 for m in h if not m.parts)


@given(histories)
def test_each_call_keeps_the_result_the_policy_names(h: tuple[Message, ...]) -> None:
    """For a call whose id no other call uses, the result after repair is the first
    result with its id after the call, else the first one before it, else a synthetic
    error result (MISSING_RESULT, is_error); duplicates and orphans are gone."""
    _show("input", h)
    r = repair_pairing(h)
    _show("repaired", r)
    positions = [(i, j, p) for i, m in enumerate(h) for j, p in enumerate(m.parts)]
    calls = [
        (i, j, p)
        for i, j, p in positions
        if isinstance(p, ToolCallPart) and h[i].role == "assistant"
    ]
    repaired = _results_by_id(r)
    assert len(repaired) == len(_kept_calls(r))  # one result per call, nothing else
    for ci, cj, c in calls:
        if sum(1 for _, _, d in calls if d.tool_call_id == c.tool_call_id) > 1:
            continue
        same = [
            (i, j, p)
            for i, j, p in positions
            if isinstance(p, ToolResultPart) and p.tool_call_id == c.tool_call_id
        ]
        after = [p for i, j, p in same if (i, j) > (ci, cj)]
        before = [p for i, j, p in same if (i, j) < (ci, cj)]
        got = repaired[c.tool_call_id]
        if after or before:
            assert got == (after or before)[0]
        else:
            assert got == ToolResultPart(c.tool_call_id, c.tool_name, MISSING_RESULT, True)


def _policy_matches(h: tuple[Message, ...]) -> list[ToolResultPart | None]:
    """The policy's result for each kept call (in order), computed the slow way."""
    calls: list[tuple[tuple[int, int], ToolCallPart]] = []
    answer: dict[int, ToolResultPart] = {}  # index into calls -> its result
    deferred: list[ToolResultPart] = []
    for i, m in enumerate(h):
        for j, p in enumerate(m.parts):
            if isinstance(p, ToolCallPart) and m.role == "assistant":
                calls.append(((i, j), p))
            elif isinstance(p, ToolResultPart):
                earlier = [k for k, (_, c) in enumerate(calls) if c.tool_call_id == p.tool_call_id]
                if not earlier:
                    deferred.append(p)
                    continue
                open_ = [k for k in earlier if k not in answer]
                if open_:
                    # the closest message with an unanswered call, its first such call
                    closest = max(calls[k][0][0] for k in open_)
                    answer[min(k for k in open_ if calls[k][0][0] == closest)] = p
    for p in deferred:
        for k, (_, c) in enumerate(calls):
            if c.tool_call_id == p.tool_call_id and k not in answer:
                answer[k] = p
                break
    return [answer.get(k) for k in range(len(calls))]


@given(histories)
def test_results_meet_the_calls_the_policy_names_even_with_repeated_ids(
    h: tuple[Message, ...],
) -> None:
    """Against a slow reference of the policy: a result answers an unanswered call with
    its id before it (closest message first, then the first call in it); one with no
    call before it answers the first call left unanswered; the rest are dropped; calls
    with no result get the synthetic error. Holds for repeated ids too."""
    _show("input", h)
    r = repair_pairing(h)
    _show("repaired", r)
    results = _results_by_id(r)
    for expected, before, after in zip(
        _policy_matches(h), _kept_calls(h), _kept_calls(r), strict=True
    ):
        want = (
            ToolResultPart(after.tool_call_id, before.tool_name, MISSING_RESULT, True)
            if expected is None
            else msgspec.structs.replace(expected, tool_call_id=after.tool_call_id)
        )
        assert results[after.tool_call_id] == want


@given(histories)
def test_results_after_repair_come_from_the_input_or_are_synthetic(
    h: tuple[Message, ...],
) -> None:
    """Whatever the ids, every result after repair is an input result of the same
    (original) call id, or the synthetic error result for that call."""
    _show("input", h)
    r = repair_pairing(h)
    results = {r2.tool_call_id: r2 for m in r for r2 in m.tool_results()}
    inputs = [p for m in h for p in m.tool_results()]
    for before, after in zip(_kept_calls(h), _kept_calls(r), strict=True):
        got = results[after.tool_call_id]
        synthetic = ToolResultPart(after.tool_call_id, before.tool_name, MISSING_RESULT, True)
        assert got == synthetic or any(
            p.tool_call_id == before.tool_call_id
            and (p.tool_name, p.result, p.is_error) == (got.tool_name, got.result, got.is_error)
            for p in inputs
        )


@given(histories)
def test_cut_points_are_exactly_the_cuts_that_keep_both_sides_paired(
    h: tuple[Message, ...],
) -> None:
    """On a repaired history, i is a cut point iff r[:i] and r[i:] are both paired; 0 and
    len are always cut points and the answer is ascending."""
    r = repair_pairing(h)
    _show("repaired", r)
    expected = tuple(
        i for i in range(len(r) + 1) if not pairing_problems(r[:i]) and not pairing_problems(r[i:])
    )
    assert cut_points(r) == expected
    assert cut_points(r)[0] == 0 and cut_points(r)[-1] == len(r)


@given(histories)
def test_cut_points_never_split_an_id_even_before_repair(h: tuple[Message, ...]) -> None:
    """On any history, no cut point leaves parts with the same tool-call id on both
    sides, so trimming at a cut point cannot create an orphan or a dangling call."""
    _show("input", h)

    def ids(ms: tuple[Message, ...]) -> set[str]:
        return {
            p.tool_call_id
            for m in ms
            for p in m.parts
            if isinstance(p, ToolCallPart | ToolResultPart)
        }

    for i in cut_points(h):
        assert not ids(h[:i]) & ids(h[i:]), f"cut {i} splits an id"


@given(damaged(), st.data())
def test_trimming_at_a_cut_point_needs_no_repair(
    h: tuple[Message, ...], data: st.DataObject
) -> None:
    """Keeping the tail of a repaired history from any cut point gives a history that
    repair leaves unchanged (the token limiter's use)."""
    r = repair_pairing(h)
    _show("repaired", r)
    i = data.draw(st.sampled_from(cut_points(r)), label="cut")
    assert repair_pairing(r[i:]) == r[i:]


@given(well_formed(reuse_ids=False, shuffle=False), st.sampled_from(("", "call_0")))
def test_calls_that_all_share_one_id_still_get_their_own_results(
    h: tuple[Message, ...], same: str
) -> None:
    """When a server gives every call the same id (or none), a paired history whose
    results come in call order keeps each result with its own call: ids are made
    unique and nothing is dropped or synthesized."""
    blank = tuple(
        x.with_parts(
            msgspec.structs.replace(p, tool_call_id=same)
            if isinstance(p, ToolCallPart | ToolResultPart)
            else p
            for p in x.parts
        )
        for x in h
    )
    _show("input", blank)
    r = repair_pairing(blank)
    _show("repaired", r)
    results = _results_by_id(r)
    calls = _kept_calls(r)
    assert len(calls) == len(_kept_calls(h))
    for c in calls:
        assert results[c.tool_call_id].result == f"r:{c.args['id']}"
