"""Budgets: bounds on a run's tool calls (in all and per tool), model calls, tokens and cost.

    Budget(max_tool_calls=10, max_calls_per_tool={"search": 3}, max_model_calls=8,
           max_tokens=50_000, max_cost=0.50, on_limit="finish")

An input processor. At a bound, `on_limit="abort"` (the default) stops the run with a
tripwire (its metadata names the bound); `on_limit="finish"` lets the model finish
without tools: a tool call over a bound is answered with an error result instead of
running, and the next model call is made with `tool_choice="none"` (the last step; a run
still going after it stops with the tripwire).

It counts every model call the run pays for (`InputStepArgs.spent`): the agent's, a call
a processor's retry discarded too, and the calls its processors' judges make
(`AskModel`), with their input and output tokens and their cost, which needs the run's
pricer: with `max_cost` and a call whose cost is unknown, the run stops (a bound that
cannot be checked fails closed). The bounds are checked before each model call of the
agent; the judges of a step come after the check that let it run, so a run may go over
by one step's judge calls (and the result's). A run's budget counts from its start (a
resumed run's too: its tool-call counts are the processor's state, kept with it, and
what it paid for is kept with the suspension).

In a tree of runs (agents calling agents, `docs/agents.md`) the model-call, token and
cost bounds hold for the whole tree under the run: what a child run pays for counts as
it runs, and a child's model call is checked against them first, so a child stops (with
this budget's tripwire) once the tree's budget is spent; with `on_limit="finish"` its
next step is made without tools. Tool-call bounds count the run's own calls (a child
called is one).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Literal

import msgspec

from effects import Abort, Continue, Out, Replace, SkipCall
from pipeline.processor import (
    InputStepArgs,
    InputStepResult,
    StatefulProcessor,
    StepChange,
    ToolCallArgs,
    ToolCallResult,
)
from pipeline.processors.options import Options

OnLimit = Literal["abort", "finish"]


class Spent(msgspec.Struct, frozen=True):
    """What a run spent of its budget so far (the processor's state)."""

    tool_calls: int = 0
    per_tool: tuple[tuple[str, int], ...] = ()
    finishing: bool = False
    """A bound was reached with on_limit="finish": the next step is the last, tool-less."""
    finished: bool = False
    """That last step was given."""

    def calls_of(self, name: str) -> int:
        return next((n for t, n in self.per_tool if t == name), 0)


class Budget(StatefulProcessor[Spent, object]):
    """Bounds on a run (see the module doc); every option checked here."""

    bounds_descendants = True
    """Its model-call, token and cost bounds hold for the whole tree of runs under its
    run: checked before each model call of a child run too (`docs/agents.md`)."""

    def __init__(
        self,
        *,
        max_tool_calls: int | None = None,
        max_calls_per_tool: Mapping[str, int] | None = None,
        max_model_calls: int | None = None,
        max_tokens: int | None = None,
        max_cost: float | Decimal | None = None,
        on_limit: OnLimit = "abort",
        id: str = "budget",
    ) -> None:
        o = Options("Budget")
        o.optional_integer("max_tool_calls", max_tool_calls, min=0)
        per_tool: dict[str, int] = {}
        if max_calls_per_tool is not None:
            if not isinstance(max_calls_per_tool, Mapping):
                raise o.fail("max_calls_per_tool", max_calls_per_tool,
                             "None or a mapping of tool names to ints >= 0")
            for name, n in max_calls_per_tool.items():
                if not isinstance(name, str) or not name:
                    raise o.fail("max_calls_per_tool", name, "a tool name", key=True)
                per_tool[name] = o.integer(f"max_calls_per_tool[{name!r}]", n, min=0)
        o.optional_integer("max_model_calls", max_model_calls, min=1)
        o.optional_integer("max_tokens", max_tokens, min=1)
        if max_cost is not None and (
            isinstance(max_cost, bool) or not isinstance(max_cost, int | float | Decimal)
            or not max_cost > 0
        ):
            raise o.fail("max_cost", max_cost, "None or a number above 0")
        o.choice("on_limit", on_limit, OnLimit)
        o.id(id)
        if (max_tool_calls, max_model_calls, max_tokens, max_cost) == (None,) * 4 and not per_tool:
            raise o.fail("max_tool_calls", None, "at least one bound (a budget of nothing)")
        self.id = id
        self.max_tool_calls = max_tool_calls
        self.max_calls_per_tool = per_tool
        self.max_model_calls = max_model_calls
        self.max_tokens = max_tokens
        self.max_cost = None if max_cost is None else Decimal(str(max_cost))
        self.on_limit: OnLimit = on_limit

    def initial_state(self) -> Spent:
        return Spent()

    def _reached(self, args: InputStepArgs[Spent]) -> tuple[str, str] | None:
        """The bound this step would pass (its name, a reason), if any: over what the
        run paid for (`args.spent`: its model calls, retried and discarded ones too, and
        its hooks' judges)."""
        paid = args.spent
        if self.max_model_calls is not None:
            last = self.max_model_calls - (1 if self.on_limit == "finish" else 0)
            if paid.model_calls >= last:
                return "model_calls", f"model call budget of {self.max_model_calls} reached"
        if self.max_tokens is not None:
            used = paid.usage.input_tokens + paid.usage.output_tokens
            if used >= self.max_tokens:
                return "tokens", f"token budget of {self.max_tokens} reached ({used} used)"
        if self.max_cost is not None and paid.model_calls:
            if paid.cost is None:
                return "cost", "cost budget cannot be checked: a model call's cost is unknown"
            if paid.cost.total >= self.max_cost:
                return "cost", (f"cost budget of {self.max_cost} reached "
                                f"({paid.cost.total} spent)")
        return None

    def process_input_step(self, args: InputStepArgs[Spent]) -> InputStepResult[Spent]:
        spent = args.state
        if spent.finished:
            return Abort("budget reached: the run went on after its last step",
                         metadata={"budget": "finish"})
        reached = self._reached(args)
        if reached is None and not spent.finishing:
            return Continue()
        if reached is not None and (
            self.on_limit == "abort" or reached[1].startswith("cost budget cannot")
        ):
            return Abort(reached[1], metadata={"budget": reached[0]})
        last = msgspec.structs.replace(spent, finishing=False, finished=True)
        return Out(Replace(StepChange(tool_choice="none")), last)

    def process_tool_call(self, args: ToolCallArgs[Spent]) -> ToolCallResult[Spent]:
        spent = args.state
        name = args.tool.name
        why: tuple[str, str] | None = None
        if self.max_tool_calls is not None and spent.tool_calls >= self.max_tool_calls:
            why = "tool_calls", f"tool call budget of {self.max_tool_calls} reached"
        bound = self.max_calls_per_tool.get(name)
        if why is None and bound is not None and spent.calls_of(name) >= bound:
            why = "tool_calls_per_tool", f"budget of {bound} calls of {name!r} reached"
        if why is not None:
            if self.on_limit == "abort":
                return Abort(why[1], metadata={"budget": why[0], "tool": name})
            return Out(SkipCall(f"not run: {why[1]}", is_error=True),
                       msgspec.structs.replace(spent, finishing=True))
        per_tool = dict(spent.per_tool)
        per_tool[name] = per_tool.get(name, 0) + 1
        return Out(Continue(), msgspec.structs.replace(
            spent, tool_calls=spent.tool_calls + 1, per_tool=tuple(sorted(per_tool.items()))
        ))
