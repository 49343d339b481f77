"""PIIDetector finds values disguised so they render like the plain ones: zero-width and
other invisible format characters inside them, full-width digits, letters and `@`, and
Cyrillic look-alike letters; on input, on the stream (however it is cut) and on the
result, with no UnicodeNormalizer before it. What it replaces is the whole disguised
span, the invisible characters inside it included."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

import pytest

from interpreters.testing import Say
from pipeline.processors import PIIDetector
from pipeline.processors.guards.pii import Strategy
from pipeline.values.chunks import ReasoningDelta
from tests.helpers import Ran, chunked, make_agent, simulate, streamed_text, user_texts

VALUES = {
    "email": "jane.doe@example.com",
    "card": "4111 1111 1111 1111",
    "secret": "sk-abcdefghijklmnopqrstuvwxyz123456",
    "iban": "DE89 3704 0044 0532 0130 00",
}

INVISIBLE = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad")
"""Zero-width space, non-joiner, joiner, word joiner, BOM, soft hyphen."""

_CYRILLIC = str.maketrans("aeoc", "\u0430\u0435\u043e\u0441")


def full_width(value: str) -> str:
    """Every printable ASCII character as its full-width form (NFKC gives it back)."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in value)


def interleaved(mark: str) -> Callable[[str], str]:
    """The value with `mark` after each of its characters but the last."""
    return lambda value: mark.join(value)


def in_the_middle(mark: str) -> Callable[[str], str]:
    return lambda value: value[: len(value) // 2] + mark + value[len(value) // 2:]


DISGUISES: dict[str, Callable[[str], str]] = {
    **{f"interleaved-U+{ord(m):04X}": interleaved(m) for m in INVISIBLE},
    **{f"middle-U+{ord(m):04X}": in_the_middle(m) for m in INVISIBLE},
    "full-width": full_width,
    "full-width-half": lambda v: full_width(v[: len(v) // 2]) + v[len(v) // 2:],
}

CASES = [
    pytest.param(kind, name, id=f"{kind}-{name}")
    for kind in VALUES for name in DISGUISES
] + [pytest.param("email", "cyrillic", id="email-cyrillic")]


def disguise(kind: str, name: str) -> str:
    value = VALUES[kind]
    if name == "cyrillic":
        return value.translate(_CYRILLIC)
    return DISGUISES[name](value)


def plain(text: str) -> str:
    """What a reader sees: NFKC, invisible characters gone, the look-alikes as Latin."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return text.translate(str.maketrans("\u0430\u0435\u043e\u0441", "aeoc"))


def clean(kind: str, text: str) -> bool:
    """Neither the disguised value nor the plain one can be read in `text`."""
    return VALUES[kind] not in plain(text)


def text_around(value: str) -> str:
    return f"Here it is: {value} - keep it safe, please."


def nowhere(ran: Ran, kind: str) -> bool:
    r = ran.result
    return (
        clean(kind, streamed_text(ran.chunks))
        and clean(kind, r.text)
        and all(clean(kind, m.text) for m in r.messages.messages)
    )


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_a_disguised_value_is_redacted_whole(kind: str, name: str) -> None:
    value = disguise(kind, name)
    out = PIIDetector().redact_text(text_around(value))
    assert out == text_around(f"[REDACTED:{kind}]"), repr(out)


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_a_disguised_value_is_redacted_on_input(kind: str, name: str) -> None:
    value = disguise(kind, name)
    detector = PIIDetector()
    ran = simulate(make_agent(input_processors=[detector]), [Say(["ok"])], text_around(value))
    sent = user_texts(ran.requests[0])
    assert sent == [text_around(f"[REDACTED:{kind}]")], sent


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_a_disguised_value_is_redacted_on_the_result(kind: str, name: str) -> None:
    value = disguise(kind, name)
    detector = PIIDetector(on_stream=False)
    ran = simulate(make_agent(output_processors=[detector]), [Say([text_around(value)])])
    assert ran.result.text == text_around(f"[REDACTED:{kind}]"), repr(ran.result.text)
    assert all(clean(kind, m.text) for m in ran.messages)


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_a_disguised_value_never_reaches_the_caller_on_the_stream(kind: str, name: str) -> None:
    """Cut into chunks of 1 to 7 characters, and into two chunks at every position."""
    text = text_around(disguise(kind, name))
    chunkings = [chunked(text, size) for size in range(1, 8)]
    chunkings += [[text[:i], text[i:]] for i in range(1, len(text))]
    for chunks in chunkings:
        ran = simulate(make_agent(output_processors=[PIIDetector()]), [Say(chunks)])
        assert ran.result.status == "finished"
        assert nowhere(ran, kind), (chunks, streamed_text(ran.chunks))
        assert streamed_text(ran.chunks) == text_around(f"[REDACTED:{kind}]")


@pytest.mark.parametrize("kind", sorted(VALUES))
def test_many_invisible_characters_inside_a_value_do_not_release_a_prefix(kind: str) -> None:
    """A value stretched by invisible characters to many times the window is held as a
    value still being written: none of it is released before it is found whole."""
    value = ("\u200b" * 30).join(VALUES[kind])
    text = text_around(value)
    for size in (1, 5, 64):
        ran = simulate(make_agent(output_processors=[PIIDetector()]),
                       [Say(chunked(text, size))])
        assert nowhere(ran, kind), (size, plain(streamed_text(ran.chunks)))
        assert ran.result.status == "finished"
        assert plain(streamed_text(ran.chunks)) == text_around(f"[REDACTED:{kind}]")


@pytest.mark.parametrize("kind", sorted(VALUES))
def test_a_value_stretched_past_max_hold_blocks_rather_than_leak(kind: str) -> None:
    value = ("\u200b" * 400).join(VALUES[kind])
    text = text_around(value)
    ran = simulate(make_agent(output_processors=[PIIDetector()]),
                   [Say([text[i:i + 50] for i in range(0, len(text), 50)])])
    assert ran.result.status == "tripped"
    assert nowhere(ran, kind), plain(streamed_text(ran.chunks))


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [("mask", "j*******@example.com"), ("remove", ""), ("detect", None)],
)
def test_strategies_apply_to_the_plain_value(strategy: Strategy, expected: str | None) -> None:
    """mask shows the plain value's shape (no invisible characters kept); detect leaves
    the text exactly as it was."""
    value = "jane.doe\u200b@example\u2060.com"
    out = PIIDetector(strategy=strategy).redact_text(f"mail {value} now")
    assert out == f"mail {value if expected is None else expected} now", repr(out)


def test_hash_is_the_same_for_a_disguised_and_a_plain_value() -> None:
    detector = PIIDetector(strategy="hash", salt="s")
    disguised = detector.redact_text(full_width("jane.doe@example.com"))
    assert disguised == detector.redact_text("jane.doe@example.com")
    assert disguised.startswith("[email:")


def test_a_disguised_value_in_non_latin_text_is_found_and_the_rest_kept() -> None:
    text = f"Écrivez à {full_width('jane@example.com')} — Привет, мир! ﬁn"
    out = PIIDetector().redact_text(text)
    assert out == "Écrivez à [REDACTED:email] — Привет, мир! ﬁn", repr(out)


def test_full_width_digits_of_a_card_in_a_reasoning_stream_are_redacted() -> None:
    text = text_around(full_width(VALUES["card"]))
    ran = simulate(
        make_agent(output_processors=[PIIDetector()]),
        [Say("done", reasoning=[text[i:i + 2] for i in range(0, len(text), 2)])],
    )
    seen = "".join(c.text for c in ran.chunks if isinstance(c, ReasoningDelta))
    assert seen == text_around("[REDACTED:card]"), repr(seen)


def test_a_value_the_judge_names_plainly_is_found_where_it_is_disguised() -> None:
    """The judge reads the text and may name the value as it reads it, without the
    invisible characters or with Latin letters: it is found in the disguised text."""
    d = PIIDetector(judge_model="judge")
    agent = make_agent(input_processors=[d], output_processors=[d])
    name = "Ada Lovelace"
    reply = '{"values": [{"type": "name", "value": "Ada Lovelace"}]}'
    ran = simulate(
        agent, [Say(f"Hello {name.translate(_CYRILLIC)}!")], "I am A\u200bda Love\u2060lace",
        models={"judge": [Say(reply), Say(reply)]},
    )
    assert ran.requests[0].messages[0].text == "I am [REDACTED:judged]"
    assert ran.result.text == "Hello [REDACTED:judged]!"


def test_the_view_maps_each_character_to_where_it_came_from() -> None:
    from pipeline.processors.guards.text_view import view

    v = view("a\u200bb\ufb01\uff20c")  # a, zero-width space, b, the fi ligature, full-width @
    assert v.text == "abfi@c"
    assert v.origin == (0, 2, 3, 3, 4, 5)
    assert v.span(0, 2) == (0, 3)  # "ab": the zero-width space between them included
    assert v.span(3, 4) == (3, 4)  # half of the ligature: the whole of it
    assert (v.offset(1), v.offset(6)) == (2, 6)
    plain_text = "plain ascii, and “quotes” — é"
    assert view(plain_text).text is plain_text and view(plain_text).origin is None


@pytest.mark.parametrize("dash", ["\u2010", "\u2011", "\u2012", "\u2212"],
                         ids=["hyphen", "non-breaking-hyphen", "figure-dash", "minus"])
@pytest.mark.parametrize(("kind", "plain"), [
    ("card", "4111-1111-1111-1111"), ("national-id", "123-45-6789"),
])
def test_a_value_written_with_a_dash_that_looks_like_a_hyphen_is_redacted(
    dash: str, kind: str, plain: str
) -> None:
    """Dashes that render as the hyphen-minus (models write U+2011 in numbers)."""
    p = PIIDetector()
    assert p.redact_text(f"it is {plain}.", []) == f"it is [REDACTED:{kind}]."
    assert p.redact_text(f"it is {plain.replace('-', dash)}.", []) == f"it is [REDACTED:{kind}]."


@pytest.mark.parametrize("mark", ["\u2065", "\ufff0", "\U000e0080", "\U000e0fff"])
def test_unassigned_default_ignorable_characters_inside_a_value_are_dropped(mark: str) -> None:
    """Default-ignorable code points not yet assigned render as nothing too."""
    p = PIIDetector(types=("email",))
    text = f"mail jane.doe@exa{mark}mple.com now"
    assert p.redact_text(text, []) == "mail [REDACTED:email] now"


@pytest.mark.parametrize("letter", [
    "\u04bb",  # Cyrillic shha, h
    "\u0570",  # Armenian ho, h
])
def test_a_look_alike_letter_of_another_script_does_not_leave_half_a_value(letter: str) -> None:
    p = PIIDetector(types=("email",))
    assert p.redact_text(f"mail jo{letter}n@example.com now", []) == "mail [REDACTED:email] now"


@pytest.mark.parametrize(("letter", "latin"), [
    ("\u0396", "Z"), ("\u03f3", "j"), ("\u0585", "o"), ("\u057d", "u"), ("\u13aa", "A"),
    ("\u13df", "C"), ("\u1d0f", "o"), ("\u04ae", "Y"), ("\u0475", "v"), ("\u0261", "g"),
])
def test_more_look_alike_letters_read_as_latin(letter: str, latin: str) -> None:
    from pipeline.processors.guards.text_view import view
    assert view(f"x{letter}y").text == f"x{latin}y"
