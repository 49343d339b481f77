"""Carrying scorers out: a plain scorer is called, a judged one driven, its `AskModel`
requests answered by the target's `ask`, its calls counted and priced. Whatever a scorer
does (raises, returns nonsense, its judge fails) ends in a Score: "could-not-judge" when
it could not tell, never an exception out of here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import cast

import msgspec

from interpreters.evals.cases import Case
from interpreters.evals.scores import Observed, Score, Scorer, could_not_judge
from pipeline.processor import AskModel, ModelAnswer
from pipeline.values.chunks import Usage
from pipeline.values.cost import Cost, PriceQuery, Pricer, price_of

Ask = Callable[[AskModel], ModelAnswer]
"""Carries out a judge's request (sync)."""
AsyncAsk = Callable[[AskModel], Awaitable[ModelAnswer]]
"""Carries out a judge's request (async)."""


class _Calls:
    """A judged scorer's calls: their usage, and their cost while every one is priced."""

    def __init__(self, price: Pricer | None, now: Callable[[], float]) -> None:
        self.price = price
        self.now = now
        self.usage = Usage()
        self.cost: Cost | None = None
        self.unpriced = 0
        self.n = 0

    def add(self, request: AskModel, answer: ModelAnswer) -> None:
        self.n += 1
        self.usage = self.usage + answer.usage
        c = None if self.price is None else price_of(self.price, PriceQuery(
            request.request.model, answer.response_model, answer.usage, self.now()))
        if c is None:
            self.unpriced += 1
        else:
            try:
                self.cost = c if self.cost is None else self.cost + c
            except ValueError:  # two currencies: no sum
                self.unpriced += 1

    def finish(self, score: Score) -> Score:
        if not self.n:
            return score
        cost = self.cost if not self.unpriced else None
        return msgspec.structs.replace(score, usage=self.usage, cost=cost)


def _start(s: Scorer, case: Case, out: Observed) -> Score | Generator[object, object, object]:
    try:
        value: object = s.fn(case, out)
    except Exception as e:
        return could_not_judge(s.name, f"the scorer raised {type(e).__name__}: {e}")
    if isinstance(value, Generator):
        return cast(Generator[object, object, object], value)
    if not isinstance(value, Score | bool | int | float):
        return could_not_judge(s.name, f"the scorer returned a {type(value).__name__}, "
                               "not a Score, bool or number")
    try:
        return s.as_score(value)
    except TypeError as e:
        return could_not_judge(s.name, str(e))


class _Judging:
    """One scorer driven over one case, without its judge's I/O: `step` is the next
    `AskModel` to answer, or the Score it ended in. Shared by the sync and async drivers,
    which only carry the request out."""

    def __init__(self, s: Scorer, case: Case, out: Observed, has_ask: bool,
                 price: Pricer | None, now: Callable[[], float]) -> None:
        self.s = s
        self.has_ask = has_ask
        self.calls = _Calls(price, now)
        gen = _start(s, case, out)
        self.step: AskModel | Score
        if isinstance(gen, Score):
            self.step = gen
        else:
            self.gen = gen
            self._go(lambda: next(gen))

    def settle(self, request: AskModel, answer: ModelAnswer | Exception) -> None:
        """Go on with the judge's `answer` to `request`, or the error asking raised."""
        if isinstance(answer, Exception):
            self.gen.close()
            self.step = self.calls.finish(could_not_judge(
                self.s.name, f"the judge call failed: {type(answer).__name__}: {answer}"))
        else:
            self.calls.add(request, answer)
            self._go(lambda: self.gen.send(answer))

    def score(self) -> Score:
        """The Score the scorer ended in (once no request is left to answer)."""
        assert isinstance(self.step, Score), "the scorer still waits for an answer"
        return self.step

    def _go(self, resume: Callable[[], object]) -> None:
        s = self.s
        try:
            request = resume()
        except StopIteration as done:
            value = done.value
            self.step = self.calls.finish(s.as_score(value) if isinstance(value, Score)
                                          else could_not_judge(
                s.name, f"the scorer returned a {type(value).__name__}, not a Score"))
            return
        except Exception as e:
            self.step = self.calls.finish(could_not_judge(
                s.name, f"the scorer raised {type(e).__name__}: {e}"))
            return
        if not isinstance(request, AskModel):
            self.gen.close()
            self.step = self.calls.finish(could_not_judge(
                s.name, f"the scorer yielded a {type(request).__name__}, not an AskModel"))
        elif not self.has_ask:
            self.gen.close()
            self.step = could_not_judge(s.name, "no model to ask: the target has no judge")
        else:
            self.step = request


def _answer(ask: Ask, request: AskModel) -> ModelAnswer | Exception:
    try:
        return ask(request)
    except Exception as e:
        return e


async def _answer_async(ask: AsyncAsk, request: AskModel) -> ModelAnswer | Exception:
    try:
        return await ask(request)
    except Exception as e:
        return e


def score_one(
    s: Scorer, case: Case, out: Observed, ask: Ask | None, *,
    price: Pricer | None = None, now: Callable[[], float] = lambda: 0.0,
) -> Score:
    """One scorer's score of one case (a judged one's requests answered by `ask`)."""
    j = _Judging(s, case, out, ask is not None, price, now)
    while ask is not None and isinstance(step := j.step, AskModel):
        j.settle(step, _answer(ask, step))
    return j.score()


async def score_one_async(
    s: Scorer, case: Case, out: Observed, ask: AsyncAsk | None, *,
    price: Pricer | None = None, now: Callable[[], float] = lambda: 0.0,
) -> Score:
    """`score_one` with an async `ask`."""
    j = _Judging(s, case, out, ask is not None, price, now)
    while ask is not None and isinstance(step := j.step, AskModel):
        j.settle(step, await _answer_async(ask, step))
    return j.score()


def score_all(
    scorers: Sequence[Scorer], case: Case, out: Observed, ask: Ask | None, *,
    price: Pricer | None = None, now: Callable[[], float] = lambda: 0.0,
) -> tuple[Score, ...]:
    return tuple(score_one(s, case, out, ask, price=price, now=now) for s in scorers
                 if s.applies(case))


__all__ = ["Ask", "AsyncAsk", "score_all", "score_one", "score_one_async"]
