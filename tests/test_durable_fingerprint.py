"""The fingerprint a durable run records of its agent: stable for the same definition
(built anew, in another process), and each kind of change is named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec

from examples.quality_guardrail import QualityGuardrail
from interpreters.durable.fingerprint import DEFINITION, changes, definition, digest, encode
from pipeline.agent import Agent
from pipeline.tools import tool
from tests.helpers import make_agent

ROOT = Path(__file__).resolve().parent.parent


def lookup(city: str) -> str:
    """The weather in a city."""
    return city


def lookup_by_day(city: str, day: int) -> str:
    """The weather in a city."""
    return city


class Answer(msgspec.Struct):
    city: str


def agent(**kw: object) -> Agent:
    base: dict[str, object] = {
        "instructions": "Be brief.", "tools": [tool(lookup)],
        "output_processors": [QualityGuardrail("judge", threshold=0.7)],
    }
    return make_agent(**{**base, **kw})


def test_the_same_definition_built_twice_has_one_digest() -> None:
    assert digest(definition(agent())) == digest(definition(agent()))
    assert DEFINITION.decode(encode(definition(agent()))) == definition(agent())


def test_the_digest_is_the_same_in_another_process() -> None:
    code = (
        "from tests.test_durable_fingerprint import agent;"
        "from interpreters.durable.fingerprint import definition, digest;"
        "print(digest(definition(agent())))"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                           check=True)
    assert other.stdout.strip() == digest(definition(agent()))


def test_each_kind_of_change_is_named() -> None:
    old = definition(agent())
    cases = {
        "model ('sim/model' -> 'other/model')": agent(model="other/model"),
        "instructions": agent(instructions="Be long."),
        "tools (lookup changed)": agent(tools=[tool(lookup_by_day, name="lookup")]),
        "tools (lookup removed, weather added)": agent(tools=[tool(lookup, name="weather")]),
        "processors (output:quality-guardrail changed)": agent(
            output_processors=[QualityGuardrail("judge", threshold=0.9)]
        ),
        "processors (output:quality-guardrail removed)": agent(output_processors=[]),
        "output type": agent(output_type=Answer),
    }
    for named, changed in cases.items():
        new = definition(changed)
        assert changes(old, new) == (named,), named
        assert digest(new) != digest(old)
    assert changes(old, definition(agent())) == ()
