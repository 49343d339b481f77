"""Experiments: a dataset run against an agent on a target, scored, reported; and two
agents compared on the same cases, by running both or by replaying recorded runs.

    report = evaluate(dataset, agent, [status_is(), no_guard_tripped()],
                      target=SimulatorTarget(lambda case: support_model),
                      results="evals/support.sqlite", concurrency=4, timeout=30)
    assert report.ok, report.table()

Cases run with bounded concurrency (`concurrency` at once: sync targets in worker
threads, async ones as tasks), each under its own `timeout` (the run's, as
`interp.run(timeout=)`: virtual seconds on the simulator). A case whose run failed on a
transient provider error (a retryable `ApiError`: 429, 5xx, a connection failure; a
stream that broke) runs again, `retries` times at most, `backoff` seconds doubling in
between. With `results=` every finished case is kept in that SQLite file as it
finishes, and an experiment started again (the same `experiment` name, by default the
dataset's and the agent's) does not run a case that finished before with the same
content: it is scored again only by scorers it has no score of.
"""

from __future__ import annotations

import functools
import hashlib
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import ParamSpec, TextIO, TypeVar

import anyio
import msgspec

from interpreters.evals.cases import Case, Dataset
from interpreters.evals.report import (
    CaseChange,
    CaseResult,
    Comparison,
    Report,
    ScoreDelta,
    costs,
    summarize,
)
from interpreters.evals.scores import Observed, Score, Scorer, outcome_of
from interpreters.evals.scoring import score_one, score_one_async
from interpreters.evals.store import ResultStore
from interpreters.evals.targets import (
    AsyncInterpreterTarget,
    Ran,
    SyncTarget,
    Target,
)
from interpreters.record.journal import Journal
from interpreters.record.replay import ReplayRun, replay_async, replay_sync
from pipeline.agent import Agent
from pipeline.approval import agent_digest
from pipeline.values.result import ApiFailed, RunResult, StreamFailed

P = ParamSpec("P")
R = TypeVar("R")

DepsFor = Callable[[Case], object]
"""The deps of a case's run (a fresh shop, a test database...)."""


def agent_fingerprint(agent: Agent) -> str:
    """What identifies an agent's configuration: its name, model, instructions, tools
    and processors (ids and hooks)."""
    shape = msgspec.json.encode(
        (agent.name, agent.model, [m.content for m in agent.instructions],
         agent.max_steps, agent_digest(agent)),
        enc_hook=lambda o: getattr(o, "__qualname__", type(o).__name__),
    )
    return hashlib.blake2b(shape, digest_size=6).hexdigest()


def experiment_name(dataset: Dataset, agent: Agent) -> str:
    return f"{dataset.name}@{agent.name}-{agent_fingerprint(agent)}"


def transient(result: RunResult) -> bool:
    """The run failed on a provider error worth trying again."""
    if result.status != "failed":
        return False
    e = result.error
    if isinstance(e, ApiFailed):
        return e.error.retryable or e.error.status in (408, 409, 429) or (
            e.error.status is not None and e.error.status >= 500)
    return isinstance(e, StreamFailed)


class Progress:
    """A progress line on `out`: rewritten in place on a terminal, else one line per
    tenth of the cases."""

    def __init__(self, out: TextIO | None, total: int, label: str) -> None:
        self.out = out
        self.total = total
        self.label = label
        self.done = self.passed = self.failed = 0
        self.tty = bool(out is not None and getattr(out, "isatty", lambda: False)())
        self._step = max(1, total // 10)

    def tick(self, r: CaseResult) -> None:
        self.done += 1
        if r.passed:
            self.passed += 1
        else:
            self.failed += 1
        if self.out is None:
            return
        line = (f"{self.label}: {self.done}/{self.total} cases, {self.passed} passed, "
                f"{self.failed} failed")
        if self.tty:
            self.out.write("\r" + line + ("\n" if self.done == self.total else ""))
        elif self.done % self._step == 0 or self.done == self.total:
            self.out.write(line + "\n")
        self.out.flush()


def _kept_scores(reused: CaseResult | None, names: set[str]) -> tuple[Score, ...]:
    if reused is None:
        return ()
    return tuple(s for s in reused.scores if s.scorer in names)


def _order(scores: Sequence[Score], scorers: Sequence[Scorer]) -> tuple[Score, ...]:
    by = {s.scorer: s for s in scores}
    return tuple(by[s.name] for s in scorers if s.name in by)


def _failed_case(case: Case, e: Exception, attempts: int = 1) -> CaseResult:
    """A case whose run raised: its error, no outcome."""
    return CaseResult(case=case.name, digest=case.digest(), tags=case.tags,
                      attempts=attempts, error=f"{type(e).__name__}: {e}")


def _retry_delay(ran: Ran, attempts: int, retries: int, backoff: float) -> float | None:
    """Seconds to wait before running the case again (a transient failure with retries
    left), else None: this run is the case's."""
    if transient(ran.result) and attempts <= retries:
        return backoff * 2.0 ** (attempts - 1)
    return None


def _to_score(
    reused: CaseResult | None, scorers: Sequence[Scorer], case: Case
) -> tuple[tuple[Score, ...], list[Scorer]]:
    """The scores a reused result keeps, and the scorers that still score the case."""
    have = _kept_scores(reused, {s.name for s in scorers})
    done = {s.scorer for s in have}
    return have, [s for s in scorers if s.name not in done and s.applies(case)]


def _scored_case(
    case: Case, outcome: Observed, scores: Sequence[Score], scorers: Sequence[Scorer],
    attempts: int,
) -> CaseResult:
    return CaseResult(case=case.name, digest=case.digest(), tags=case.tags, outcome=outcome,
                      scores=_order(scores, scorers), attempts=attempts)


def run_case(
    target: SyncTarget, agent: Agent, case: Case, scorers: Sequence[Scorer],
    deps: DepsFor | None, timeout: float | None, retries: int, backoff: float,
    reused: CaseResult | None,
) -> CaseResult:
    """One case on a sync target: run (again on a transient failure), observed, scored
    (a `reused` result's outcome scored by the scorers it has no score of)."""
    if reused is not None and reused.outcome is not None:
        outcome, attempts = reused.outcome, reused.attempts
    else:
        attempts = 1
        while True:
            try:
                ran = target.run(agent, case, deps=deps(case) if deps else None,
                                 timeout=timeout)
            except Exception as e:
                return _failed_case(case, e, attempts)
            if (delay := _retry_delay(ran, attempts, retries, backoff)) is None:
                break
            time.sleep(delay)
            attempts += 1
        outcome = outcome_of(ran.result, ran.trace, latency=ran.latency, run_id=ran.run_id)
    have, pending = _to_score(reused, scorers, case)
    ask = target.ask if target.can_ask else None
    new = [score_one(s, case, outcome, ask, price=target.price, now=target.now)
           for s in pending]
    return _scored_case(case, outcome, (*have, *new), scorers, attempts)


async def _run_async(
    target: AsyncInterpreterTarget, agent: Agent, case: Case, scorers: Sequence[Scorer],
    deps: DepsFor | None, timeout: float | None, retries: int, backoff: float,
    reused: CaseResult | None,
) -> CaseResult:
    """`run_case` on an async target."""
    if reused is not None and reused.outcome is not None:
        outcome, attempts = reused.outcome, reused.attempts
    else:
        attempts = 1
        while True:
            try:
                ran: Ran = await target.run(agent, case, deps=deps(case) if deps else None,
                                            timeout=timeout)
            except Exception as e:
                return _failed_case(case, e, attempts)
            if (delay := _retry_delay(ran, attempts, retries, backoff)) is None:
                break
            await anyio.sleep(delay)
            attempts += 1
        outcome = outcome_of(ran.result, ran.trace, latency=ran.latency, run_id=ran.run_id)
    have, pending = _to_score(reused, scorers, case)
    ask = target.ask if target.can_ask else None
    new = [await score_one_async(s, case, outcome, ask, price=target.price, now=target.now)
           for s in pending]
    return _scored_case(case, outcome, (*have, *new), scorers, attempts)


def _check(concurrency: int, retries: int, backoff: float, timeout: float | None) -> None:
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    if retries < 0:
        raise ValueError(f"retries must be at least 0, got {retries}")
    if backoff < 0:
        raise ValueError(f"backoff must be at least 0, got {backoff}")
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be more than 0 seconds, got {timeout}")


def _names(scorers: Sequence[Scorer]) -> list[str]:
    names = [s.name for s in scorers]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"two scorers are named {sorted(dup)[0]!r}: name them apart")
    return names


async def evaluate_async(
    dataset: Dataset,
    agent: Agent,
    scorers: Sequence[Scorer] = (),
    *,
    target: Target,
    deps: DepsFor | None = None,
    concurrency: int = 4,
    timeout: float | None = None,
    retries: int = 2,
    backoff: float = 1.0,
    results: str | Path | None = None,
    experiment: str | None = None,
    thresholds: Mapping[str, float] | None = None,
    threshold: float = 1.0,
    progress: TextIO | None = None,
) -> Report:
    """Run every case of `dataset` with `agent` on `target`, score it with `scorers`,
    and report: `report.ok` when each scorer passed on at least its threshold's share of
    the cases (`thresholds` by scorer name, else `threshold`; "could-not-judge" is not a
    pass) and every case ran. See the module doc for concurrency, deadlines, retries and
    the results file. `evaluate` from sync code, `evaluate_async` under async code (an
    `AsyncInterpreterTarget`'s runs are tasks)."""
    _check(concurrency, retries, backoff, timeout)
    names = _names(scorers)
    unknown = set(thresholds or {}) - set(names)
    if unknown:
        raise ValueError(f"thresholds name no scorer: {sorted(unknown)}")
    key = experiment or experiment_name(dataset, agent)
    store = ResultStore(results) if results is not None else None
    try:
        before = store.finished(key) if store is not None else {}
        finished: dict[str, CaseResult] = {}
        bar = Progress(progress, len(dataset.cases), key)
        limiter = anyio.CapacityLimiter(concurrency)
        reused = 0

        async def one(case: Case) -> None:
            old = before.get(case.name)
            if old is not None and old.digest != case.digest():
                old = None  # the case changed: it runs again
            if isinstance(target, AsyncInterpreterTarget):
                async with limiter:
                    r = await _run_async(target, agent, case, scorers, deps, timeout,
                                         retries, backoff, old)
            else:
                r = await anyio.to_thread.run_sync(functools.partial(
                    run_case, target, agent, case, scorers, deps, timeout, retries,
                    backoff, old), limiter=limiter)
            finished[case.name] = r
            if store is not None and r != old:
                store.put(key, r)
            bar.tick(r)

        async with anyio.create_task_group() as tg:
            for case in dataset.cases:
                if case.name in before and before[case.name].digest == case.digest():
                    reused += 1
                tg.start_soon(one, case)
    finally:
        if store is not None:
            store.close()
    return build_report(key, dataset, agent, [finished[c.name] for c in dataset.cases],
                        names, thresholds, threshold, reused)


def build_report(
    key: str, dataset: Dataset, agent: Agent, results: Sequence[CaseResult],
    names: Sequence[str], thresholds: Mapping[str, float] | None, threshold: float,
    reused: int = 0,
) -> Report:
    total, currency, unknown, judges = costs(results)
    return Report(
        experiment=key, dataset=dataset.name, agent=agent.name, cases=tuple(results),
        summaries=summarize(results, names, thresholds, threshold), cost=total,
        currency=currency, cost_unknown=unknown, judge_cost=judges, reused=reused,
        errors=sum(1 for r in results if r.error is not None),
    )


def _blocking(fn: Callable[P, Awaitable[R]], name: str) -> Callable[P, R]:
    """`fn` for sync code, as `name`: each call runs it in an event loop of its own."""

    @functools.wraps(fn)
    def blocking(*args: P.args, **kwargs: P.kwargs) -> R:
        return anyio.run(functools.partial(fn, *args, **kwargs))

    blocking.__name__ = blocking.__qualname__ = name
    return blocking


evaluate = _blocking(evaluate_async, "evaluate")


# --- comparing two agents ------------------------------------------------------------------


def _replay(journal: Journal, agent: Agent, deps: object) -> ReplayRun:
    if agent.async_parts():
        return anyio.run(functools.partial(replay_async, journal, agent, deps=deps))
    return replay_sync(journal, agent, deps=deps)


def _replayed_case(
    case: Case, before: Agent, after: Agent, scorers: Sequence[Scorer],
    deps: DepsFor | None, target: SyncTarget | None, rerun_diverged: bool,
) -> tuple[CaseResult, CaseResult]:
    assert case.journal is not None
    try:
        journal = Journal.read(case.journal)
    except Exception as e:
        err = f"{type(e).__name__}: {e}"
        return (CaseResult(case=case.name, digest=case.digest(), error=err),
                CaseResult(case=case.name, digest=case.digest(), error=err))
    out: list[CaseResult] = []
    for agent in (before, after):
        try:
            run = _replay(journal, agent, deps(case) if deps else None)
        except Exception as e:
            out.append(_failed_case(case, e))
            continue
        div = str(run.divergence) if run.divergence is not None else (
            None if run.result_matches else "the same commands, but a different result")
        if div is not None and agent is after and rerun_diverged and target is not None:
            # where the changed agent goes another way, ask the model again from there
            r = run_case(target, agent, case, scorers, deps, None, 0, 0.0, None)
            if r.outcome is not None:
                r = msgspec.structs.replace(r, outcome=msgspec.structs.replace(
                    r.outcome, divergence=div))
            out.append(r)
            continue
        outcome = outcome_of(run.result, run.trace, divergence=div,
                             run_id=journal.header.run_id)
        ask = target.ask if target is not None and target.can_ask else None
        price = target.price if target is not None else None
        scores = tuple(score_one(s, case, outcome, ask, price=price) for s in scorers
                       if s.applies(case))
        out.append(CaseResult(case=case.name, digest=case.digest(), tags=case.tags,
                              outcome=outcome, scores=scores))
    return out[0], out[1]


def _calls(o: Observed | None) -> list[tuple[str, dict[str, object]]]:
    return [(c.name, c.args) for c in o.tool_calls] if o is not None else []


def _guards(o: Observed | None) -> list[tuple[str, str, str]]:
    return [(g.processor_id, g.hook, g.effect) for g in o.guards] if o is not None else []


def change_of(before: CaseResult, after: CaseResult) -> CaseChange:
    """What changed in one case between two results of it."""
    b, a = before.outcome, after.outcome
    deltas: list[ScoreDelta] = []
    for s in after.scores:
        old = before.score(s.scorer)
        d = (s.value - old.value if old is not None and s.value is not None
             and old.value is not None else None)
        deltas.append(ScoreDelta(s.scorer, old.verdict if old is not None else "-",
                                 s.verdict, d))
    cost: Decimal | None = None
    if b is not None and a is not None and b.cost is not None and a.cost is not None:
        cost = a.cost.total - b.cost.total
    return CaseChange(
        case=after.case,
        output=(b.text, b.output) != (a.text, a.output) if b and a else b is not a,
        tool_calls=_calls(b) != _calls(a),
        guards=_guards(b) != _guards(a),
        status=(b.status if b else before.error) != (a.status if a else after.error),
        cost_delta=cost,
        scores=tuple(deltas),
        divergence=a.divergence if a is not None else None,
        before_text=b.text if b is not None else (before.error or ""),
        after_text=a.text if a is not None else (after.error or ""),
    )


def compare_agents(
    dataset: Dataset,
    before: Agent,
    after: Agent,
    scorers: Sequence[Scorer] = (),
    *,
    target: Target | None = None,
    replay: bool | None = None,
    rerun_diverged: bool = False,
    deps: DepsFor | None = None,
    thresholds: Mapping[str, float] | None = None,
    threshold: float = 1.0,
    **options: object,
) -> Comparison:
    """Both agents on the same cases, and per case what changed: the output, the tool
    calls, the guards' decisions, the status, the cost, the scores.

    `replay` (default: when every case has a recorded run, `dataset_from_journals`)
    replays each recorded run against both agents: no model is called and no tool runs;
    a case where the changed agent goes another way names the divergence point (the
    command, the field, both values) as `pipeline replay` does. With `rerun_diverged`
    such a case runs again on `target` (a sync one), asking the model from the start.
    Otherwise both agents run on `target` (`evaluate`, with `options`).
    """
    names = _names(scorers)
    use_replay = replay if replay is not None else (
        bool(dataset.cases) and all(c.journal for c in dataset.cases))
    if use_replay:
        missing = [c.name for c in dataset.cases if not c.journal]
        if missing:
            raise ValueError(f"cases without a recorded run cannot be replayed: {missing}")
        if target is not None and not target.sync:
            raise ValueError("replaying compares on a sync target (or none)")
        sync_target = target if isinstance(target, SyncTarget) else None
        pairs = [_replayed_case(c, before, after, scorers, deps, sync_target, rerun_diverged)
                 for c in dataset.cases]
        b_rep = build_report(f"{dataset.name}@{before.name} (replayed)", dataset, before,
                             [p[0] for p in pairs], names, thresholds, threshold)
        a_rep = build_report(f"{dataset.name}@{after.name} (replayed)", dataset, after,
                             [p[1] for p in pairs], names, thresholds, threshold)
    else:
        if target is None:
            raise ValueError("give a target to run both agents on (or replay journals)")
        run = functools.partial(evaluate, dataset, scorers=scorers, target=target, deps=deps,
                                thresholds=thresholds, threshold=threshold,
                                **options)  # type: ignore[arg-type]
        b_rep, a_rep = run(agent=before), run(agent=after)
    changes = tuple(change_of(b, a) for b, a in zip(b_rep.cases, a_rep.cases, strict=True))
    return Comparison(before=b_rep, after=a_rep, changes=changes, replayed=use_replay)


def default_progress() -> TextIO:
    return sys.stderr


__all__ = [
    "DepsFor", "Progress", "agent_fingerprint", "build_report", "change_of", "compare_agents",
    "evaluate", "evaluate_async", "experiment_name", "run_case", "transient",
]
