"""The judge calls of one run: each `AskModel` a processor's hook asked for, with its
usage and cost (`RunResult.judges`).

A generator hook's I/O goes through `hooks._drive`, which hands every `ModelAnswer` it
receives for an `AskModel` here; the run's result then reads the calls. Pure: the answer
carries the usage the provider reported, the pricer and clock are the run's.
"""

from __future__ import annotations

from collections.abc import Callable

from pipeline.cost import Cost, PriceQuery, Pricer
from pipeline.processor import AskModel, ModelAnswer
from pipeline.result import JudgeCall


class JudgeLedger:
    """One run's judge calls, and their cost so far (None once one cannot be priced)."""

    __slots__ = ("calls", "clock", "cost", "cost_known", "price")

    def __init__(self, price: Pricer | None, clock: Callable[[], float]) -> None:
        self.price = price
        self.clock = clock
        self.calls: list[JudgeCall] = []
        self.cost: Cost | None = None
        self.cost_known = price is not None

    def add(self, processor_id: str, hook: str, ask: AskModel, answer: ModelAnswer) -> None:
        model = ask.request.model
        cost: Cost | None = None
        if self.price is not None:
            try:
                cost = self.price(
                    PriceQuery(model, answer.response_model, answer.usage, self.clock()))
            except Exception:
                cost = None  # a pricer that fails knows no price: no cost, never a wrong one
            if cost is None:
                self.cost_known = False
            elif self.cost_known:
                self.cost = cost if self.cost is None else self.cost + cost
        self.calls.append(JudgeCall(
            processor_id=processor_id, hook=hook, model=model,
            response_model=answer.response_model, usage=answer.usage, cost=cost,
        ))
