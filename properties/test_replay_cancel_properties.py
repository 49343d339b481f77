"""A run cancelled at any command replays to the same run.

For the generated pipelines and scripts of `test_equivalence`, a run on the `Simulator`
(sync) and one on the `AsyncSimulator` (every plain hook `async def`) are cancelled by
their signal as their k-th command is yielded (every k the uncancelled run reaches, or
past its end), recorded, passed through NDJSON and replayed: the replay ends with the
recorded result and trace, with no divergence.
"""

from __future__ import annotations

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from interpreters.core.cancel import CancelSignal
from interpreters.record.journal import Journal, Recorder
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
from properties.test_replay_properties import same
from tests.helpers import CancelAt


def sync_cancelled_at(agent: Agent, script: list[Scripted], prompt: str, at: int) -> None:
    rec, signal = Recorder(pii="keep"), CancelSignal()  # as the run saw it: exact replay
    sim = Simulator(ScriptedModel(script), models={"judge": ScriptedModel(judge_script)},
                    handlers={Check: check_text}, start=START,
                    observers=[rec, CancelAt(signal, at)])
    run = sim.run(agent, prompt, signal=signal)
    replay = Simulator.replay(Journal.from_ndjson(rec.last().to_ndjson()), agent)
    same(replay, run.result, run.trace.comparable())


def async_cancelled_at(agent: Agent, script: list[Scripted], prompt: str, at: int) -> None:
    async def main() -> None:
        rec, signal = Recorder(pii="keep"), CancelSignal()  # as the run saw it: exact replay
        sim = AsyncSimulator(ScriptedModel(script),
                             models={"judge": ScriptedModel(judge_script)},
                             handlers={Check: check_text}, start=START,
                             observers=[rec, CancelAt(signal, at)])
        run = await sim.run(agent, prompt, signal=signal)
        journal = Journal.from_ndjson(rec.last().to_ndjson())
        replay = await AsyncSimulator.replay(journal, agent)
        same(replay, run.result, run.trace.comparable())

    anyio.run(main)


# Two recorded runs and two replays per example: a third of the profile's examples.
@settings(max_examples=max(10, settings().max_examples // 3))
@given(pipeline=pipelines, script=scripts, prompt=prompts, at=st.integers(0, 30))
def test_a_run_cancelled_at_any_command_replays_to_the_same_run(
    pipeline: Pipeline, script: list[Scripted], prompt: str, at: int
) -> None:
    sync_cancelled_at(pipeline.agent(), script, prompt, at)
    async_cancelled_at(pipeline.agent(make_async=True), script, prompt, at)
