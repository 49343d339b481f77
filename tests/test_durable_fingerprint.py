"""The fingerprint a durable run records of its agent: stable for the same definition
(built anew, in another process), and each kind of change is named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec

from effects import Continue
from examples.quality_guardrail import QualityGuardrail
from interpreters.durable.fingerprint import DEFINITION, changes, definition, digest, encode
from pipeline.agent import Agent
from pipeline.processor import ToolCallArgs, ToolCallResult, processor
from pipeline.processors import PIIDetector
from pipeline.tools import tool
from pipeline.values.model import ModelSettings, ToolChoiceTool
from pipeline.values.retry import RetryPolicy
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


def gate(a: ToolCallArgs[None]) -> ToolCallResult[None]:
    return Continue()


def other_gate(a: ToolCallArgs[None]) -> ToolCallResult[None]:
    return Continue()


def test_what_shapes_a_run_besides_its_parts_is_named_with_its_values() -> None:
    old = definition(agent())
    cases = {
        "settings (max_steps 10 -> 1)": agent(max_steps=1),
        "settings (max_processor_retries 3 -> 0)": agent(max_processor_retries=0),
        "settings (max_api_error_retries 3 -> 9)": agent(max_api_error_retries=9),
        "settings (retry_policy)": agent(retry_policy=RetryPolicy(max_retries=0)),
        "settings (tool_choice 'auto' -> 'required')": agent(tool_choice="required"),
        "settings (tool_choice)": agent(tool_choice=ToolChoiceTool("lookup")),
        "settings (model_settings)": agent(model_settings=ModelSettings(temperature=0.0)),
        "settings (provider_options)": agent(provider_options={"store": False}),
        "settings (max_tool_result_bytes 1048576 -> 1000)": agent(max_tool_result_bytes=1000),
        "settings (prepare_step)": agent(prepare_step=lambda a: Continue()),
        "tools (lookup changed)": agent(tools=[tool(lookup, max_result_bytes=10)]),
    }
    for named, changed in cases.items():
        new = definition(changed)
        assert changes(old, new) == (named,), named
        assert digest(new) != digest(old)


def test_a_processors_options_are_part_of_it_not_only_its_id() -> None:
    def with_pii(**kw: object) -> Agent:
        return agent(input_processors=[PIIDetector(**kw)])  # type: ignore[arg-type]

    block = definition(with_pii(strategy="block"))
    assert digest(definition(with_pii(strategy="block"))) == digest(block)
    for weaker in (with_pii(strategy="detect"), with_pii(strategies={"email": "detect"}),
                   with_pii(custom={"ticket": r"T-[0-9]+"}),
                   with_pii(on_stream=False)):
        assert changes(block, definition(weaker)) == (
            "processors (input:pii-detector changed)",)
    custom = definition(with_pii(custom={"ticket": r"T-[0-9]+"}))
    assert changes(custom, definition(with_pii(custom={"ticket": r"T-[0-9]{4}"}))) == (
        "processors (input:pii-detector changed)",)
    # which function a processor made of functions runs is part of it too
    a = definition(agent(input_processors=[processor("g", process_tool_call=gate)]))
    b = definition(agent(input_processors=[processor("g", process_tool_call=other_gate)]))
    assert changes(a, b) == ("processors (input:g changed)",)
