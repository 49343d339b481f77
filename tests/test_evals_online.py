"""Online scoring: sampled live runs scored after they end, off their path; the scores
land in the report, the run's journal and its trace (OpenTelemetry)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from interpreters import OTelObserver, Recorder
from interpreters.evals import (
    Case,
    Observed,
    OnlineScorer,
    contains,
    judge,
    no_guard_tripped,
    scorer,
)
from interpreters.evals.online import ask_with
from interpreters.observers.observe import Observer, RunInfo, RunObserver
from interpreters.record.journal import Journal, Scored
from interpreters.testing import Say, ScriptedModel, Simulator
from pipeline import Agent
from pipeline.values.result import RunResult

AGENT = Agent.create("sim/m", name="support")


def _sim(*observers: Observer, n: int = 1) -> Simulator:
    return Simulator(ScriptedModel([Say(["Hello, ", "how can I help?"])] * n),
                     observers=observers, models={"sim/judge": ScriptedModel(
                         lambda r: Say('{"score": 0.9, "reason": "ok"}'))})


def test_sampled_runs_are_scored_and_reported() -> None:
    judge_model = ScriptedModel(lambda r: Say('{"score": 0.9, "reason": "polite"}'))
    online = OnlineScorer([contains("help"), judge("Polite?", model="sim/judge")],
                          ask=ask_with(lambda _m: judge_model))
    sim = _sim(online, n=3)
    for _ in range(3):
        sim.run(AGENT, "hi")
    assert online.flush(10)
    report = online.report()
    assert len({c.case for c in report.cases}) == 3  # one per run, by its run id
    assert report.ok and all(len(c.scores) == 2 for c in report.cases)
    assert report.cases[0].scores[1].usage is not None  # the judge's call, counted
    online.close()


def test_the_rate_samples_by_agent() -> None:
    never = OnlineScorer([contains("x")], rate={"support": 0.0, "*": 1.0})
    sim = _sim(never, n=2)
    sim.run(AGENT, "hi")
    sim.run(Agent.create("sim/m", name="other"), "hi")
    assert never.flush(10)
    assert [c.tags for c in never.report().cases] == [("other",)]
    some = OnlineScorer([contains("x")], rate=0.5, seed=7)
    picked = [some.sampled("support") for _ in range(200)]
    assert 60 < sum(picked) < 140
    with pytest.raises(ValueError):
        OnlineScorer([contains("x")], rate=1.5)


def test_scores_are_added_to_the_run_journal(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path)
    online = OnlineScorer([contains("help"), no_guard_tripped()], recorder=recorder)
    _sim(recorder, online).run(AGENT, "hi")
    assert online.flush(10)
    (path,) = tmp_path.glob("*.ndjson")
    j = Journal.read(path)
    assert [(s.scorer, s.verdict) for s in j.scores] == [
        ("contains", "pass"), ("no-guard-tripped", "pass")]
    assert j.ended is not None and j.ended.status == "finished"
    assert Simulator.replay(j, AGENT).identical  # a reader of the run never sees them


class _ScoresBeforeTheEnd:
    """An observer told of the end before the recorder: it adds a score while the run's
    journal is still being written."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def start(self, run: RunInfo) -> RunObserver:
        recorder = self.recorder

        class Early(RunObserver):
            def end(self, result: RunResult | None, at: float) -> None:
                recorder.annotate(run.run_id, Scored("early", "pass"))

        return Early()


@pytest.mark.parametrize("in_memory", [False, True])
def test_a_score_added_before_the_run_ended_follows_its_end(
    tmp_path: Path, in_memory: bool
) -> None:
    recorder = Recorder(None if in_memory else tmp_path)
    _sim(_ScoresBeforeTheEnd(recorder), recorder).run(AGENT, "hi")
    j = recorder.last() if in_memory else Journal.read(next(tmp_path.glob("*.ndjson")))
    assert j.ended is not None and [s.scorer for s in j.scores] == ["early"]
    raw = j.to_ndjson().decode().splitlines()
    assert '"t":"end"' in raw[-2] and '"t":"score"' in raw[-1]
    with pytest.raises(LookupError):
        recorder.annotate("no-such-run", Scored("x", "pass"))


def test_scores_are_a_span_in_the_run_trace() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel = OTelObserver(tracer_provider=provider)
    online = OnlineScorer([contains("help")], otel=otel)
    _sim(otel, online).run(AGENT, "hi")
    assert online.flush(10)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    score, run = spans["pipeline.score"], spans["invoke_agent support"]
    assert score.parent is not None and score.parent.span_id == run.context.span_id
    assert score.context.trace_id == run.context.trace_id
    assert score.attributes is not None
    assert score.attributes["pipeline.score.contains.verdict"] == "pass"


def test_a_full_queue_drops_runs_and_never_waits() -> None:
    release = threading.Event()

    @scorer("blocked")
    def blocked(case: Case, out: Observed) -> bool:
        return release.wait(10)

    online = OnlineScorer([blocked], max_pending=1)
    sim = _sim(online, n=4)
    results = [sim.run(AGENT, "hi").result.status for _ in range(4)]
    assert results == ["finished"] * 4  # no run waited for its scoring
    release.set()
    assert online.flush(10)
    assert online.dropped >= 1
    assert len(online.report().cases) + online.dropped == 4
    online.close()
    assert online.start is not None


def test_failures_of_the_scoring_itself_are_counted_not_raised(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path)  # the run's journal is not recorded by it: LookupError
    online = OnlineScorer([contains("help")], recorder=recorder)
    _sim(online).run(AGENT, "hi")
    assert online.flush(10)
    assert online.failed == 1
