"""A tool parameter's `pattern` is held to JSON Schema's meaning, which the model was
given: `$` is the end of the string, not "before a final newline" as in Python's `re`.
The schema keeps the pattern as written."""

from __future__ import annotations

from typing import Annotated

import msgspec
import pytest

from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.tools import make_tool
from pipeline.values.schema import ecma_pattern

Lower = Annotated[str, msgspec.Meta(pattern="^[a-z]+$", description="lowercase")]


def word(w: Lower) -> str:
    """Takes a lowercase word."""
    return w


def words(ws: list[Lower], tags: dict[str, Lower] | None = None) -> int:
    """Takes lowercase words."""
    return len(ws)


def price(p: Annotated[str, msgspec.Meta(pattern=r"^\$[0-9]+$")],
          sym: Annotated[str, msgspec.Meta(pattern="^[$]$")] = "$") -> str:
    """A dollar price."""
    return p


def test_a_dollar_anchor_does_not_match_before_a_final_newline() -> None:
    t = make_tool(word)
    assert t.bind({"w": "ab"}) == {"w": "ab"}
    for bad in ("ab\n", "ab\n\n", "Ab", ""):
        with pytest.raises(msgspec.ValidationError):
            t.bind({"w": bad})


def test_the_schema_keeps_the_pattern_as_written() -> None:
    props = make_tool(word).spec.parameters["properties"]
    assert isinstance(props, dict)
    assert props["w"] == {"type": "string", "pattern": "^[a-z]+$", "description": "lowercase"}


def test_patterns_inside_lists_dicts_and_optionals_too() -> None:
    t = make_tool(words)
    assert t.bind({"ws": ["a", "b"], "tags": {"k": "v"}}) == {"ws": ["a", "b"], "tags": {"k": "v"}}
    with pytest.raises(msgspec.ValidationError):
        t.bind({"ws": ["a", "b\n"]})
    with pytest.raises(msgspec.ValidationError):
        t.bind({"ws": [], "tags": {"k": "v\n"}})


def test_escaped_dollars_and_dollars_in_a_class_stay_literal() -> None:
    t = make_tool(price)
    assert t.bind({"p": "$12", "sym": "$"}) == {"p": "$12", "sym": "$"}
    for bad in ({"p": "$12\n"}, {"p": "12"}, {"p": "$1", "sym": "$\n"}):
        with pytest.raises(msgspec.ValidationError):
            t.bind(bad)
    assert ecma_pattern(r"^\$[$a]$") == r"^\$[$a]\Z"
    assert ecma_pattern(r"a[\]$]b$") == r"a[\]$]b\Z"


def test_the_model_gets_an_error_result_on_every_interpreter() -> None:
    def script() -> ScriptedModel:
        return ScriptedModel([Say("", calls=[call("word", w="ab\n")]), Say("ok")])

    agent = Agent.create("m", tools=[word])
    [res] = Simulator(script()).run(agent, "go").result.steps[0].tool_results
    assert res.is_error and "invalid arguments" in str(res.result)


@pytest.mark.anyio
async def test_the_async_interpreter_refuses_it_too() -> None:
    model = ScriptedModel([Say("", calls=[call("word", w="ab\n")]), Say("ok")])
    run = await AsyncSimulator(model).run(Agent.create("m", tools=[word]), "go")
    [res] = run.result.steps[0].tool_results
    assert res.is_error and "invalid arguments" in str(res.result)
