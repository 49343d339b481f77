"""PIIDetector never lets a value through, however the stream is cut, on every interpreter.

For a text of prose holding one PII value (an email, phone number, payment card, IBAN,
national id, IP address or API key, generated or drawn from known-valid ones) and any
chunking of it (hypothesis chooses the cut points), run through an agent whose model
streams those chunks and whose input and output processors hold a `PIIDetector` with a
redacting strategy (redact, mask, hash, remove or block): the value is in none of the chunks the
caller receives, not in `result.text`, and not in `result.messages`, on the `Simulator`
and on the `AsyncSimulator` under asyncio and trio (which make the very same run). The
prompt carries the value too, half of the time, so input redaction is covered as well
(with "block" the run then stops before any model call, and the caller's own message is
all the history holds)."""

from __future__ import annotations

import itertools

import anyio
import msgspec
from hypothesis import given
from hypothesis import strategies as st

from interpreters.testing import (
    AsyncSimulator,
    Say,
    ScriptedModel,
    SimRun,
    Simulator,
    numbered_run_ids,
)
from pipeline.agent import Agent
from pipeline.processors import PIIDetector
from pipeline.processors.guards.pii import Strategy

REDACTING: tuple[Strategy, ...] = ("redact", "mask", "hash", "remove", "block")

KNOWN = (
    "+1 415-555-2671",
    "(415) 555-2671",
    "+44 20 7946 0958",
    "4111 1111 1111 1111",
    "5500-0000-0000-0004",
    "378282246310005",
    "DE89 3704 0044 0532 0130 00",
    "GB82WEST12345698765432",
    "536-90-4399",
    "12345678Z",
    "390.533.447-05",
    "192.168.10.20",
    "2001:db8::8a2e:370:7334",
    "sk-proj-abcdefghijklmnopqrstuvwxyz0123",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB",
)

_local = st.text("abcdefghijklmnopqrstuvwxyz0123456789._+-", min_size=1, max_size=20).filter(
    lambda s: s[0].isalnum() and s[-1].isalnum()
)
_label = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=12)
emails = st.builds(lambda a, b, c: f"{a}@{b}.{c}", _local, _label,
                   st.sampled_from(["com", "org", "io", "co.uk"]))


def _luhn_complete(body: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(body + "0")):
        n = int(ch) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return body + str((10 - total % 10) % 10)


cards = st.builds(
    _luhn_complete, st.text("0123456789", min_size=15, max_size=15).map(lambda s: "4" + s[1:])
)
values = st.one_of(st.sampled_from(KNOWN), emails, cards)

# Prose around the value: letters, spaces, punctuation (no digits or @, so the text has
# one value, the one the property follows); separators on both sides of it.
prose = st.text("abcdefghij klmnopqrstuvwxyz ABC .,;!?\n", max_size=120)
separators = st.sampled_from([" ", "\n", ", ", ": ", " (", ") ", " - "])


@st.composite
def chunked_texts(draw: st.DrawFn) -> tuple[str, str, list[str]]:
    value = draw(values)
    text = draw(prose) + draw(separators) + value + draw(separators) + draw(prose)
    cuts = sorted(set(draw(st.lists(st.integers(1, len(text) - 1), max_size=40))))
    bounds = [0, *cuts, len(text)]
    return value, text, [text[a:b] for a, b in itertools.pairwise(bounds)]


def _runs(agent: Agent, chunks: list[str], prompt: str) -> list[tuple[str, SimRun]]:
    def script() -> ScriptedModel:
        return ScriptedModel([Say(chunks)])

    out = [("simulator", Simulator(script(), run_ids=numbered_run_ids()).run(agent, prompt))]

    async def go() -> SimRun:
        return await AsyncSimulator(script(), run_ids=numbered_run_ids()).run(agent, prompt)

    for backend in ("asyncio", "trio"):
        out.append((backend, anyio.run(go, backend=backend)))
    return out


@given(
    chunked_texts(),
    st.sampled_from(REDACTING),
    st.booleans(),
)
def test_a_pii_value_never_reaches_the_caller_the_text_or_the_messages(
    case: tuple[str, str, list[str]], strategy: Strategy, in_prompt: bool
) -> None:
    """For any text holding a PII value and any chunking of it, the value is in none of
    the streamed chunks, nor in result.text, nor in result.messages, on the Simulator and
    the AsyncSimulator (asyncio, trio), whatever the redacting strategy."""
    value, _, chunks = case
    detector = PIIDetector(strategy=strategy)
    agent = Agent.create("m", input_processors=[detector], output_processors=[detector])
    prompt = f"here: {value} ok" if in_prompt else "hi"
    blocked_input = strategy == "block" and in_prompt
    runs = _runs(agent, chunks, prompt)
    first = runs[0][1]
    for name, run in runs:
        # every interpreter makes the same run: commands, effects, chunks, result
        assert run.trace.comparable() == first.trace.comparable(), name
        assert run.result == first.result, name
        streamed = msgspec.json.encode(run.trace.chunks).decode()
        # A blocked input stays the caller's own message in the history (the run never
        # called the model); everything else must be clean.
        kept = run.result.messages.response if blocked_input else run.result.messages.messages
        messages = msgspec.json.encode(kept).decode()
        if blocked_input:
            assert run.result.status == "tripped" and run.result.steps == (), name
        assert value not in streamed, (name, streamed)
        assert value not in run.result.text, name
        assert value not in messages, (name, messages)
        if strategy != "block":
            assert run.result.status == "finished", (name, run.result.error)
