"""Online scoring changes nothing: for any run (text, tool calls, a guard that sends the
model back) and any scorers (that pass, fail, raise, return nonsense, yield what is not
a request, whose judge fails, answers nonsense or blocks), the run's result, its trace
and every chunk its caller received are the same with and without an `OnlineScorer`,
and every sampled run ends scored or dropped, never lost."""

from __future__ import annotations

import threading
from collections.abc import Generator

from hypothesis import given
from hypothesis import strategies as st

from effects import Continue
from interpreters.evals import Case, Observed, OnlineScorer, Score, Scorer, judge
from interpreters.record.journal import Recorder
from interpreters.testing import Say, ScriptedModel, Simulator, call, numbered_run_ids
from pipeline.agent import Agent
from pipeline.processor import AskModel, ModelAnswer, OutputStepArgs, OutputStepResult, abort
from pipeline.processor import Processor as _Processor

KINDS = ("pass", "fail", "raises", "nonsense", "yields-junk", "judge-fails",
         "judge-nonsense", "judge-blocks")


def lookup(q: str) -> str:
    """Look up."""
    return f"found {q}"


class Short(_Processor):
    id = "short"

    def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        if not args.tool_calls and len(args.text) < 3:
            abort("longer", retry=True)
        return Continue()


AGENT = Agent.create("sim/m", name="a", tools=[lookup], output_processors=[Short()],
                     max_processor_retries=1)
words = st.text("abc xyz.", min_size=1, max_size=6)


@st.composite
def scripts(draw: st.DrawFn) -> list[Say]:
    steps = draw(st.lists(st.builds(
        lambda text, calls: Say(text, calls=[call("lookup", q=q) for q in calls]),
        st.lists(words, max_size=3), st.lists(words, max_size=2)), max_size=3))
    return [*steps, Say("the end."), Say("again.")]


def _scorer(kind: str, n: int, gate: threading.Event) -> Scorer:
    def plain(case: Case, out: Observed) -> Score | bool:
        if kind == "raises":
            raise RuntimeError("scorer bug")
        if kind == "nonsense":
            return "yes"  # type: ignore[return-value]
        return kind == "pass"

    def junk(case: Case, out: Observed) -> Generator[object, ModelAnswer, Score]:
        yield "not a request"
        return Score(scorer=f"s{n}", verdict="pass")

    if kind.startswith("judge"):  # the model id tells the scripted judge what to do
        return judge("Polite?", model=kind, name=f"s{n}")
    if kind == "yields-junk":
        return Scorer(f"s{n}", junk, judged=True)  # type: ignore[arg-type]
    return Scorer(f"s{n}", plain)


def _ask(gate: threading.Event):  # type: ignore[no-untyped-def]
    def ask(request: AskModel) -> ModelAnswer:
        kind = request.request.model
        if kind == "judge-fails":
            raise ConnectionError("judge down")
        if kind == "judge-blocks":
            gate.wait(5)
        return ModelAnswer("{not a verdict")

    return ask


@given(scripts(), st.lists(st.sampled_from(KINDS), min_size=1, max_size=4),
       st.sampled_from([0.0, 0.5, 1.0]), st.integers(1, 3), st.booleans())
def test_a_run_is_the_same_with_and_without_online_scorers(
    script: list[Say], kinds: list[str], rate: float, pending: int, record: bool,
) -> None:
    gate = threading.Event()
    scorers = [_scorer(k, i, gate) for i, k in enumerate(kinds)]
    recorder = Recorder() if record else None
    online = OnlineScorer(scorers, rate=rate, ask=_ask(gate), max_pending=pending,
                          recorder=recorder, seed=1)
    plain = Simulator(ScriptedModel(list(script)), run_ids=numbered_run_ids())
    scored = Simulator(ScriptedModel(list(script)), run_ids=numbered_run_ids(),
                       observers=[recorder, online] if recorder else [online])
    for _ in range(2):
        a = plain.run(AGENT, "go")
        b = scored.run(AGENT, "go")
        assert b.result == a.result
        assert b.trace.comparable() == a.trace.comparable()
        assert b.chunks == a.chunks
    gate.set()
    assert online.flush(30)
    scored_runs = len(online.report().cases)
    assert scored_runs + online.dropped <= 2
    if rate == 1.0:
        assert scored_runs + online.dropped == 2
    assert online.failed == 0  # a scorer's failure is its score, not a lost run
    for r in online.report().cases:
        assert len(r.scores) == len(kinds)
        for s, k in zip(r.scores, kinds, strict=True):
            if k == "pass":
                assert s.verdict == "pass"
            elif k == "fail":
                assert s.verdict == "fail"
            else:  # every failure is "could-not-judge", never a pass
                assert s.verdict == "could-not-judge", (k, s)
    online.close(5)
