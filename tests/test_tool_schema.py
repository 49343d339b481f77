"""Tool schemas: Annotated constraints kept and enforced, docstring parameter descriptions,
pydantic models as parameters."""

from __future__ import annotations

from typing import Annotated

import msgspec
import pydantic
import pytest

from interpreters.testing import Say, call
from pipeline.tools import ToolFn, make_tool
from tests.helpers import make_agent, simulate


def limited(
    city: Annotated[str, msgspec.Meta(description="The city name", min_length=1)],
    days: Annotated[int, msgspec.Meta(ge=1, le=7)] = 1,
) -> str:
    """Forecast for a city."""
    return f"{city}:{days}"


def test_annotated_meta_is_kept_in_the_schema() -> None:
    t = make_tool(limited)
    props = t.spec.parameters["properties"]
    assert isinstance(props, dict)
    assert props["city"] == {"type": "string", "description": "The city name", "minLength": 1}
    assert props["days"]["minimum"] == 1 and props["days"]["maximum"] == 7


def test_annotated_meta_is_enforced() -> None:
    t = make_tool(limited)
    assert t.bind({"city": "Oslo", "days": 3}) == {"city": "Oslo", "days": 3}
    with pytest.raises(msgspec.ValidationError, match="days"):
        t.bind({"city": "Oslo", "days": 9})
    with pytest.raises(msgspec.ValidationError):
        t.bind({"city": ""})


def test_a_call_breaking_a_constraint_is_an_error_result_the_model_sees() -> None:
    agent = make_agent(tools=[limited])
    ran = simulate(agent, [Say(calls=[call("limited", city="Oslo", days=30)]), Say("ok")])
    (res,) = [p for m in ran.messages for p in m.tool_results()]
    assert res.is_error and "days" in str(res.result)


def google(city: str, days: int = 1) -> str:
    """Forecast for a city.

    Looks it up in the almanac.

    Args:
        city: The city to look up.
        days: How many days ahead.
    """
    return city


def numpy_style(city: str, days: int = 1) -> str:
    """Forecast for a city.

    Parameters
    ----------
    city : str
        The city to look up.
    days : int
        How many days ahead.
    """
    return city


def sphinx(city: str, days: int = 1) -> str:
    """Forecast for a city.

    :param city: The city to look up.
    :param days: How many days ahead.
    """
    return city


@pytest.mark.parametrize("fn", [google, numpy_style, sphinx])
def test_parameter_descriptions_come_from_the_docstring(fn: ToolFn) -> None:
    t = make_tool(fn)
    props = t.spec.parameters["properties"]
    assert isinstance(props, dict)
    assert props["city"]["description"] == "The city to look up."
    assert props["days"]["description"] == "How many days ahead."
    # The Args section is in the parameters, not repeated in the tool's description.
    assert t.spec.description.startswith("Forecast for a city.")
    assert "How many days ahead" not in t.spec.description


def test_a_meta_description_wins_over_the_docstring() -> None:
    def f(city: Annotated[str, msgspec.Meta(description="From Meta")]) -> str:
        """Do it.

        Args:
            city: From the docstring.
        """
        return city

    props = make_tool(f).spec.parameters["properties"]
    assert isinstance(props, dict)
    assert props["city"]["description"] == "From Meta"


class Address(pydantic.BaseModel):
    street: str
    number: int = pydantic.Field(ge=1, description="House number")


def ship(to: Address, express: bool = False) -> str:
    """Ship a parcel.

    Args:
        to: Where to.
    """
    return f"{to.street} {to.number} {express}"


def test_a_pydantic_model_parameter_has_its_schema_and_is_validated() -> None:
    t = make_tool(ship)
    params = t.spec.parameters
    props = params["properties"]
    assert isinstance(props, dict)
    to = props["to"]
    # the model's schema, inline or through $defs
    assert to.get("description") == "Where to."
    defs = params.get("$defs", {})
    assert isinstance(defs, dict)
    model_schema = defs[to["$ref"].rsplit("/", 1)[-1]] if "$ref" in to else to
    assert model_schema["properties"]["number"]["minimum"] == 1
    kwargs = t.bind({"to": {"street": "Main", "number": 3}})
    assert kwargs["to"] == Address(street="Main", number=3)
    with pytest.raises(msgspec.ValidationError, match="number"):
        t.bind({"to": {"street": "Main", "number": 0}})


def test_a_pydantic_parameter_runs_in_a_run() -> None:
    agent = make_agent(tools=[ship])
    ran = simulate(
        agent,
        [Say(calls=[call("ship", to={"street": "Main", "number": 3})]), Say("ok")],
    )
    (res,) = [p for m in ran.messages for p in m.tool_results()]
    assert res.result == "Main 3 False" and not res.is_error


def test_without_docstring_parser_the_docstring_is_the_description(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "docstring_parser", None)  # import raises ImportError
    t = make_tool(google)
    props = t.spec.parameters["properties"]
    assert isinstance(props, dict)
    assert "description" not in props["city"]
    assert "How many days ahead." in t.spec.description


def test_a_pydantic_parameter_may_have_a_default() -> None:
    def ship_home(to: Address = Address(street="Home", number=1)) -> str:  # noqa: B008
        """Ship home unless told otherwise."""
        return f"{to.street} {to.number}"

    t = make_tool(ship_home)
    assert t.bind({}) == {"to": Address(street="Home", number=1)}
    assert t.bind({"to": {"street": "Main", "number": 2}})["to"] == Address(street="Main", number=2)
