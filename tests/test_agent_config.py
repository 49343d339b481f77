"""The agent: configuration, its checks, typed tools, and what reaches the model."""

from __future__ import annotations

import pytest

from effects import Continue
from interpreters.testing import Say
from pipeline.agent import Agent
from pipeline.processor import (
    ApiErrorArgs,
    ApiErrorResult,
    InputArgs,
    InputResult,
    Processor,
    StreamArgs,
    StreamResult,
    processor,
)
from pipeline.tools import make_tool, tool
from pipeline.values.messages import SystemMessage
from tests.helpers import make_agent, simulate, system_texts


def weather(city: str, unit: str = "C", days: int = 1) -> str:
    """Weather for a city."""
    return f"{city}:{unit}:{days}"


class InputOnly(Processor):
    id = "in"

    def process_input(self, args: InputArgs[None]) -> InputResult[None]:
        return Continue()


class StreamOnly(Processor):
    id = "stream"

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        return Continue()


class ErrorOnly(Processor):
    id = "err"

    def process_api_error(self, args: ApiErrorArgs[None]) -> ApiErrorResult[None]:
        return Continue()


def test_defaults() -> None:
    a = Agent.create("m")
    assert (a.max_steps, a.max_processor_retries, a.max_api_error_retries) == (10, 3, 3)
    assert a.tool_choice == "auto"
    assert a.instructions == ()


def test_instructions_become_system_messages_in_every_request() -> None:
    a = make_agent(instructions=["one", SystemMessage("two", "tagged")])
    assert a.instructions == (SystemMessage("one"), SystemMessage("two", "tagged"))
    assert make_agent(instructions="solo").instructions == (SystemMessage("solo"),)
    ran = simulate(a, [Say("ok")])
    assert system_texts(ran.requests[0]) == ["one", "two"]
    assert ran.result.messages.system_by_tag("tagged") == (SystemMessage("two", "tagged"),)


def test_the_agent_is_a_frozen_value() -> None:
    a = Agent.create("m")
    with pytest.raises(AttributeError):
        a.max_steps = 2  # type: ignore[misc]


def test_a_tool_schema_comes_from_the_function_signature() -> None:
    t = make_tool(weather)
    assert t.name == "weather"
    assert t.spec.description == "Weather for a city."
    params = t.spec.parameters
    assert params["type"] == "object"
    props = params["properties"]
    assert isinstance(props, dict)
    assert props["city"] == {"type": "string"}
    assert props["days"] == {"type": "integer", "default": 1}
    assert params["required"] == ["city"]
    assert t.bind({"city": "Oslo"}) == {"city": "Oslo", "unit": "C", "days": 1}


def test_plain_functions_given_as_tools_become_typed_tools_sent_to_the_model() -> None:
    ran = simulate(make_agent(tools=[weather]), [Say("ok")])
    (spec,) = ran.requests[0].tools
    assert spec == make_tool(weather).spec


def test_tool_decorator_with_a_name() -> None:
    @tool(name="forecast", description="Forecast.")
    def f(city: str) -> str:
        return city

    assert (f.name, f.spec.description) == ("forecast", "Forecast.")


def test_tools_that_cannot_be_described_are_rejected() -> None:
    def varargs(*xs: int) -> int:
        return 0

    def untyped(x) -> int:  # type: ignore[no-untyped-def]
        return 0

    with pytest.raises(TypeError, match=r"\*args"):
        make_tool(varargs)
    with pytest.raises(TypeError, match="type annotation"):
        make_tool(untyped)


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"max_steps": 0}, "max_steps"),
        ({"max_processor_retries": -1}, "max_processor_retries"),
        ({"max_api_error_retries": -1}, "max_api_error_retries"),
        ({"tools": [weather, weather]}, "duplicate tool names"),
    ],
)
def test_invalid_configuration_is_rejected(kw: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Agent.create("m", **kw)  # type: ignore[arg-type]


def test_processors_must_implement_a_hook_of_their_role() -> None:
    with pytest.raises(TypeError, match="input processor 'stream'"):
        Agent.create("m", input_processors=[StreamOnly()])
    with pytest.raises(TypeError, match="output processor 'in'"):
        Agent.create("m", output_processors=[InputOnly()])
    with pytest.raises(TypeError, match="error processor 'in'"):
        Agent.create("m", error_processors=[InputOnly()])
    Agent.create(
        "m",
        input_processors=[InputOnly()],
        output_processors=[StreamOnly()],
        error_processors=[ErrorOnly()],
    )


@pytest.mark.filterwarnings("ignore::pipeline.ProcessorPlacementWarning")  # placed so on purpose
def test_processor_ids_must_be_unique_but_one_instance_may_serve_two_roles() -> None:
    class Both(Processor):
        id = "in"

        def process_input(self, args: InputArgs[None]) -> InputResult[None]:
            return Continue()

        def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
            return Continue()

    with pytest.raises(ValueError, match="unique"):
        Agent.create("m", input_processors=[InputOnly(), Both()])
    both = Both()
    Agent.create("m", input_processors=[both], output_processors=[both])


def test_things_that_are_not_processors_are_rejected() -> None:
    with pytest.raises(TypeError, match="not a Processor"):
        Agent.create("m", input_processors=[object()])  # type: ignore[list-item]

    class NoId(Processor):
        def process_input(self, args: InputArgs[None]) -> InputResult[None]:
            return Continue()

    with pytest.raises(TypeError, match="no id"):
        Agent.create("m", input_processors=[NoId()])


def test_a_function_processor_needs_a_hook() -> None:
    with pytest.raises(ValueError, match="at least one hook"):
        processor("empty")
    p = processor("p", process_input=lambda a: Continue())
    assert set(p.hook_functions()) == {"process_input"}
    assert p.display_name == "p"


def test_a_function_processor_refuses_a_hook_it_does_not_know() -> None:
    # a misspelt hook is an error, never a processor that silently lacks the guard
    with pytest.raises(TypeError, match="process_outputstream"):
        processor("p", process_outputstream=lambda a: Continue())  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="process_approved"):  # not one processor() takes
        processor("p", process_approved=lambda a: Continue())  # type: ignore[call-overload]
    p = processor("p", process_input=None, process_tool_result=lambda a: Continue())
    assert list(p.hook_functions()) == ["process_tool_result"]


def test_a_class_processor_exposes_only_the_hooks_it_overrides() -> None:
    assert set(StreamOnly().hook_functions()) == {"process_output_stream"}

    class Sub(StreamOnly):
        id = "sub"

        def process_input(self, args: InputArgs[None]) -> InputResult[None]:
            return Continue()

    assert set(Sub().hook_functions()) == {"process_output_stream", "process_input"}


def test_a_processor_without_an_id_is_refused_saying_how_to_give_one() -> None:
    class Nameless(Processor):
        def process_input(self, args: InputArgs[None]) -> InputResult[None]:
            return Continue()

    with pytest.raises(TypeError, match=r"input processor Nameless has no id: give the "
                                        r"class an `id = \"...\"`"):
        Agent.create("m", input_processors=[Nameless()])


@pytest.mark.parametrize("bad", [5, None, b"bytes", [SystemMessage("ok"), 3]])
def test_instructions_of_another_type_are_refused_naming_what_they_may_be(bad: object) -> None:
    with pytest.raises(TypeError, match=r"^instructions must be a str, a SystemMessage or an "
                                        r"iterable of them, got (int|NoneType|bytes)$"):
        Agent.create("m", instructions=bad)  # type: ignore[arg-type]
