"""Properties of the built-in guard processors: normalization is
idempotent, history trimming never breaks pairing nor exceeds its budget, and
ToolCallFilter's output is paired."""

from __future__ import annotations

from typing import Literal

import msgspec
from hypothesis import given, note
from hypothesis import strategies as st

from effects import Abort, Out, Replace
from pipeline.processor import InputArgs
from pipeline.processors import TokenLimiterProcessor, ToolCallFilter
from pipeline.processors.guards.unicode import FoldHomoglyphs, normalize_text
from pipeline.processors.token_limiter import LimiterState, trim_start
from pipeline.processors.tool_call_filter import filter_tool_calls
from pipeline.values.context import RunContext
from pipeline.values.messages import Message, MessageList, Source, ToolCallPart, ToolResultPart

from .tool_histories import NAMES, damaged, histories, pairing_problems, render, well_formed

# Text with what normalization is about: controls, format characters, odd spaces and
# line breaks, combining marks, compatibility forms, emoji and look-alike letters.
_tricky = st.sampled_from(
    list("\t\n\r \u00a0\u2028\u2029\u200b\u200d\u202e\ufeff\u0007\u0000\u0301\u0308"
         "ｆ①ﬁ\u0430\u0435\u043e\u03bf\u0456\U0001f468\U0001f469aeoIl1 ")
)
texts = st.text(st.one_of(st.characters(), _tricky), max_size=40)


FORMS: tuple[Literal["NFKC", "NFC"] | None, ...] = ("NFKC", "NFC", None)
FOLDS: tuple[FoldHomoglyphs, ...] = ("off", "mixed", "all")


@given(
    texts,
    st.sampled_from(FORMS),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.sampled_from(FOLDS),
)
def test_normalization_is_idempotent(
    text: str,
    form: Literal["NFKC", "NFC"] | None,
    strip: bool,
    collapse: bool,
    trim: bool,
    fold: FoldHomoglyphs,
) -> None:
    """Normalizing a normalized text changes nothing, for every combination of options."""
    once = normalize_text(text, form=form, strip_control=strip, collapse_whitespace=collapse,
                          trim=trim, fold_homoglyphs=fold)
    note(f"once: {once!r}")
    assert normalize_text(once, form=form, strip_control=strip, collapse_whitespace=collapse,
                          trim=trim, fold_homoglyphs=fold) == once


def _ids(messages: tuple[Message, ...]) -> set[str]:
    return {
        p.tool_call_id
        for m in messages
        for p in m.parts
        if isinstance(p, ToolCallPart | ToolResultPart)
    }


@given(st.one_of(well_formed(), histories), st.integers(0, 200), st.booleans())
def test_trimming_never_breaks_pairing_nor_exceeds_the_budget(
    h: tuple[Message, ...], limit: int, start_with_user: bool
) -> None:
    """TokenLimiterProcessor keeps a suffix of the history that fits the budget, never
    separates a call from its result (a paired history stays paired), starts with a user
    message when asked, and keeps as much as it can; when nothing fits it aborts."""
    note(render(h))
    p = TokenLimiterProcessor(max(limit, 1), start_with_user=start_with_user)
    ml = MessageList.of(h)
    args = InputArgs(system_messages=(), message_list=ml, state=LimiterState(), retry_count=0,
                     context=RunContext(run_id="r"))
    out = p.process_input(args)
    assert isinstance(out, Out)
    eff = out.effect
    if isinstance(eff, Abort):
        costs = tuple(p.message_tokens(m) for m in h)
        assert trim_start(h, costs, p.limit, start_with_user=start_with_user) is None
        return
    kept = eff.value.messages if isinstance(eff, Replace) else h
    note(f"kept:\n{render(kept)}")
    start = len(h) - len(kept)
    assert kept == h[start:]
    assert p.history_tokens(kept) <= p.limit
    assert not (_ids(h[:start]) & _ids(kept))  # no tool exchange cut in two
    if not pairing_problems(h):
        assert pairing_problems(kept) == []
    if start and start_with_user:
        assert kept[0].role == "user"
    # maximal: no longer suffix that is a safe cut (and starts with a user) would fit
    for c in range(start):
        safe = not (_ids(h[:c]) & _ids(h[c:]))
        if safe and (not start_with_user or h[c].role == "user"):
            assert p.history_tokens(h[c:]) > p.limit, c


@given(st.one_of(well_formed(), damaged(), histories), st.sets(st.sampled_from(NAMES)),
       st.sampled_from(("all", "exclude", "keep")))
def test_tool_call_filter_output_is_paired(
    h: tuple[Message, ...], names: set[str], mode: str
) -> None:
    """Whatever the history (paired or damaged), the filtered history is paired and holds
    no call of a removed tool; from a paired history, every call of a kept tool stays."""
    note(render(h))
    exclude = frozenset(names) if mode == "exclude" else None
    keep = frozenset(names) if mode == "keep" else None
    source: Source = "input"
    inputs = (source,) * len(h)
    out, sources = filter_tool_calls(h, inputs, exclude=exclude, keep=keep)
    note(f"filtered:\n{render(out)}")
    assert len(sources) == len(out)
    assert pairing_problems(out) == []

    def removed(name: str) -> bool:
        if mode == "exclude":
            return name in names
        return name not in names if mode == "keep" else True

    calls_out = [p for m in out for p in m.tool_calls()]
    assert not any(removed(c.tool_name) for c in calls_out)
    if not pairing_problems(h):
        kept_in = [p for m in h for p in m.tool_calls() if not removed(p.tool_name)]
        assert calls_out == kept_in
    f = ToolCallFilter(exclude=exclude, keep=keep) if mode != "all" else ToolCallFilter()
    filtered = f.filter(MessageList.of(h))
    assert (filtered.messages if filtered is not None else h) == out


@st.composite
def renamed_results(draw: st.DrawFn) -> tuple[Message, ...]:
    """A paired history whose results carry any tool name (servers and processors do not
    always copy the call's): a result belongs to its call by id, never by name."""
    out = []
    for m in draw(well_formed()):
        parts = tuple(
            msgspec.structs.replace(p, tool_name=draw(st.sampled_from(NAMES)))
            if isinstance(p, ToolResultPart) else p
            for p in m.parts
        )
        out.append(m.with_parts(parts))
    return tuple(out)


@given(renamed_results(), st.sets(st.sampled_from(NAMES)))
def test_tool_call_filter_keeps_each_kept_calls_own_result(
    h: tuple[Message, ...], names: set[str]
) -> None:
    """From a paired history, every call of a kept tool keeps its own result (the same
    value, whatever name the result carries) and no result of a removed call stays."""
    note(render(h))
    source: Source = "input"
    out, _ = filter_tool_calls(h, (source,) * len(h), exclude=frozenset(names))
    note(f"filtered:\n{render(out)}")

    # well_formed gives each call args {"id": i} and its result the value "r:i"
    after = {r.tool_call_id: r.result for m in out for r in m.tool_results()}
    kept = [c for m in out for c in m.tool_calls()]
    assert len(after) == len(kept)
    for c in kept:
        assert after[c.tool_call_id] == f"r:{c.args['id']}"
