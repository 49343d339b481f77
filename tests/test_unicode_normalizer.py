# ruff: noqa: RUF001  (look-alike characters are what these tests are about)
"""UnicodeNormalizer: each step of the normalization, the hooks, and the optional extra."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline import Agent, Message, MessageList, TextPart
from pipeline.processors import UnicodeNormalizer
from pipeline.processors.guards import unicode as un
from pipeline.processors.guards.common import GuardsExtraMissing
from pipeline.processors.guards.unicode import normalize_text
from pipeline.values import ToolResultPart


def test_nfkc_folds_compatibility_forms() -> None:
    assert normalize_text("ｆｕｌｌ ｗｉｄｔｈ ﬁne ①") == "full width fine 1"


def test_control_and_invisible_characters_are_stripped() -> None:
    text = "pay\u200bpal\u0007 \u202eevil\u202c \ufeffok\u0000"
    assert normalize_text(text) == "paypal evil ok"


def test_crlf_and_unicode_line_separators_become_line_feeds() -> None:
    assert normalize_text("a\r\nb\rc\u2028d") == "a\nb\nc\nd"


def test_whitespace_collapses_and_paragraph_breaks_stay() -> None:
    assert normalize_text("  a \t\u00a0 b\n\n\n\n  c \n d  ") == "a b\n\nc\nd"


def test_emoji_zero_width_joiner_is_kept_between_emoji_only() -> None:
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    assert normalize_text(f"hi {family}") == f"hi {family}"
    assert normalize_text("a\u200db") == "ab"
    assert normalize_text(family, preserve_emojis=False) == "\U0001f468\U0001f469\U0001f467"


def test_steps_can_be_turned_off() -> None:
    text = " a\u200b  b "
    assert normalize_text(text, strip_control=False, collapse_whitespace=False, trim=False) == text
    assert normalize_text("ﬁ", form=None) == "ﬁ"
    assert normalize_text("ﬁ", form="NFC") == "ﬁ"


def test_a_stripped_control_character_does_not_leave_a_decomposed_letter() -> None:
    # "e", BEL, combining acute: once BEL goes, NFKC composes; one call does both
    assert normalize_text("e\u0007\u0301") == "\u00e9"


def test_homoglyphs_fold_in_mixed_script_words_only() -> None:
    spoofed = "p\u0430ypal"  # Cyrillic a inside a Latin word
    russian = "\u043f\u0440\u0438\u0432\u0435\u0442"  # "privet", all Cyrillic
    out = normalize_text(f"{spoofed} {russian}", fold_homoglyphs="mixed")
    assert out == f"paypal {russian}"
    assert normalize_text(spoofed) == spoofed  # off by default


def test_homoglyph_folding_all_folds_whole_words() -> None:
    assert normalize_text("\u0441\u0430\u0440", fold_homoglyphs="all").isascii()


def test_normalizer_rewrites_user_messages_and_keeps_the_rest() -> None:
    model = ScriptedModel([Say("ok")])
    agent = Agent.create("m", input_processors=[UnicodeNormalizer()])
    hist = MessageList.of([
        Message(id="u1", role="user", parts=(TextPart("ｈｅｌｌｏ\u200b  world "),)),
    ])
    run = Simulator(model).run(agent, hist)
    assert model.requests[0].messages[0].text == "hello world"
    assert run.result.messages.messages[0].id == "u1"


def test_unchanged_input_is_not_replaced() -> None:
    n = UnicodeNormalizer()
    agent = Agent.create("m", input_processors=[n])
    run = Simulator(ScriptedModel([Say("ok")])).run(agent, "already clean")
    assert [type(e).__name__ for e in run.trace.effects_of(n.id)] == ["Continue", "Continue"]


def test_every_step_normalizes_string_tool_results() -> None:
    def fetch() -> str:
        """Fetch a page."""
        return "ｐａｇｅ\u200b text"

    model = ScriptedModel([Say(calls=[call("fetch")]), Say("done")])
    agent = Agent.create(
        "m", tools=[fetch],
        input_processors=[UnicodeNormalizer(roles=("user", "tool"), every_step=True)],
    )
    Simulator(model).run(agent, "go")
    results = [p for m in model.requests[1].messages for p in m.parts
               if isinstance(p, ToolResultPart)]
    assert results[0].result == "page text"


@pytest.fixture
def no_confusables(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As if `confusable-homoglyphs` were not installed (None in sys.modules blocks it)."""
    un._ascii_lookalikes.cache_clear()
    for name in ("confusable_homoglyphs", "confusable_homoglyphs.confusables"):
        monkeypatch.setitem(sys.modules, name, None)
    yield
    un._ascii_lookalikes.cache_clear()


def test_folding_without_the_extra_names_the_extra(no_confusables: None) -> None:
    with pytest.raises(GuardsExtraMissing, match=r"pipeline-agents\[guards\]"):
        UnicodeNormalizer(fold_homoglyphs="mixed")
    UnicodeNormalizer()  # without folding, nothing optional is needed
