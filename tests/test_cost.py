"""Cost: per call, per step and per run (pipeline.values.cost), priced by genai-prices."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import genai_prices
import pytest

from effects import Continue, Replace
from interpreters.providers.prices import genai_prices as table
from interpreters.providers.prices import split_model
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline import Agent, OutputStepArgs, OutputStepResult, Processor, abort
from pipeline.processor import InputStepArgs, InputStepResult, StepChange
from pipeline.values import Usage
from pipeline.values.cost import Cost, PriceQuery, charge

START = 1_700_000_000.0


def flat(q: PriceQuery) -> Cost | None:
    """A made-up price list: one cent per input token, two per output token."""
    if "unknown" in q.model:
        return None
    i = Decimal(q.usage.input_tokens) / 100
    o = Decimal(q.usage.output_tokens) * 2 / 100
    return Cost(i + o, i, o)


class RetryOnce(Processor):
    id = "retry-once"

    def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        if args.retry_count == 0 and args.text:
            abort("again", retry=True)
        return Continue()


def tool(x: str) -> str:
    """A tool."""
    return x


def test_the_run_costs_every_call_the_steps_their_own() -> None:
    model = ScriptedModel([
        Say(calls=[call("tool", x="a")], usage=Usage(10, 1)),
        Say("discarded", usage=Usage(20, 2)),          # billed, though a processor drops it
        Say("kept", usage=Usage(30, 3)),
    ])
    agent = Agent.create("m", tools=[tool], output_processors=[RetryOnce()])
    r = Simulator(model, price=flat).run(agent, "go").result
    assert [s.cost for s in r.steps] == [flat(PriceQuery("m", None, Usage(10, 1), 0)),
                                         flat(PriceQuery("m", None, Usage(30, 3), 0))]
    assert r.cost == Cost(Decimal("0.72"), Decimal("0.60"), Decimal("0.12"))


class SwitchModel(Processor):
    id = "switch"

    def process_input_step(self, args: InputStepArgs[None]) -> InputStepResult[None]:
        if args.step_number == 1:
            return Replace(StepChange(model="unknown-model"))
        return Continue()


def test_one_unknown_model_makes_the_run_cost_unknown() -> None:
    model = ScriptedModel([Say(calls=[call("tool", x="a")])])
    other = ScriptedModel([Say("done")])
    agent = Agent.create("m", tools=[tool], input_processors=[SwitchModel()])
    r = Simulator(model, models={"unknown-model": other}, price=flat).run(agent, "go").result
    assert r.status == "finished"
    assert [s.model for s in r.steps] == ["m", "unknown-model"]
    assert r.steps[0].cost is not None and r.steps[1].cost is None
    assert r.cost is None  # not the first step's cost alone: that would be wrong


def test_without_a_pricer_there_is_no_cost() -> None:
    r = Simulator(ScriptedModel([Say("x")])).run(Agent.create("m"), "go").result
    assert r.cost is None


def test_a_pricer_that_raises_gives_no_cost_and_the_run_goes_on() -> None:
    def broken(q: PriceQuery) -> Cost | None:
        raise RuntimeError("table broken")

    r = Simulator(ScriptedModel([Say("x")]), price=broken).run(Agent.create("m"), "go").result
    assert r.status == "finished" and r.cost is None


def test_charge_sums_calls_until_one_cannot_be_priced_then_stays_unknown() -> None:
    """The one pricing rule the loop and the OTel observer share (`cost.charge`)."""
    def by_tokens(q: PriceQuery) -> Cost | None:
        if q.model == "unknown":
            return None
        if q.model == "broken":
            raise RuntimeError("table broken")
        return Cost(Decimal(q.usage.input_tokens))

    def query(model: str, tokens: int) -> PriceQuery:
        return PriceQuery(model, None, Usage(tokens, 0), 0.0)

    c, total, known = charge(by_tokens, query("m", 3), None, True)
    assert (c, total, known) == (Cost(Decimal(3)), Cost(Decimal(3)), True)
    c, total, known = charge(by_tokens, query("m", 4), total, known)
    assert (c, total, known) == (Cost(Decimal(4)), Cost(Decimal(7)), True)
    for model in ("unknown", "broken"):  # no price, never a wrong one
        assert charge(by_tokens, query(model, 1), total, True) == (None, total, False)
    # once unknown, a priced call still has its own cost, but the total stays unknown
    assert charge(by_tokens, query("m", 5), total, False) == (Cost(Decimal(5)), total, False)
    # without a pricer nothing changes
    assert charge(None, query("m", 5), total, True) == (None, total, True)


def test_genai_prices_prices_a_known_model_as_the_table_does() -> None:
    usage = Usage(1200, 300, cached_input_tokens=200)
    agent = Agent.create("openai/gpt-4o-mini")
    r = Simulator(ScriptedModel([Say("x", usage=usage)]), start=START,
                  price=table()).run(agent, "go").result
    expected = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=1200, output_tokens=300, cache_read_tokens=200),
        "gpt-4o-mini", provider_id="openai",
        genai_request_timestamp=datetime.fromtimestamp(START, UTC),
    )
    assert r.cost == Cost(expected.total_price, expected.input_price, expected.output_price)
    assert r.cost is not None and r.cost.total > 0


@pytest.mark.parametrize("model", [
    "openai/no-such-model-xyz",      # not in the table
    "ollama/qwen3",                  # self-hosted: no API price
    "vllm/gpt-4o-mini",              # self-hosted, whatever the name
    "gpt-4o-mini",                   # no router prefix: provider unknown
])
def test_genai_prices_gives_no_cost_for_what_it_cannot_price(model: str) -> None:
    r = Simulator(ScriptedModel([Say("x", usage=Usage(100, 10))]),
                  price=table()).run(Agent.create(model), "go").result
    assert r.status == "finished"
    assert r.cost is None


def test_the_model_that_answered_is_the_one_priced() -> None:
    price = table()
    q = PriceQuery("openai/gpt-4o", "gpt-4o-mini", Usage(1000, 100), START)
    mini = price(PriceQuery("openai/gpt-4o-mini", None, Usage(1000, 100), START))
    assert price(q) == mini
    assert price(PriceQuery("openai/gpt-4o", "unheard-of-model", Usage(1, 1), START)) is None


def test_split_model() -> None:
    assert split_model("openai/gpt-4o") == ("openai", "gpt-4o")
    assert split_model("openrouter/anthropic/claude-3.5") == ("openrouter", "anthropic/claude-3.5")
    assert split_model("my-model") == (None, "my-model")
    assert split_model("some/thing") == (None, "some/thing")
