"""A secret is stored in no journal, however the model streams it.

For any secret (quotes, backslashes, slashes, control and non-ASCII characters in it),
echoed by the model raw or JSON-escaped (once or twice), with any text around it and
cut into deltas anywhere (one character a delta included), in the text or the reasoning,
the journal's bytes hold no encoded form of it, no stream's deltas joined hold it, and
each delta is still its own entry; nor do the commands' recorded fields, read in a row.
"""

from __future__ import annotations

import json

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from interpreters.record.journal import CommandSeen, Journal, ModelReplied, Recorder
from interpreters.testing import Say, ScriptedModel, Simulator
from pipeline.agent import Agent
from pipeline.values.chunks import ReasoningDelta, TextDelta

ALPHABET = st.sampled_from('ab"\\/\n\t\x00\u00e9\u2028<&\'k-09')
secrets = st.text(ALPHABET, min_size=6, max_size=24).map(lambda tail: "sk-" + tail)
"""Shaped as API keys are (so it is no digits a timestamp could also hold)."""
texts = st.text(st.sampled_from('ab"\\/ \nk-'), max_size=12)


def text_forms(secret: str) -> set[str]:
    """Every form the secret may take in a string (written out independently of the
    library's own list)."""
    levels = [{secret}]
    for _ in range(2):
        nxt: set[str] = set()
        for f in levels[-1]:
            j = json.dumps(f, ensure_ascii=False)[1:-1]
            nxt |= {j, json.dumps(f)[1:-1], j.replace("/", "\\/"), repr(f)[1:-1]}
        levels.append(nxt)
    return set().union(*levels)


def strings(value: object) -> list[str]:
    """Every string in a decoded JSON value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *strings(v))]
    return []


@st.composite
def streamed(draw: st.DrawFn) -> tuple[str, list[str], str]:
    secret = draw(secrets)
    level = draw(st.integers(0, 2))
    echoed = secret
    for _ in range(level):
        echoed = json.dumps(echoed)[1:-1]
    text = draw(texts) + echoed + draw(texts)
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=len(text))))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    where = draw(st.sampled_from(["text", "reasoning"]))
    return secret, [p for p in pieces if p], where


@given(streamed())
def test_a_streamed_secret_is_stored_in_no_entry_and_no_join(
    case: tuple[str, list[str], str],
) -> None:
    secret, pieces, where = case
    rec = Recorder(secrets=[secret])
    say = Say(pieces) if where == "text" else Say("ok", reasoning=pieces)
    Simulator(ScriptedModel([say]), observers=[rec]).run(Agent.create("m"), "go")
    data = rec.last().to_ndjson()
    forms = text_forms(secret)
    for line in data.splitlines():
        for text in strings(msgspec.json.decode(line)):
            assert not any(f in text for f in forms), text
    for form in forms:  # nor as a JSON string holds it
        assert msgspec.json.encode(form)[1:-1] not in data
    journal = Journal.from_ndjson(data)
    joined: dict[str, str] = {}
    deltas = 0
    for e in journal.entries:
        if isinstance(e, ModelReplied) and isinstance(e.event, TextDelta | ReasoningDelta):
            deltas += 1
            joined[e.event.id] = joined.get(e.event.id, "") + e.event.text
    streamed_count = len(pieces) + (1 if where == "reasoning" else 0)
    assert deltas == streamed_count
    for text in joined.values():
        assert not any(f in text for f in forms), text
    # nor the commands' recorded fields, read one after the other
    previews = "".join(f.value for e in journal.entries if isinstance(e, CommandSeen)
                       for f in e.fields)
    assert not any(f in previews for f in forms)
