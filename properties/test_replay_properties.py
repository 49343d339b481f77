"""A recorded run replays to the same run, whatever the agent and the model did.

For the generated pipelines and scripts of `test_equivalence` (text, reasoning, data,
tool calls valid and not, a tool that raises, broken and unfinished streams, transient
and non-retryable API errors, replacements, skips, emits, retries with feedback, aborts,
an API-error recovery, a crashing processor, generator hooks doing I/O through a handler
and a judge model, prepare_step), a run recorded on the `Simulator` (sync) and one on the
`AsyncSimulator` with every plain hook `async def`, each passed through NDJSON, replay
(`Simulator.replay`, `AsyncSimulator.replay`) to the recorded result and trace
(`Trace.comparable()`), with no divergence: the journal holds everything the loop was fed.
"""

from __future__ import annotations

import anyio
from hypothesis import given, settings

from interpreters.record.journal import Journal, Recorder
from interpreters.record.replay import ReplayRun
from interpreters.sim.simulator import Scripted
from interpreters.testing import AsyncSimulator, ScriptedModel, Simulator
from pipeline.agent import Agent
from properties.test_equivalence import (
    START,
    Check,
    Pipeline,
    check_text,
    judge_script,
    pipelines,
    prompts,
    scripts,
)


def record_and_replay_sync(agent: Agent, script: list[Scripted], prompt: str) -> None:
    rec = Recorder(pii="keep")  # as the run saw it: exact replay
    sim = Simulator(ScriptedModel(script), models={"judge": ScriptedModel(judge_script)},
                    handlers={Check: check_text}, start=START, observers=[rec])
    run = sim.run(agent, prompt)
    journal = Journal.from_ndjson(rec.last().to_ndjson())
    replay = Simulator.replay(journal, agent)
    same(replay, run.result, run.trace.comparable())


def record_and_replay_async(agent: Agent, script: list[Scripted], prompt: str) -> None:
    async def main() -> None:
        rec = Recorder(pii="keep")
        sim = AsyncSimulator(ScriptedModel(script),
                             models={"judge": ScriptedModel(judge_script)},
                             handlers={Check: check_text}, start=START, observers=[rec])
        run = await sim.run(agent, prompt)
        journal = Journal.from_ndjson(rec.last().to_ndjson())
        replay = await AsyncSimulator.replay(journal, agent)
        same(replay, run.result, run.trace.comparable())

    anyio.run(main)


def same(replay: ReplayRun, result: object, comparable: tuple[object, ...]) -> None:
    assert replay.result == result
    assert replay.trace.comparable() == comparable
    assert replay.divergence is None, replay.divergence
    assert replay.identical


# Two recorded runs and two replays per example: a third of the profile's examples.
@settings(max_examples=max(10, settings().max_examples // 3))
@given(pipeline=pipelines, script=scripts, prompt=prompts)
def test_a_recorded_run_replays_to_the_same_run(
    pipeline: Pipeline, script: list[Scripted], prompt: str
) -> None:
    record_and_replay_sync(pipeline.agent(), script, prompt)
    record_and_replay_async(pipeline.agent(make_async=True), script, prompt)
