"""The judge calls of one run: each `AskModel` a processor's hook asked for, with its
usage and cost (`RunResult.judges`).

A generator hook's I/O goes through `hooks._drive`, which hands every `ModelAnswer` it
receives for an `AskModel` here; the run's result then prices and reads the calls. Pure:
the answer carries the usage the provider reported; the pricer is the run's. No clock is
read for it (a journal replays a run's clock readings in order, with or without a
pricer): the calls are priced when the result is made, at the time of the run's last
message.
"""

from __future__ import annotations

from decimal import Decimal

from pipeline.processor import AskModel, ModelAnswer
from pipeline.values.chunks import Usage
from pipeline.values.cost import Cost, PriceQuery, Pricer, charge, price_of
from pipeline.values.result import JudgeCall, Spending


class JudgeLedger:
    """One run's judge calls, as they were answered."""

    __slots__ = ("_paid", "asked")

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str, str | None, Usage]] = []
        """(processor id, hook, model, response model, usage) of each call."""
        self._paid: tuple[int, Usage, Cost | None, bool] = (0, Usage(), None, True)
        """`spent`'s running total: the calls counted, their usage, cost, whether known."""

    def spent(self, price: Pricer | None, at: float) -> Spending:
        """What the calls so far used and cost (each priced once, when first counted, at
        `at`): what a budget counts while the run goes on."""
        n, usage, cost, known = self._paid
        for _, _, model, response_model, u in self.asked[n:]:
            usage = usage + u
            _, cost, known = charge(price, PriceQuery(model, response_model, u, at), cost,
                                    known and price is not None)
        self._paid = (len(self.asked), usage, cost, known)
        if not self.asked:
            return Spending()
        return Spending(len(self.asked), usage,
                        (cost or Cost(Decimal(0))) if known and price is not None else None)

    def add(self, processor_id: str, hook: str, ask: AskModel, answer: ModelAnswer) -> None:
        self.asked.append(
            (processor_id, hook, ask.request.model, answer.response_model, answer.usage))

    def calls(self, price: Pricer | None, at: float) -> tuple[tuple[JudgeCall, ...], bool]:
        """Every call, priced when there is a pricer; and whether each one was priced."""
        out: list[JudgeCall] = []
        known = price is not None
        for processor_id, hook, model, response_model, usage in self.asked:
            cost: Cost | None = None
            if price is not None:
                cost = price_of(price, PriceQuery(model, response_model, usage, at))
                known = known and cost is not None
            out.append(JudgeCall(processor_id=processor_id, hook=hook, model=model,
                                 response_model=response_model, usage=usage, cost=cost))
        return tuple(out), known
