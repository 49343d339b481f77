"""Typed output: `Agent.create(..., output_type=T)`, the schema each provider needs, and a
reply that fails validation retried with feedback, then failed with a typed error."""

from __future__ import annotations

import dataclasses
import json
from typing import TypedDict

import msgspec
import pydantic
import pytest

from effects import Replace
from interpreters.providers.anthropic import AnthropicOptions
from interpreters.providers.anthropic import encode_request as anthropic_body
from interpreters.providers.openai_chat import OpenAIChatOptions
from interpreters.providers.openai_chat import encode_request as openai_body
from interpreters.testing import Say, call
from pipeline.processor import (
    InputStepArgs,
    InputStepResult,
    OutputStepArgs,
    OutputStepResult,
    StepChange,
    processor,
)
from pipeline.values.messages import SystemMessage, TextPart, user
from pipeline.values.model import ModelRequest, StructuredOutput
from pipeline.values.output_type import OutputInvalid, TypedOutput, strict_schema
from tests.helpers import make_agent, simulate, user_texts


class Place(msgspec.Struct, frozen=True):
    city: str
    country: str | None = None


class Forecast(msgspec.Struct, frozen=True):
    place: Place
    high: int
    notes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class DataForecast:
    city: str
    high: int


class DictForecast(TypedDict):
    city: str
    high: int


class PydForecast(pydantic.BaseModel):
    city: str
    high: int = pydantic.Field(ge=-100)


GOOD = '{"place": {"city": "Oslo"}, "high": 12}'


def test_a_struct_output_type() -> None:
    ran = simulate(make_agent(output_type=Forecast), [Say(GOOD)])
    assert ran.result.status == "finished"
    assert ran.result.output == Forecast(Place("Oslo"), 12)
    assert ran.result.output_as(Forecast).place.city == "Oslo"
    with pytest.raises(TypeError):
        ran.result.output_as(Place)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (DataForecast, DataForecast("Oslo", 12)),
        (DictForecast, {"city": "Oslo", "high": 12}),
        (PydForecast, PydForecast(city="Oslo", high=12)),
    ],
)
def test_dataclass_typeddict_and_pydantic_output_types(kind: type, expected: object) -> None:
    ran = simulate(make_agent(output_type=kind), [Say('{"city": "Oslo", "high": 12}')])
    assert ran.result.status == "finished"
    assert ran.result.output == expected


def test_the_request_carries_an_inlined_schema() -> None:
    ran = simulate(make_agent(output_type=Forecast), [Say(GOOD)])
    so = ran.requests[0].structured_output
    assert so is not None
    assert "$ref" not in so.schema and so.schema["type"] == "object"
    # what the model is sent is plain data: it round-trips through JSON
    msgspec.json.decode(msgspec.json.encode(ran.requests[0]), type=ModelRequest)


def _refs(node: object) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "$ref"] + [
            r for v in node.values() for r in _refs(v)
        ]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def _objects(node: object) -> list[dict[str, object]]:
    if isinstance(node, dict):
        here = [node] if node.get("type") == "object" else []
        return here + [o for v in node.values() for o in _objects(v)]
    if isinstance(node, list):
        return [o for v in node for o in _objects(v)]
    return []


def _request(so: StructuredOutput) -> ModelRequest:
    return ModelRequest(
        model="m", system=(SystemMessage("s"),), messages=(user("hi", id="u1"),),
        structured_output=so,
    )


def test_openai_gets_a_strict_schema() -> None:
    # A schema with a top-level $ref, as msgspec.json.schema makes it.
    raw = msgspec.json.schema(Forecast)
    assert "$ref" in raw
    body = json.loads(msgspec.json.encode(openai_body(
        _request(StructuredOutput(raw, "forecast")), model="m", stream=False,
        options=OpenAIChatOptions(),
    )))
    rf = body["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
    schema = rf["json_schema"]["schema"]
    assert _refs(schema) == [] and "$defs" not in schema
    objects = _objects(schema)
    assert len(objects) == 2  # Forecast and Place
    for o in objects:
        assert o["additionalProperties"] is False
        props = o["properties"]
        assert isinstance(props, dict)
        required = o["required"]
        assert isinstance(required, list)
        assert sorted(required) == sorted(props)
    assert strict_schema(raw) == schema


def test_anthropic_gets_a_forced_tool_with_the_schema() -> None:
    agent = make_agent(output_type=Forecast)
    so = agent.structured_output
    assert so is not None
    raw_body, json_tool = anthropic_body(
        _request(so), model="m", stream=False, options=AnthropicOptions()
    )
    body = json.loads(msgspec.json.encode(raw_body))
    assert json_tool is not None
    assert body["tool_choice"] == {"type": "tool", "name": json_tool}
    (t,) = body["tools"]
    assert t["input_schema"]["type"] == "object" and "$ref" not in t["input_schema"]


def test_an_invalid_reply_goes_back_as_feedback_then_a_valid_one_is_kept() -> None:
    ran = simulate(make_agent(output_type=Forecast), [Say('{"high": "warm"}'), Say(GOOD)])
    r = ran.result
    assert r.status == "finished" and r.retry_count == 1
    assert r.output == Forecast(Place("Oslo"), 12)
    feedback = user_texts(ran.requests[1])[-1]
    assert "Forecast" in feedback or "place" in feedback or "high" in feedback
    assert "warm" not in r.text  # the discarded reply is not the answer
    discarded = [c for c in ran.trace.chunks if getattr(c, "name", "") == "data-step-discarded"]
    assert len(discarded) == 1


def test_a_reply_that_stays_invalid_fails_with_a_typed_error() -> None:
    agent = make_agent(output_type=Forecast, max_processor_retries=2)
    ran = simulate(agent, [Say("not json")] * 3)
    r = ran.result
    assert r.status == "failed"
    assert isinstance(r.error, OutputInvalid)
    assert r.error.text == "not json" and r.error.step_number == 0
    assert len(ran.requests) == 3
    assert r.output is None
    assert "not json" not in r.text  # an invalid reply is not handed out as the answer


def test_a_tool_step_is_not_validated() -> None:
    def where() -> str:
        """Where we are."""
        return "Oslo"

    ran = simulate(
        make_agent(output_type=Forecast, tools=[where]),
        [Say(calls=[call("where")]), Say(GOOD)],
    )
    assert ran.result.status == "finished" and ran.result.retry_count == 0
    assert ran.result.output == Forecast(Place("Oslo"), 12)


def test_typed_output_per_step_through_step_change() -> None:
    def typed_last(args: InputStepArgs[None]) -> InputStepResult[None]:
        return Replace(StepChange(structured_output=TypedOutput.of(DataForecast)))

    ran = simulate(
        make_agent(prepare_step=typed_last),
        [Say("nope"), Say('{"city": "Oslo", "high": 3}')],
    )
    assert ran.result.output == DataForecast("Oslo", 3)
    assert ran.result.retry_count == 1
    so = ran.requests[0].structured_output
    assert so is not None and type(so) is StructuredOutput  # plain data on the wire
    assert json.loads(msgspec.json.encode(so))["name"] == "DataForecast"


class Node(msgspec.Struct, frozen=True):
    label: str
    children: tuple[Node, ...] = ()


def test_a_recursive_type_keeps_only_its_recursive_ref() -> None:
    typed = TypedOutput.of(Node)
    assert typed.schema["type"] == "object"
    defs = typed.schema["$defs"]
    assert isinstance(defs, dict) and set(defs) == {"Node"}
    strict = strict_schema(msgspec.json.schema(Node))
    assert strict["additionalProperties"] is False
    assert typed.decode('{"label": "a", "children": [{"label": "b"}]}') == Node(
        "a", (Node("b"),)
    )


def test_a_fenced_reply_decodes_and_a_non_object_type_is_refused() -> None:
    typed = TypedOutput.of(DataForecast)
    assert typed.decode('```json\n{"city": "Oslo", "high": 1}\n```') == DataForecast("Oslo", 1)
    with pytest.raises(TypeError, match="object type"):
        TypedOutput.of(int)
    with pytest.raises(ValueError, match="not both"):
        make_agent(output_type=Forecast, structured_output=StructuredOutput({"type": "object"}))


def test_anthropic_with_tools_lets_the_model_call_them_or_answer() -> None:
    from pipeline.values.model import ToolSpec

    agent = make_agent(output_type=Forecast)
    so = agent.structured_output
    assert so is not None
    req = msgspec.structs.replace(
        _request(so), tools=(ToolSpec("where", "Where we are", {"type": "object"}),)
    )
    raw_body, json_tool = anthropic_body(req, model="m", stream=False, options=AnthropicOptions())
    body = json.loads(msgspec.json.encode(raw_body))
    assert body["tool_choice"] == {"type": "any"}
    assert [t["name"] for t in body["tools"]] == ["where", json_tool]


def _redact_step(args: OutputStepArgs[None]) -> OutputStepResult[None]:
    """An output-step processor that replaces the response (the word SECRET) in the
    history."""
    msgs = args.message_list.messages
    last = msgs[-1].with_parts(
        tuple(TextPart(p.text.replace("SECRET", "[x]")) if isinstance(p, TextPart) else p
              for p in msgs[-1].parts)
    )
    return Replace(args.message_list.replace_messages([*msgs[:-1], last]))


@pytest.mark.parametrize("typed", [False, True], ids=["plain", "typed"])
def test_a_step_s_text_is_the_model_s_text_with_or_without_an_output_type(typed: bool) -> None:
    # StepResult.text is what the model said (what was streamed), the history holds what an
    # output-step processor made of it: the same with a typed output as without one.
    said = '{"city": "SECRET", "high": 20}'
    agent = make_agent(
        output_processors=[processor("redact", process_output_step=_redact_step)],
        output_type=DataForecast if typed else None,
    )
    result = simulate(agent, [Say(said)]).result
    assert result.status == "finished"
    assert result.text == '{"city": "[x]", "high": 20}'
    assert [s.text for s in result.steps] == [said]
