"""Properties of tool-call id and tool-name sanitization."""

from __future__ import annotations

import re

import msgspec
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from interpreters.providers.openai_responses import RESPONSES_PROFILE
from pipeline.values.chunks import ToolCall, ToolCallDelta
from pipeline.values.messages import Message, TextPart, ToolCallPart, ToolResultPart
from pipeline.values.model import (
    ModelRequest,
    StructuredOutput,
    ToolChoice,
    ToolChoiceTool,
    ToolSpec,
)
from pipeline.values.pairing import is_paired
from pipeline.values.sanitize import (
    ANTHROPIC,
    BEDROCK,
    GEMINI,
    MISTRAL,
    OPENAI,
    NameMap,
    SanitizeProfile,
    prepare_request,
    restore_event,
    restore_message,
    sanitize_request,
)

from .tool_histories import SAFE, histories, render

# a rule with room for only 30 strings: hashes collide and probing has to work
TINY = SanitizeProfile.custom("tiny", id_chars="ab", id_max_len=4, name_chars="xy", name_max_len=4)
# no `_` or `-`: forbidden characters are dropped and there is no separator
NO_SEP = SanitizeProfile.custom("no-sep", id_chars="abc123", id_max_len=12, name_chars="XYZ")
# a first-character rule, as Gemini's names have, on a tiny alphabet: the fix-ups collide
FIRST = SanitizeProfile.custom("first", id_chars="ab1", id_max_len=4, name_chars="xy2",
                               name_max_len=4, name_first="x")
PROFILES = (OPENAI, ANTHROPIC, MISTRAL, RESPONSES_PROFILE, BEDROCK, GEMINI, TINY, NO_SEP, FIRST)
profiles = st.sampled_from(PROFILES)

# what each provider documents, written out independently of the Rule code
DOCUMENTED: dict[str, tuple[str, str]] = {
    "openai": (r"[a-zA-Z0-9_-]{1,40}", r"[a-zA-Z0-9_-]{1,64}"),
    "anthropic": (r"[a-zA-Z0-9_-]+", r"[a-zA-Z0-9_-]{1,64}"),
    "mistral": (r"[a-zA-Z0-9]{9}", r"[a-zA-Z0-9_-]{1,64}"),
    "openai-responses": (r"[a-zA-Z0-9_-]{1,64}", r"[a-zA-Z0-9_-]{1,64}"),
    "bedrock": (r"[a-zA-Z0-9_-]{1,64}", r"[a-zA-Z0-9_-]{1,64}"),
    "gemini": (r"[a-zA-Z0-9_-]{1,64}", r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}"),
    "first": (r"[ab1]{1,4}", r"x[xy2]{0,3}"),
    "tiny": (r"[ab]{1,4}", r"[xy]{1,4}"),
    "no-sep": (r"[abc123]{1,12}", r"[XYZ]{1,64}"),
}

NASTY = (
    "",
    "a",
    "a:b",
    "a.b",
    "a_b",
    "llm_version:0",
    "call_0",
    "toolu_01A09q90qw90lq917835lq9",
    "é",
    "a b",
    "\x00",
    "💥",
    "AAAAAAAAA",
    "-",
    "x" * 41,
    "x" * 65,
)


@st.composite
def near_collisions(draw: st.DrawFn) -> list[str]:
    """Strings that differ only where the provider forbids characters, or only past a
    length cap: ``a:b``/``a.b``/``a b``, or 70 ``x`` followed by different tails."""
    if draw(st.booleans()):
        base = draw(st.text(alphabet=SAFE, min_size=1, max_size=6))
        at = draw(st.integers(0, len(base) - 1))
        bad = draw(st.lists(st.sampled_from(":. /@é💥"), min_size=2, max_size=4, unique=True))
        return [base[:at] + c + base[at + 1 :] for c in bad]
    stem = draw(st.sampled_from(("x" * 39, "x" * 40, "x" * 63, "x" * 70)))
    return [stem + t for t in draw(st.lists(st.text(SAFE, max_size=2), min_size=2, max_size=3))]


ids = st.one_of(
    st.sampled_from(NASTY),
    st.text(max_size=10),
    st.text(alphabet=SAFE, max_size=12),
    st.text(alphabet=SAFE, min_size=40, max_size=70),
)


def _clean(s: str) -> str:
    """What a careless sanitizer would make of s: its would-be colliding twin."""
    return "".join(c if c in SAFE else "_" for c in s)


@st.composite
def requests(draw: st.DrawFn) -> ModelRequest:
    """A request using a few ids and names, including near-collisions, empty strings,
    over-long strings, and conforming twins of non-conforming ones (``a_b`` beside
    ``a:b``). Calls and results need not pair: sanitizing does not care."""
    id_list = draw(st.lists(ids, max_size=6))
    id_list += draw(st.one_of(st.just([]), near_collisions()))
    id_list += [_clean(i) for i in id_list if draw(st.booleans())]
    name_list = draw(st.lists(ids, min_size=1, max_size=4))
    name_list += draw(st.one_of(st.just([]), near_collisions()))
    name_list += [_clean(n) for n in name_list if draw(st.booleans())]
    names = st.sampled_from(name_list)
    messages: list[Message] = []
    for k, i in enumerate(draw(st.permutations(id_list))):
        name = draw(names)
        messages.append(
            Message(id=f"a{k}", role="assistant", parts=(ToolCallPart(i, name, {"k": k}),))
        )
        if draw(st.booleans()):
            messages.append(
                Message(id=f"t{k}", role="tool", parts=(ToolResultPart(i, name, k), TextPart("t")))
            )
    tools = tuple(ToolSpec(n, "d", {}) for n in draw(st.lists(names, unique=True)))
    choice: ToolChoice = draw(
        st.one_of(st.sampled_from(("auto", "none", "required")), names.map(ToolChoiceTool))
    )
    structured = draw(st.one_of(st.none(), names.map(lambda n: StructuredOutput({}, name=n))))
    return ModelRequest(
        model="m",
        system=(),
        messages=tuple(messages),
        tools=tools,
        tool_choice=choice,
        structured_output=structured,
    )


def _ids_in(request: ModelRequest) -> list[str]:
    return [
        p.tool_call_id
        for m in request.messages
        for p in m.parts
        if isinstance(p, ToolCallPart | ToolResultPart)
    ]


def _names_in(request: ModelRequest) -> list[str]:
    out = [t.name for t in request.tools]
    if isinstance(request.tool_choice, ToolChoiceTool):
        out.append(request.tool_choice.tool_name)
    if request.structured_output is not None:
        out.append(request.structured_output.name)
    out += [
        p.tool_name
        for m in request.messages
        for p in m.parts
        if isinstance(p, ToolCallPart | ToolResultPart)
    ]
    return out


def _show(request: ModelRequest, profile: SanitizeProfile) -> None:
    note(f"profile: {profile.name}")
    note(f"ids: {list(dict.fromkeys(_ids_in(request)))!r}")
    note(f"names: {list(dict.fromkeys(_names_in(request)))!r}")


def _conforming(profile: SanitizeProfile, ids: list[str], names: list[str]) -> bool:
    id_re, name_re = DOCUMENTED[profile.name]
    return all(re.fullmatch(id_re, i) for i in ids) and all(re.fullmatch(name_re, n) for n in names)


@given(requests(), profiles)
def test_output_matches_the_provider_rules(request: ModelRequest, profile: SanitizeProfile) -> None:
    """Every id and tool name in the sanitized request (messages, tools, tool_choice,
    structured-output name) matches the provider's documented pattern and length."""
    _show(request, profile)
    out, _ = sanitize_request(request, profile)
    id_re, name_re = DOCUMENTED[profile.name]
    for i in _ids_in(out):
        assert re.fullmatch(id_re, i), f"id {i!r}"
    for n in _names_in(out):
        assert re.fullmatch(name_re, n), f"name {n!r}"


@given(requests(), profiles)
def test_sanitizing_is_injective_and_consistent(
    request: ModelRequest, profile: SanitizeProfile
) -> None:
    """Position by position, two ids (names) in the request are equal after sanitizing
    iff they were equal before: distinct in, distinct out; same in, same out."""
    _show(request, profile)
    out, names = sanitize_request(request, profile)
    for before, after in ((_ids_in(request), _ids_in(out)), (_names_in(request), _names_in(out))):
        assert len(before) == len(after)
        pairs = set(zip(before, after, strict=True))
        assert len({b for b, _ in pairs}) == len(pairs), f"one original, two outputs: {pairs}"
        assert len({a for _, a in pairs}) == len(pairs), f"two originals, one output: {pairs}"
    assert [names.sanitized_id(i) for i in _ids_in(request)] == _ids_in(out)
    assert [names.sanitized_name(n) for n in _names_in(request)] == _names_in(out)


@given(requests(), profiles)
def test_sanitizing_is_deterministic(request: ModelRequest, profile: SanitizeProfile) -> None:
    """Sanitizing the same request twice, or an equal copy decoded from JSON, gives
    equal requests and equal maps."""
    _show(request, profile)
    copy = msgspec.json.decode(msgspec.json.encode(request), type=ModelRequest)
    first = sanitize_request(request, profile)
    assert sanitize_request(request, profile) == first
    assert sanitize_request(copy, profile) == first


@given(requests(), profiles)
def test_conforming_ids_and_names_are_kept(request: ModelRequest, profile: SanitizeProfile) -> None:
    """An id or name the provider accepts maps to itself, whatever else is in the
    request; a request that conforms throughout comes back equal with an identity map."""
    _show(request, profile)
    out, names = sanitize_request(request, profile)
    id_re, name_re = DOCUMENTED[profile.name]
    for i in _ids_in(request):
        if re.fullmatch(id_re, i):
            assert names.sanitized_id(i) == i
    for n in _names_in(request):
        if re.fullmatch(name_re, n):
            assert names.sanitized_name(n) == n
    if _conforming(profile, _ids_in(request), _names_in(request)):
        assert out == request and names.is_identity


@given(requests(), profiles)
def test_sanitizing_is_idempotent(request: ModelRequest, profile: SanitizeProfile) -> None:
    """Sanitizing a sanitized request changes nothing: same request, identity map."""
    _show(request, profile)
    once, _ = sanitize_request(request, profile)
    twice, names = sanitize_request(once, profile)
    assert twice == once
    assert names.is_identity


@given(requests(), profiles)
def test_rewrites_never_take_an_original_that_is_already_valid(
    request: ModelRequest, profile: SanitizeProfile
) -> None:
    """Adding, as originals, the very strings other ids were rewritten to keeps those
    originals and moves the rewritten ids elsewhere: probing, not luck, keeps it
    injective."""
    _out, names = sanitize_request(request, profile)
    shadows = [
        names.sanitized_id(i) for i in dict.fromkeys(_ids_in(request)) if names.sanitized_id(i) != i
    ]
    shadow_names = [
        names.sanitized_name(n)
        for n in dict.fromkeys(_names_in(request))
        if names.sanitized_name(n) != n
    ]
    extra = Message(
        id="shadow",
        role="assistant",
        parts=tuple(
            ToolCallPart(i, shadow_names[k % len(shadow_names)] if shadow_names else "f", {})
            for k, i in enumerate(shadows)
        ),
    )
    bigger = msgspec.structs.replace(request, messages=(*request.messages, extra))
    _show(bigger, profile)
    _out2, names2 = sanitize_request(bigger, profile)
    for s in shadows:
        assert names2.sanitized_id(s) == s
    for s in shadow_names:
        assert names2.sanitized_name(s) == s
    id_values = [names2.sanitized_id(i) for i in dict.fromkeys(_ids_in(bigger))]
    assert len(set(id_values)) == len(id_values)
    name_values = [names2.sanitized_name(n) for n in dict.fromkeys(_names_in(bigger))]
    assert len(set(name_values)) == len(name_values)


@given(requests(), profiles)
def test_the_map_restores_the_original_request(
    request: ModelRequest, profile: SanitizeProfile
) -> None:
    """Mapping every id and name of the sanitized request back gives the original
    request exactly; nothing but ids and names was touched."""
    _show(request, profile)
    out, names = sanitize_request(request, profile)
    choice = out.tool_choice
    restored = msgspec.structs.replace(
        out,
        messages=tuple(restore_message(m, names) for m in out.messages),
        tools=tuple(
            msgspec.structs.replace(t, name=names.original_name(t.name)) for t in out.tools
        ),
        tool_choice=ToolChoiceTool(names.original_name(choice.tool_name))
        if isinstance(choice, ToolChoiceTool)
        else choice,
        structured_output=None
        if out.structured_output is None
        else msgspec.structs.replace(
            out.structured_output, name=names.original_name(out.structured_output.name)
        ),
    )
    assert restored == request
    for i in _ids_in(request):
        assert names.original_id(names.sanitized_id(i)) == i
    for n in _names_in(request):
        assert names.original_name(names.sanitized_name(n)) == n


@given(requests(), profiles)
def test_events_from_the_provider_come_back_with_original_ids_and_names(
    request: ModelRequest, profile: SanitizeProfile
) -> None:
    """A ToolCall or ToolCallDelta naming a sanitized id and tool is restored to the
    caller's; other events pass through unchanged."""
    out, names = sanitize_request(request, profile)
    for before, after in zip(request.messages, out.messages, strict=True):
        for p, q in zip(before.parts, after.parts, strict=True):
            if isinstance(p, ToolCallPart) and isinstance(q, ToolCallPart):
                assert restore_event(
                    ToolCall(q.tool_call_id, q.tool_name, q.args), names
                ) == ToolCall(p.tool_call_id, p.tool_name, p.args)
                assert restore_event(
                    ToolCallDelta(q.tool_call_id, q.tool_name, "{"), names
                ) == ToolCallDelta(p.tool_call_id, p.tool_name, "{")


@given(requests(), profiles)
def test_name_maps_survive_json(request: ModelRequest, profile: SanitizeProfile) -> None:
    """A NameMap encodes to JSON and decodes to an equal map (for traces and replays)."""
    _, names = sanitize_request(request, profile)
    assert msgspec.json.decode(msgspec.json.encode(names), type=NameMap) == names


# six strings in all ("a", "b", "aa", ...): the hashes cannot place everyone alone
MICRO = SanitizeProfile.custom("micro", id_chars="ab", id_max_len=2)


@given(st.lists(st.one_of(st.sampled_from(NASTY), st.text(max_size=3)), unique=True, max_size=8))
def test_a_rule_with_little_room_fills_it_injectively_then_refuses(originals: list[str]) -> None:
    """With a rule that has room for six ids, up to six distinct ids get six distinct
    valid ones (valid originals kept); a seventh is refused with ValueError, never a
    collision."""
    r = ModelRequest(
        model="m",
        system=(),
        messages=(
            Message(
                id="a", role="assistant", parts=tuple(ToolCallPart(i, "f", {}) for i in originals)
            ),
        ),
    )
    if len(originals) > 6:
        with pytest.raises(ValueError, match="no room"):
            sanitize_request(r, MICRO)
        return
    out, _ = sanitize_request(r, MICRO)
    got = _ids_in(out)
    assert len(set(got)) == len(got)
    assert all(re.fullmatch(r"[ab]{1,2}", g) for g in got)
    assert all(g == o for o, g in zip(originals, got, strict=True) if re.fullmatch(r"[ab]{1,2}", o))


@given(histories, st.sampled_from((OPENAI, ANTHROPIC, MISTRAL, RESPONSES_PROFILE, BEDROCK,
                                    GEMINI)))
def test_prepared_requests_are_paired_and_conforming(
    messages: tuple[Message, ...], profile: SanitizeProfile
) -> None:
    """Whatever the history, what prepare_request hands a codec is paired and every id
    and name in it is valid for the provider; restoring its messages never shows a
    sanitized id (each is an input id or a repair-made `{id}_{n}`)."""
    note(render(messages))
    request = ModelRequest(model="m", system=(), messages=messages)
    out, names = prepare_request(request, profile)
    note(f"sent:\n{render(out.messages)}")
    assert is_paired(out.messages)
    assert _conforming(profile, _ids_in(out), _names_in(out))
    input_ids = set(_ids_in(request))
    for m in out.messages:
        for p in restore_message(m, names).parts:
            if isinstance(p, ToolCallPart | ToolResultPart):
                assert p.tool_call_id in input_ids or any(
                    p.tool_call_id.startswith(i + "_") for i in input_ids
                )
