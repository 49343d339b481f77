"""Scores, and what a scorer reads of a run.

A scorer is a typed function of a case and the run's `Observed` (what it answered, the
tools it called, what its guards decided, its cost, steps and latency) to a `Score`: a
verdict ("pass", "fail", or "could-not-judge" when it could not tell: a judge that failed
or answered nonsense, a scorer that raised), a number or a label, and a reason. A judged
scorer is a generator that yields the library's own `AskModel` requests and gets their
`ModelAnswer`s, as a processor's judge does (`interpreters.evals.judge`).

    @scorer("polite")
    def polite(case: Case, out: Observed) -> bool:
        return "please" in out.text.lower()
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from decimal import Decimal
from typing import Literal, TypeAlias

import msgspec

from effects import Abort, Out, Replace, Retry, Skip
from interpreters.core.trace import Trace
from interpreters.evals.cases import Case
from interpreters.record.journal import effect_summary
from pipeline.processor import AskModel, ModelAnswer
from pipeline.protocol import EffectRecord
from pipeline.values.chunks import Usage
from pipeline.values.cost import Cost
from pipeline.values.result import RunResult

Verdict = Literal["pass", "fail", "could-not-judge"]
"""A score's verdict: "could-not-judge" is neither (a judge failed, answered nonsense,
or the scorer raised); a threshold counts it as not passed: evals fail closed."""


class Score(msgspec.Struct, frozen=True, kw_only=True):
    """One scorer's verdict on one case: a number (`value`, 0 to 1 for the built-ins)
    or a `label`, and why."""

    scorer: str
    verdict: Verdict
    value: float | None = None
    label: str | None = None
    reason: str = ""
    usage: Usage | None = None
    """A judged scorer's model calls."""
    cost: Cost | None = None
    """What a judged scorer's calls cost (a pricer given, the model known)."""

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"


class ToolCallSeen(msgspec.Struct, frozen=True):
    """A tool call the run made, as it left the run, with its result."""

    name: str
    args: dict[str, object]
    result: object = None
    is_error: bool = False


class GuardVerdict(msgspec.Struct, frozen=True):
    """A processor decision other than `Continue`: it stopped the run (`Abort`), sent
    the model back (`Abort` with retry, `Retry`), changed what passed (`Replace`) or
    dropped it (`Skip`). A stream hook's `Replace` and `Skip` are how it holds chunks
    back and releases them, not verdicts: they are not counted (what it redacted shows
    in the text: `contains("[REDACTED:")`)."""

    processor_id: str
    hook: str
    effect: str
    """"tripped", "retried", "replaced" or "skipped"."""
    detail: str = ""


class Observed(msgspec.Struct, frozen=True, kw_only=True):
    """What a case's run did: what the scorers read, and what a report keeps."""

    status: str
    text: str
    final_text: str = ""
    """The last step's reply (a typed output's JSON)."""
    output: object = None
    """The typed output as JSON (an agent with an `output_type`)."""
    tool_calls: tuple[ToolCallSeen, ...] = ()
    guards: tuple[GuardVerdict, ...] = ()
    tripwire: str | None = None
    """The processor that stopped the run, if one did."""
    tripwire_reason: str = ""
    error: str | None = None
    steps: int = 0
    retries: int = 0
    usage: Usage = Usage()
    cost: Cost | None = None
    latency: float = 0.0
    """Seconds the run took, by the interpreter's clock (virtual on the simulator)."""
    run_id: str = ""
    pending: tuple[str, ...] = ()
    """A suspended run's calls waiting for approval (tool names)."""
    divergence: str | None = None
    """A replayed run: where it first went another way than the recording."""


def run_cost(out: Observed) -> Cost | None:
    """What the run cost: its cost, or nothing for a run that called no model (stopped
    at its input); None when unknown."""
    if out.cost is not None:
        return out.cost
    if out.steps == 0 and out.usage.total_tokens == 0 and out.status != "failed":
        return Cost(Decimal(0))
    return None


_KIND: dict[type, str] = {
    Abort: "tripped", Retry: "retried", Replace: "replaced", Skip: "skipped",
}


STREAM_HOOKS = frozenset({"process_output_stream"})
"""Hooks whose `Replace` and `Skip` are how a guard holds chunks back and releases them
(a PII guard holds a possible value until it can tell): not verdicts."""


def guard_verdicts(effects: Sequence[EffectRecord]) -> tuple[GuardVerdict, ...]:
    """The decisions other than Continue among a run's processor effects (a stream
    hook's holding and releasing left out: only its aborts)."""
    out: list[GuardVerdict] = []
    for r in effects:
        e = r.effect.effect if isinstance(r.effect, Out) else r.effect
        kind = _KIND.get(type(e))
        if kind is None or (r.hook in STREAM_HOOKS and kind in ("replaced", "skipped")):
            continue
        if isinstance(e, Abort) and e.retry:
            kind = "retried"
        out.append(GuardVerdict(r.processor_id, r.hook, kind, effect_summary(e)))
    return tuple(out)


def outcome_of(
    result: RunResult, trace: Trace | Sequence[EffectRecord] | None = None, *,
    latency: float = 0.0, divergence: str | None = None, run_id: str = "",
) -> Observed:
    """What a run did, from its result and its trace (or its processors' effects)."""
    effects = trace.effects if isinstance(trace, Trace) else (trace or ())
    calls: list[ToolCallSeen] = []
    for s in result.steps:
        results = {r.tool_call_id: r for r in s.tool_results}
        for c in s.tool_calls:
            r = results.get(c.tool_call_id)
            calls.append(ToolCallSeen(
                c.tool_name, dict(c.args), msgspec.to_builtins(r.result, enc_hook=repr)
                if r is not None else None, r.is_error if r is not None else False,
            ))
    pending: tuple[str, ...] = ()
    if result.suspension is not None:
        pending = tuple(p.tool_name for p in result.suspension.pending)
        s = result.suspension.step
        calls.extend(ToolCallSeen(c.tool_name, dict(c.args)) for c in s.tool_calls)
    t = result.tripwire
    return Observed(
        status=result.status,
        text=result.text,
        final_text=result.steps[-1].text if result.steps else "",
        output=msgspec.to_builtins(result.output, enc_hook=repr),
        tool_calls=tuple(calls),
        guards=guard_verdicts(effects),
        tripwire=t.processor_id if t is not None else None,
        tripwire_reason=t.reason if t is not None else "",
        error=str(result.error) if result.error is not None else None,
        steps=len(result.steps),
        retries=result.retry_count,
        usage=result.total_usage,
        cost=result.cost,
        latency=latency,
        run_id=run_id,
        pending=pending,
        divergence=divergence,
    )


Judging: TypeAlias = Generator[AskModel, ModelAnswer, Score]
"""A judged scorer's work: it yields `AskModel` requests and returns its score."""

ScoreFn = Callable[[Case, Observed], "Score | Judging | bool | float"]


class Scorer:
    """A named scoring function. Its function returns a `Score`, a bool (pass/fail), a
    number (passes at `pass_at` or more), or, for a judged scorer, a generator yielding
    `AskModel` and returning a `Score` (`judged=True`)."""

    __slots__ = ("fn", "judged", "name", "pass_at", "tags")

    def __init__(
        self, name: str, fn: ScoreFn, *, pass_at: float = 1.0, judged: bool = False,
        tags: tuple[str, ...] = (),
    ) -> None:
        if not name:
            raise ValueError("a scorer needs a name")
        self.name = name
        self.fn = fn
        self.pass_at = pass_at
        self.judged = judged
        self.tags = tags
        """The scorer scores only cases with one of these tags (none: every case)."""

    def only(self, *tags: str) -> Scorer:
        """This scorer for the cases with any of `tags` only (the others get no score
        of it: a report counts the cases it scored)."""
        if not tags:
            raise ValueError("give at least one tag")
        return Scorer(self.name, self.fn, pass_at=self.pass_at, judged=self.judged,
                      tags=tuple(tags))

    def applies(self, case: Case) -> bool:
        return not self.tags or any(t in case.tags for t in self.tags)

    def __repr__(self) -> str:
        return f"Scorer({self.name!r})"

    def as_score(self, value: Score | bool | float) -> Score:
        """A plain return value as this scorer's Score."""
        if isinstance(value, Score):
            return value if value.scorer == self.name else msgspec.structs.replace(
                value, scorer=self.name)
        if isinstance(value, bool):
            return Score(scorer=self.name, verdict="pass" if value else "fail",
                         value=1.0 if value else 0.0)
        if isinstance(value, int | float):
            v = float(value)
            return Score(scorer=self.name, verdict="pass" if v >= self.pass_at else "fail",
                         value=v, reason=f"{v:g} (passes at {self.pass_at:g})")
        raise TypeError(
            f"scorer {self.name!r} returned a {type(value).__name__}, not a Score, bool or "
            "number"
        )


def scorer(
    name: str | None = None, *, pass_at: float = 1.0
) -> Callable[[ScoreFn], Scorer]:
    """Make a function of `(case, outcome)` a `Scorer` (named after it by default)."""

    def wrap(fn: ScoreFn) -> Scorer:
        label = name or str(getattr(fn, "__name__", "scorer"))
        return Scorer(label, fn, pass_at=pass_at)

    return wrap


def could_not_judge(name: str, reason: str, *, usage: Usage | None = None,
                    cost: Cost | None = None) -> Score:
    return Score(scorer=name, verdict="could-not-judge", reason=reason, usage=usage,
                 cost=cost)


__all__ = [
    "GuardVerdict", "Judging", "Observed", "Score", "ScoreFn", "Scorer", "ToolCallSeen",
    "Verdict", "could_not_judge", "run_cost", "guard_verdicts", "outcome_of", "scorer",
]
