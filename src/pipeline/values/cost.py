"""What model calls cost: a price per call, summed per step and per run.

The core prices nothing itself: the interpreter hands the loop a `Pricer` (say,
`interpreters.providers.prices.genai_prices()`, from a maintained price table), as it hands it a
clock. A pricer returns None for a model it does not know, and then the run's cost is
None too: a cost is either right or absent, never a partial sum.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import msgspec

from pipeline.values.chunks import Usage


class Cost(msgspec.Struct, frozen=True):
    """A price, in `currency` (US dollars for genai-prices)."""

    total: Decimal
    input: Decimal = Decimal(0)
    output: Decimal = Decimal(0)
    currency: str = "USD"

    def __add__(self, other: Cost) -> Cost:
        if other.currency != self.currency:
            raise ValueError(f"cannot add {other.currency} to {self.currency}")
        return Cost(self.total + other.total, self.input + other.input,
                     self.output + other.output, self.currency)


class PriceQuery(msgspec.Struct, frozen=True):
    """One model call to price."""

    model: str
    """The model id the request named (a router id such as `openai/gpt-4o-mini`)."""
    response_model: str | None
    """The model the provider said answered, if it said."""
    usage: Usage
    at: float
    """When the response arrived (the run's clock), for prices that change over time."""


Pricer = Callable[[PriceQuery], Cost | None]
"""Prices one model call; None when the model (or its provider) is unknown."""


def price_of(price: Pricer, query: PriceQuery) -> Cost | None:
    """What `price` says the call costs; a pricer that fails knows no price (no cost,
    never a wrong one)."""
    try:
        return price(query)
    except Exception:
        return None


def charge(
    price: Pricer | None, query: PriceQuery, total: Cost | None, known: bool
) -> tuple[Cost | None, Cost | None, bool]:
    """Price one call into a running total: `(the call's cost, the total, whether the
    total is known)`. A call no one can price makes the total unknown for good; without
    a pricer nothing changes."""
    if price is None:
        return None, total, known
    c = price_of(price, query)
    if c is None:
        return None, total, False
    if known:
        return c, (c if total is None else total + c), True
    return c, total, False
