"""PIIDetector never lets a disguised value through, however it is disguised and however
the stream is cut.

For a PII value (an email, a payment card, an IBAN, an API key), any disguise of it that
renders like the plain value (invisible characters inserted anywhere inside it, any of
its characters in full-width form, Cyrillic look-alikes for some Latin letters) and any
chunking of the text holding it: read plainly (NFKC, invisible characters dropped, the
look-alikes as Latin), neither the text the caller streamed, nor `result.text`, nor
`result.messages`, nor what the model was sent hold the value. No UnicodeNormalizer runs
before the detector."""

from __future__ import annotations

import itertools
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from interpreters.testing import Say, ScriptedModel, Simulator
from pipeline.agent import Agent
from pipeline.processors import PIIDetector
from pipeline.processors.guards.pii import Strategy
from pipeline.values.chunks import TextDelta
from properties.test_pii_properties import cards, emails

KNOWN = (
    "DE89 3704 0044 0532 0130 00",
    "GB82WEST12345698765432",
    "4111 1111 1111 1111",
    "5500-0000-0000-0004",
    "sk-proj-abcdefghijklmnopqrstuvwxyz0123",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB",
)
values = st.one_of(st.sampled_from(KNOWN), emails, cards)

INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff\u00ad\u034f\ufe0f"
_LATIN = "aeopcxyABEHKMOPCTX"
_CYRILLIC = (
    "\u0430\u0435\u043e\u0440\u0441\u0445\u0443\u0410\u0412\u0415\u041d\u041a\u041c"
    "\u041e\u0420\u0421\u0422\u0425"
)
_TO_CYRILLIC = dict(zip(_LATIN, _CYRILLIC, strict=True))
_TO_LATIN = str.maketrans(_CYRILLIC, _LATIN)


def plain(text: str) -> str:
    """The text as a reader sees it."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(
        c for c in text if unicodedata.category(c) != "Cf" and c not in "\u034f\ufe0f"
    )
    return text.translate(_TO_LATIN)


@st.composite
def disguised(draw: st.DrawFn, value: str) -> str:
    out: list[str] = []
    for i, c in enumerate(value):
        how = draw(st.sampled_from(("plain", "plain", "full-width", "look-alike")))
        if how == "full-width" and "!" <= c <= "~":
            c = chr(ord(c) + 0xFEE0)
        elif how == "look-alike" and c in _TO_CYRILLIC:
            c = _TO_CYRILLIC[c]
        out.append(c)
        if i < len(value) - 1:
            out.append(draw(st.text(INVISIBLE, max_size=3)))
    return "".join(out)


prose = st.text("abcdefghij klmnopqrstuvwxyz ABC .,;!?\n", max_size=80)
separators = st.sampled_from([" ", "\n", ", ", ": ", " (", ") ", " - "])


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, str, list[str]]:
    value = draw(values)
    shown = draw(disguised(value))
    text = draw(prose) + draw(separators) + shown + draw(separators) + draw(prose)
    cuts = sorted(set(draw(st.lists(st.integers(1, len(text) - 1), max_size=40))))
    bounds = [0, *cuts, len(text)]
    return value, shown, [text[a:b] for a, b in itertools.pairwise(bounds)]


@given(cases(), st.sampled_from(("redact", "mask", "hash", "remove")), st.booleans())
def test_a_disguised_value_never_reaches_the_caller_the_text_the_messages_or_the_model(
    case: tuple[str, str, list[str]], strategy: Strategy, in_prompt: bool
) -> None:
    value, shown, chunks = case
    detector = PIIDetector(strategy=strategy)
    agent = Agent.create("m", input_processors=[detector], output_processors=[detector])
    model = ScriptedModel([Say(chunks)])
    run = Simulator(model).run(agent, f"here: {shown} ok" if in_prompt else "hi")
    assert run.result.status == "finished", run.result.error
    streamed = [c.text for c in run.trace.chunks if isinstance(c, TextDelta)]
    assert all(value not in plain(c) for c in streamed), streamed
    assert value not in plain("".join(streamed)), streamed
    assert value not in plain(run.result.text)
    assert all(value not in plain(m.text) for m in run.result.messages.messages)
    assert all(value not in plain(m.text) for r in model.requests for m in r.messages)
