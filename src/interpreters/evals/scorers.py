"""The deterministic scorers: what the run answered (`equals`, `contains`, `excludes`,
`regex`, `matches_type`), which tools it called (`tool_calls`, `forbidden_tools`), how it
ended (`status_is`, `suspended_for`), what its guards decided (`no_guard_tripped`,
`guard_tripped`) and what it took (`max_cost`, `max_steps`, `max_tokens`,
`max_latency`). Each returns a `Scorer`; each score says why."""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Literal

import msgspec

from interpreters.evals.cases import Case
from interpreters.evals.scores import Observed, Score, Scorer, ToolCallSeen, run_cost
from pipeline.values.output_type import OutputDecodeError, TypedOutput


def _s(name: str, ok: bool, reason: str, value: float | None = None) -> Score:
    return Score(scorer=name, verdict="pass" if ok else "fail",
                 value=(1.0 if ok else 0.0) if value is None else value, reason=reason)


def _short(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 1] + "\u2026"


def equals(expected: str | dict[str, object] | None = None, *, strip: bool = True,
           name: str = "equals") -> Scorer:
    """The answer is `expected` (default: the case's): a text is compared with the last
    step's reply, an object with the typed output."""

    def score(case: Case, out: Observed) -> Score:
        want = expected if expected is not None else case.expected
        if want is None:
            return Score(scorer=name, verdict="could-not-judge",
                         reason="the case has no expected output")
        if isinstance(want, str):
            got = out.final_text.strip() if strip else out.final_text
            w = want.strip() if strip else want
            return _s(name, got == w, "equal" if got == w else
                      f"expected {_short(w)!r}, got {_short(got)!r}")
        ok = out.output == want
        return _s(name, ok, "equal" if ok else f"expected {want!r}, got {out.output!r}")

    return Scorer(name, score)


def contains(*needles: str, case_sensitive: bool = False, name: str = "contains") -> Scorer:
    """The whole answer holds every one of `needles` (default: the case's expected text)."""

    def score(case: Case, out: Observed) -> Score:
        want = needles or ((case.expected,) if isinstance(case.expected, str) else ())
        if not want:
            return Score(scorer=name, verdict="could-not-judge",
                         reason="nothing to look for (no needles, no expected text)")
        text = out.text if case_sensitive else out.text.lower()
        missing = [n for n in want if (n if case_sensitive else n.lower()) not in text]
        return _s(name, not missing, f"missing {missing}" if missing else "all found",
                  (len(want) - len(missing)) / len(want))

    return Scorer(name, score)


def excludes(*needles: str, name: str = "excludes") -> Scorer:
    """None of `needles` is in the answer, its tool calls' arguments or their results as
    they left the run (a card number, a secret)."""

    def score(case: Case, out: Observed) -> Score:
        seen = out.text + msgspec.json.encode(out.tool_calls).decode()
        found = [n for n in needles if n in seen]
        return _s(name, not found, f"found {len(found)} of them" if found else "none found")

    return Scorer(name, score)


def regex(pattern: str, *, name: str = "regex") -> Scorer:
    """The answer matches `pattern` (`re.search`)."""
    compiled = re.compile(pattern)

    def score(case: Case, out: Observed) -> Score:
        ok = compiled.search(out.text) is not None
        return _s(name, ok, f"{'matches' if ok else 'does not match'} /{pattern}/")

    return Scorer(name, score)


def matches_type(target: type, *, name: str = "matches-type") -> Scorer:
    """The last reply decodes into `target` (a Struct, dataclass, TypedDict or pydantic
    model: its JSON schema, as an agent's `output_type` checks it)."""
    typed = TypedOutput.of(target)

    def score(case: Case, out: Observed) -> Score:
        try:
            typed.decode(out.final_text)
        except OutputDecodeError as e:
            return _s(name, False, f"does not decode: {e}")
        return _s(name, True, f"a valid {getattr(target, '__name__', 'output')}")

    return Scorer(name, score)


class ExpectedCall(msgspec.Struct, frozen=True):
    """A tool call a trajectory expects: its tool and (some of) its arguments."""

    name: str
    args: dict[str, object] | None = None
    """The arguments it must have (others may be there, unless `args="exact"`)."""


def expect_call(tool_name: str, /, **args: object) -> ExpectedCall:
    """`expect_call("refund", order_id="1042")`: a call of `refund` with that argument."""
    return ExpectedCall(tool_name, args or None)


def _fits(want: ExpectedCall, got: ToolCallSeen, exact_args: bool) -> bool:
    if want.name != got.name:
        return False
    if want.args is None:
        return True
    if exact_args:
        return got.args == want.args
    return all(k in got.args and got.args[k] == v for k, v in want.args.items())


def tool_calls(
    expected: Sequence[ExpectedCall | str],
    *,
    order: Literal["exact", "in-order", "any"] = "in-order",
    args: Literal["subset", "exact"] = "subset",
    others: bool = True,
    name: str = "tool-calls",
) -> Scorer:
    """The run's tool calls follow `expected`: the same calls in the same order
    (`order="exact"`), in this order among others (`"in-order"`, a subsequence) or in any
    order (`"any"`); each with at least the given arguments (`args="subset"`) or exactly
    them. `others=False`: no call beyond the expected ones. The value is the share of
    expected calls found."""
    want = tuple(ExpectedCall(e) if isinstance(e, str) else e for e in expected)
    exact = args == "exact"

    def score(case: Case, out: Observed) -> Score:
        got = out.tool_calls
        names = [c.name for c in got]
        if order == "exact":
            ok = len(got) == len(want) and all(
                _fits(w, g, exact) for w, g in zip(want, got, strict=True))
            found = sum(1 for w, g in zip(want, got, strict=False) if _fits(w, g, exact))
        else:
            used: set[int] = set()
            found = 0
            start = 0
            for w in want:
                rng = range(start, len(got)) if order == "in-order" else range(len(got))
                hit = next((i for i in rng if i not in used and _fits(w, got[i], exact)), None)
                if hit is None:
                    continue
                used.add(hit)
                found += 1
                start = hit + 1
            ok = found == len(want) and (others or len(got) == len(want))
        value = found / len(want) if want else (1.0 if not got or others else 0.0)
        if not want and not others:
            ok = not got
        reason = (f"called {names}" if ok else
                  f"expected {[w.name for w in want]} ({order}, args {args}), called {names}")
        return _s(name, ok, reason, value)

    return Scorer(name, score)


def forbidden_tools(*tool_names: str, name: str = "forbidden-tools") -> Scorer:
    """None of `tool_names` was called (nor waits for approval)."""

    def score(case: Case, out: Observed) -> Score:
        bad = sorted({c.name for c in out.tool_calls if c.name in tool_names})
        return _s(name, not bad, f"called {bad}" if bad else "none called")

    return Scorer(name, score)


def status_is(*statuses: str, name: str = "status") -> Scorer:
    """The run ended with one of `statuses`; none given: the case's `metadata["status"]`,
    else "finished"."""

    def score(case: Case, out: Observed) -> Score:
        meta = (case.metadata or {}).get("status")
        want = statuses or ((meta,) if isinstance(meta, str) else ("finished",))
        ok = out.status in want
        why = out.status + (f": {out.error}" if out.error else "") + (
            f" by {out.tripwire}" if out.tripwire else "")
        return _s(name, ok, why)

    return Scorer(name, score)


def suspended_for(tool_name: str, *, name: str = "approval") -> Scorer:
    """The run stopped to ask a person before calling `tool_name` (status "suspended",
    a call of it pending)."""

    def score(case: Case, out: Observed) -> Score:
        ok = out.status == "suspended" and tool_name in out.pending
        return _s(name, ok, f"{out.status}, pending {list(out.pending)}")

    return Scorer(name, score)


def no_guard_tripped(*, retries: bool = False, name: str = "no-guard-tripped") -> Scorer:
    """No processor stopped the run (with `retries=True`: nor sent the model back)."""
    kinds = {"tripped", "retried"} if retries else {"tripped"}

    def score(case: Case, out: Observed) -> Score:
        hit = [f"{g.processor_id}.{g.hook}" for g in out.guards if g.effect in kinds]
        if out.tripwire and not hit:
            hit = [out.tripwire]
        return _s(name, not hit, f"tripped: {hit}" if hit else "none tripped")

    return Scorer(name, score)


def guard_tripped(
    processor_id: str,
    *,
    effect: Literal["tripped", "retried", "replaced", "skipped", "any"] = "tripped",
    name: str | None = None,
) -> Scorer:
    """Processor `processor_id` stopped the run (`effect="tripped"`), sent the model
    back, changed or dropped what passed, or did any of these."""
    label = name or f"guard:{processor_id}"

    def score(case: Case, out: Observed) -> Score:
        mine = [g for g in out.guards if g.processor_id == processor_id
                and (effect == "any" or g.effect == effect)]
        ok = bool(mine) or (effect in ("tripped", "any") and out.tripwire == processor_id)
        return _s(label, ok, f"{processor_id}: {effect}" if ok else
                  f"{processor_id}: no {effect} decision")

    return Scorer(label, score)


def max_cost(amount: Decimal | float | str, *, currency: str = "USD",
             name: str = "max-cost") -> Scorer:
    """The run cost at most `amount` (could not judge when its cost is unknown: no
    pricer, or a model it does not know)."""
    bound = Decimal(str(amount))

    def score(case: Case, out: Observed) -> Score:
        cost = run_cost(out)
        if cost is None:
            return Score(scorer=name, verdict="could-not-judge",
                         reason="the run's cost is unknown (give the interpreter a pricer)")
        if cost.total and cost.currency != currency:
            return Score(scorer=name, verdict="could-not-judge",
                         reason=f"cost in {cost.currency}, bound in {currency}")
        ok = cost.total <= bound
        return _s(name, ok, f"{cost.total} {currency} (bound {bound})")

    return Scorer(name, score)


def max_steps(n: int, *, name: str = "max-steps") -> Scorer:
    """The run took at most `n` steps (model calls kept)."""

    def score(case: Case, out: Observed) -> Score:
        return _s(name, out.steps <= n, f"{out.steps} steps (bound {n})")

    return Scorer(name, score)


def max_tokens(n: int, *, name: str = "max-tokens") -> Scorer:
    """The run's model calls (judges included) used at most `n` tokens."""

    def score(case: Case, out: Observed) -> Score:
        t = out.usage.total_tokens
        return _s(name, t <= n, f"{t} tokens (bound {n})")

    return Scorer(name, score)


def max_latency(seconds: float, *, name: str = "max-latency") -> Scorer:
    """The run took at most `seconds` (the interpreter's clock: virtual on the simulator)."""

    def score(case: Case, out: Observed) -> Score:
        return _s(name, out.latency <= seconds, f"{out.latency:.3f} s (bound {seconds:g})")

    return Scorer(name, score)


__all__ = [
    "ExpectedCall", "contains", "equals", "excludes", "expect_call", "forbidden_tools",
    "guard_tripped", "matches_type", "max_cost", "max_latency", "max_steps", "max_tokens",
    "no_guard_tripped", "regex", "status_is", "suspended_for", "tool_calls",
]
