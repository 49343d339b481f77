"""A tool result holding personal data never leaves a run with a PII guard on it raw.

For any JSON-like value with e-mail addresses somewhere in its strings, returned by a
tool (or raised in its error), and an agent whose output processors hold a redacting
`PIIDetector` (with or without `scan_tools`, as an input processor too or not), or an
input processor alone with `scan_tools` (its `process_tool_result` handles them): no raw
address is in the chunks the caller receives, in their UI message stream or NDJSON
encodings, in `result.steps` or in `result.messages`, on the `Simulator` and on the
`AsyncSimulator` under asyncio and trio. Every part the UI stream opened is closed."""

from __future__ import annotations

import json

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
    call,
    numbered_run_ids,
)
from pipeline.agent import Agent
from pipeline.processors import PIIDetector
from pipeline.processors.guards.pii import Strategy
from pipeline.tools import tool
from pipeline.ui_stream import ndjson, ui_message_sse

EMAILS = ("ada@example.com", "bo.x+tag@mail.example.org", "c_d@sub.example.net")
words = st.text(alphabet="abcxyz .,:-", max_size=12)


@st.composite
def with_email(draw: st.DrawFn) -> str:
    return f"{draw(words)} {draw(st.sampled_from(EMAILS))} {draw(words)}"


leaves = st.one_of(words, with_email(), st.integers(), st.booleans(), st.none())
values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(("a", "b", "contact", "note")), inner, max_size=3),
    ),
    max_leaves=8,
)


@st.composite
def tool_values(draw: st.DrawFn) -> object:
    """A value with at least one address: `values` wrapped around one at some depth."""
    v: object = draw(with_email())
    for _ in range(draw(st.integers(0, 3))):
        other = draw(values)
        v = {"x": other, "contact": v} if draw(st.booleans()) else [other, v]
    return v


def _agent(value: object, fails: bool, strategy: Strategy, scan: bool, lists: str
           ) -> Agent:
    @tool
    def crm(name: str) -> object:
        """Look a customer up."""
        if fails:
            raise RuntimeError(f"lookup failed: {json.dumps(value)}")
        return value

    pii = PIIDetector(types=("email",), strategy=strategy, scan_tools=scan or lists == "input")
    return Agent.create("sim/model", tools=[crm],
                        output_processors=[pii] if lists != "input" else [],
                        input_processors=[pii] if lists != "output" else [])


def _leaves(run: SimRun) -> str:
    chunks = list(run.trace.chunks)
    return "".join((
        msgspec.json.encode(chunks).decode(),
        b"".join(ui_message_sse(chunks)).decode(),
        b"".join(ndjson(chunks)).decode(),
        msgspec.json.encode(run.result.steps).decode(),
        msgspec.json.encode(run.result.messages).decode(),
    ))


def _open_ui_parts(run: SimRun) -> list[str]:
    open_: set[str] = set()
    for frame in b"".join(ui_message_sse(run.trace.chunks)).decode().split("\n\n"):
        if not frame.startswith("data: {"):
            continue
        e = json.loads(frame.removeprefix("data: "))
        t = e["type"]
        if t in ("text-start", "reasoning-start"):
            open_.add(f"{t[:-6]}{e['id']}")
        elif t in ("text-end", "reasoning-end"):
            open_.discard(f"{t[:-4]}{e['id']}")
    return sorted(open_)


@given(
    tool_values(),
    st.booleans(),
    st.sampled_from(("redact", "mask", "hash", "remove", "block")),
    st.booleans(),
    st.sampled_from(("output", "both", "input")),
)
def test_no_raw_value_of_a_tool_result_leaves_the_run(
    value: object, fails: bool, strategy: Strategy, scan: bool, lists: str
) -> None:
    def script() -> ScriptedModel:
        return ScriptedModel([Say(["Looking ", "it up."], calls=[call("crm", name="Ada")]),
                              Say(["Done, ", "thanks."])])

    agent = _agent(value, fails, strategy, scan, lists)
    runs = [Simulator(script(), run_ids=numbered_run_ids()).run(agent, "hi")]

    async def on_async() -> SimRun:
        return await AsyncSimulator(script(), run_ids=numbered_run_ids()).run(agent, "hi")

    runs += [anyio.run(on_async, backend=b) for b in ("asyncio", "trio")]
    for run in runs:
        assert run.result.status in ("finished", "tripped")
        out = _leaves(run)
        for email in EMAILS:
            assert email not in out
        assert _open_ui_parts(run) == []
    assert [r.result for r in runs[1:]] == [runs[0].result] * 2
