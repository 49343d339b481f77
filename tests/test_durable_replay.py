"""Replaying recorded durable runs on the current agents (a CI check): runs replay on the
agent they were recorded on, and a changed agent or step order is reported per run."""

from __future__ import annotations

from pathlib import Path

import pytest
from dbos import DBOS

from interpreters.durable.dbos.replay import replay_runs
from interpreters.durable.dbos.runs import DurableRuns, StreamMode
from interpreters.durable.fingerprint import definition, digest
from interpreters.testing import ScriptedModel
from pipeline.tools import tool
from tests.helpers import make_agent
from tests.test_durable import TOOL_RUNS, get_weather, script, weather_agent


def recorded(tmp_path: Path, stream: StreamMode = "live") -> str:
    """A store with two finished runs of the weather agent."""
    url = f"sqlite:///{tmp_path / 'rec.sqlite'}"
    model = ScriptedModel(lambda req: script()[0 if len(req.messages) == 1 else 1])
    with DurableRuns({"weather": weather_agent()}, model, database_url=url,
                     observers=(), stream=stream) as r:
        r.run("weather", "weather?", run_id="r1", wait=60)
        r.run("weather", "weather? again", run_id="r2", wait=60)
    return url


@pytest.mark.parametrize("stream", ["live", "with_steps"])
def test_recorded_runs_replay_on_the_agent_they_ran_on_without_running_anything(
    tmp_path: Path, stream: StreamMode
) -> None:
    url = recorded(tmp_path, stream)
    TOOL_RUNS.clear()
    assert replay_runs(url, {"weather": weather_agent()}) == ()
    assert TOOL_RUNS == []  # nothing ran: outcomes came from the store


def test_a_changed_agent_is_reported_per_run_unless_migrated(tmp_path: Path) -> None:
    url = recorded(tmp_path)
    changed = make_agent(tools=[tool(get_weather)], instructions="Answer in French.")
    problems = replay_runs(url, {"weather": changed})
    assert sorted(p.run_id for p in problems) == ["r1", "r2"]
    assert all("agent changed" in p.problem and "instructions" in p.problem for p in problems)
    old = digest(definition(weather_agent()))
    assert replay_runs(url, {"weather": changed}, migrations={"weather": [old]}) == ()


def test_a_run_whose_steps_no_longer_match_is_reported(tmp_path: Path) -> None:
    url = recorded(tmp_path)

    # one step fewer allowed: the replay stops where the recorded run went on
    shorter = make_agent(tools=[tool(get_weather)], max_steps=1)
    old = digest(definition(weather_agent()))
    problems = replay_runs(url, {"weather": shorter}, migrations={"weather": [old]},
                           run_ids=["r1"])
    assert [p.run_id for p in problems] == ["r1"]
    assert problems[0].problem == "the run now ends before recorded step 3"


def test_a_run_that_called_a_tool_the_agent_no_longer_has_is_reported(tmp_path: Path) -> None:
    url = recorded(tmp_path)

    def get_forecast(city: str) -> str:
        """Tomorrow."""
        return city

    renamed = make_agent(tools=[tool(get_forecast)])
    old = digest(definition(weather_agent()))
    problems = replay_runs(url, {"weather": renamed}, migrations={"weather": [old]})
    assert sorted(p.run_id for p in problems) == ["r1", "r2"]
    assert all("tool 'get_weather', which the agent no longer has" in p.problem
               for p in problems)


def test_a_run_started_here_keeps_its_definition_with_its_inputs_a_queued_one_in_a_step(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'rec.sqlite'}"
    model = ScriptedModel(lambda req: script()[0 if len(req.messages) == 1 else 1])
    with DurableRuns({"weather": weather_agent()}, model, database_url=url,
                     observers=()) as r:
        r.run("weather", "weather?", run_id="here", wait=60)
        r.enqueue("weather", "weather?", run_id="queued")
        assert r.result("queued", timeout=60).status == "finished"
        here, queued = ([s["function_name"] for s in DBOS.list_workflow_steps(run_id)
                         if not s["function_name"].startswith("DBOS.")]  # (stream writes)
                        for run_id in ("here", "queued"))
    assert here[0] == "model"  # no step of its own: it went with the inputs
    assert queued[0] == "agent" and queued[1:] == here
    assert replay_runs(url, {"weather": weather_agent()}) == ()
    changed = make_agent(tools=[tool(get_weather)], instructions="Answer in French.")
    problems = replay_runs(url, {"weather": changed})
    assert sorted(p.run_id for p in problems) == ["here", "queued"]
    assert all("agent changed" in p.problem and "instructions" in p.problem for p in problems)
