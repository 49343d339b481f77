"""Scoring live runs: `OnlineScorer`, an observer.

    scoring = OnlineScorer([no_guard_tripped(), helpful_judge], rate={"support": 0.1},
                           ask=ask_with(Resolver()), recorder=recorder, otel=otel)
    interp = SyncInterpreter(resolve=Resolver(), observers=[recorder, otel, scoring])

A sampled share of the runs (`rate`: one for every agent, or by agent name, "*" for the
others) is scored once it ended, in a worker thread, off the run's path: the observer
only takes note of what the run did (its result and its processors' decisions) and
queues it; a scorer that raises, a judge that fails or hangs, a full queue (the run is
then not scored, `dropped` counts it) never reach the run. The scores are kept
(`scores`, `report()`), added to the run's journal (`recorder=`: `Journal.scores`) and,
with the OTel observer (`otel=`), exported as a span in the run's trace.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from interpreters.evals.cases import Case, tags_of
from interpreters.evals.report import CaseResult, Report, costs, summarize
from interpreters.evals.scores import Observed, Score, Scorer, outcome_of
from interpreters.evals.scoring import Ask, score_one
from interpreters.observers.observe import RunInfo, RunObserver
from interpreters.providers.provider import ProviderResolver
from interpreters.record.journal import Recorder, Scored, journal_name
from interpreters.run.common import ask_provider
from pipeline.processor import AskModel, ModelAnswer
from pipeline.protocol import EffectRecord
from pipeline.values.cost import Pricer
from pipeline.values.result import RunResult

if TYPE_CHECKING:
    from interpreters.observers.otel import OTelObserver

log = logging.getLogger("pipeline.evals")

MAX_EFFECTS = 10_000
"""Processor decisions an online scorer keeps of one run (the rest are not read)."""


def ask_with(resolve: ProviderResolver) -> Ask:
    """Judges' requests carried out on the providers `resolve` gives (`Resolver()`)."""

    def ask(request: AskModel) -> ModelAnswer:
        return ask_provider(resolve, request)

    return ask


class _Job:
    __slots__ = ("agent", "case", "journal", "outcome")

    def __init__(self, agent: str, case: Case, outcome: Observed, journal: str) -> None:
        self.agent = agent
        self.case = case
        self.outcome = outcome
        self.journal = journal


class OnlineScores:
    """What an online scorer scored: the last `keep` runs' results."""

    def __init__(self, keep: int) -> None:
        self._results: deque[CaseResult] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def add(self, r: CaseResult) -> None:
        with self._lock:
            self._results.append(r)

    def results(self) -> tuple[CaseResult, ...]:
        with self._lock:
            return tuple(self._results)


class OnlineScorer:
    """Scores sampled live runs after they end, off their path (see the module doc).

    `ask` carries out judged scorers' requests (`ask_with(Resolver())`); without it a
    judged scorer could not judge. `price` prices their calls. `max_pending` runs wait
    at most (then a run is dropped, not waited for); `timeout` bounds `flush` and
    `close`. `seed` makes the sampling repeatable.
    """

    def __init__(
        self,
        scorers: Sequence[Scorer],
        *,
        rate: float | Mapping[str, float] = 1.0,
        ask: Ask | None = None,
        price: Pricer | None = None,
        recorder: Recorder | None = None,
        otel: OTelObserver | None = None,
        max_pending: int = 256,
        keep: int = 1000,
        seed: int | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        names = [s.name for s in scorers]
        if len(set(names)) != len(names):
            raise ValueError(f"two scorers share a name: {names}")
        rates = {"*": rate} if isinstance(rate, int | float) else dict(rate)
        for k, v in rates.items():
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"rate for {k!r} must be from 0 to 1, got {v}")
        if max_pending < 1 or keep < 1:
            raise ValueError("max_pending and keep must be at least 1")
        self.scorers = tuple(scorers)
        self.rates = rates
        self.ask = ask
        self.price = price
        self.recorder = recorder
        self.otel = otel
        self.now = now
        self.scores = OnlineScores(keep)
        self.dropped = 0
        self.failed = 0
        """Runs whose scoring failed outside the scorers (writing the journal...)."""
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._queue: queue.Queue[_Job | None] = queue.Queue(maxsize=max_pending)
        self._worker: threading.Thread | None = None
        self._closed = False

    # --- the observer ----------------------------------------------------------------
    def sampled(self, agent: str) -> bool:
        r = self.rates.get(agent, self.rates.get("*", 0.0))
        if r <= 0.0:
            return False
        if r >= 1.0:
            return True
        with self._lock:
            return self._random.random() < r

    def start(self, run: RunInfo) -> RunObserver | None:
        if self._closed or not self.sampled(run.agent.name):
            return None
        return _Watching(self, run)

    def submit(self, job: _Job) -> None:
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            with self._lock:
                self.dropped += 1
            return
        with self._lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="online-scorer",
                                                daemon=True)
                self._worker.start()

    # --- the worker --------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is None:
                    return
                self._score(job)
            except Exception:
                with self._lock:
                    self.failed += 1
                log.warning("online scoring failed", exc_info=True)
            finally:
                self._queue.task_done()

    def _score(self, job: _Job) -> None:
        scores = tuple(score_one(s, job.case, job.outcome, self.ask, price=self.price,
                                 now=self.now) for s in self.scorers if s.applies(job.case))
        self.scores.add(CaseResult(case=job.case.name, digest="", outcome=job.outcome,
                                   scores=scores, tags=(job.agent,)))
        if self.recorder is not None:
            at = self.now()
            for s in scores:
                self.recorder.annotate(job.journal, Scored(
                    s.scorer, s.verdict, s.value, s.label, s.reason, at))
        if self.otel is not None:
            _span(self.otel, job, scores)

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every queued run is scored, `timeout` seconds at most; whether it
        was."""
        deadline = time.monotonic() + timeout
        q = self._queue
        with q.all_tasks_done:
            while q.unfinished_tasks:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                q.all_tasks_done.wait(left)
        return True

    def close(self, timeout: float = 30.0) -> None:
        """Score what is queued (`timeout` at most) and stop the worker."""
        self._closed = True
        self.flush(timeout)
        with self._lock:
            worker = self._worker
        if worker is not None:
            try:
                self._queue.put(None, timeout=timeout)
            except queue.Full:
                return
            worker.join(timeout)

    def report(self, *, thresholds: Mapping[str, float] | None = None,
               threshold: float = 1.0) -> Report:
        """What was scored so far, as an experiment's report."""
        results = self.scores.results()
        total, currency, unknown, judges = costs(results)
        return Report(
            experiment="online", dataset="live runs",
            agent=", ".join(sorted({t for r in results for t in r.tags})) or "-",
            cases=results,
            summaries=summarize(results, [s.name for s in self.scorers], thresholds,
                                threshold),
            cost=total, currency=currency, cost_unknown=unknown, judge_cost=judges,
        )


class _Watching(RunObserver):
    """One sampled run: its processors' decisions noted; at its end, queued."""

    sees_stream = False

    def __init__(self, owner: OnlineScorer, run: RunInfo) -> None:
        self.owner = owner
        self.run = run
        self.effects: list[EffectRecord] = []

    def effect(self, record: EffectRecord, at: float) -> None:
        if len(self.effects) < MAX_EFFECTS:
            self.effects.append(record)

    def end(self, result: RunResult | None, at: float) -> None:
        if result is None:
            return  # closed before it finished: nothing to score
        run = self.run
        outcome = outcome_of(result, self.effects, latency=at - run.started_at,
                             run_id=run.run_id)
        case = Case(name=run.run_id or "run", input=run.messages.messages,
                    metadata={"agent": run.agent.name}, tags=tags_of(run.values))
        self.owner.submit(_Job(run.agent.name, case, outcome, journal_name(run)))


def _span(otel: OTelObserver, job: _Job, scores: Sequence[Score]) -> None:
    from opentelemetry import trace

    parent = otel.span_context(job.outcome.run_id)
    ctx = trace.set_span_in_context(trace.NonRecordingSpan(parent)) if parent else None
    attrs: dict[str, str | float | bool] = {"pipeline.run_id": job.outcome.run_id,
                                             "gen_ai.agent.name": job.agent}
    for s in scores:
        attrs[f"pipeline.score.{s.scorer}.verdict"] = s.verdict
        if s.value is not None:
            attrs[f"pipeline.score.{s.scorer}.value"] = s.value
        if s.label is not None:
            attrs[f"pipeline.score.{s.scorer}.label"] = s.label
    span = otel.tracer.start_span("pipeline.score", context=ctx, attributes=attrs)
    span.end()


__all__ = ["MAX_EFFECTS", "OnlineScorer", "OnlineScores", "ask_with"]
