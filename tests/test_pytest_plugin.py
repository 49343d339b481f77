"""The pytest plugin: registered by entry point, so a project that installs
pipeline-agents gets the `simulator` and `async_simulator` fixtures with no conftest."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

pytest_plugins = ("pytester",)


def test_the_plugin_is_registered_by_entry_point() -> None:
    found = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert found.get("pipeline_agents") == "interpreters.sim.pytest_plugin"


@pytest.mark.slow  # a pytest subprocess
def test_a_project_uses_the_fixtures_without_a_conftest(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_agent='''
        import pytest
        from interpreters import Say, call
        from interpreters.sim.simulator import ScriptedModel
        from pipeline import Agent

        def weather(city: str) -> str:
            """Weather."""
            return "sunny"

        AGENT = Agent.create("m", tools=[weather])

        def test_sync(simulator):
            sim = simulator([Say("Checking.", calls=[call("weather", city="P")]), Say("Sunny.")])
            run = sim.run(AGENT, "weather?")
            assert run.result.text == "Checking.Sunny."
            assert sim.model.requests[1].messages[-1].role == "tool"

        def test_a_function_script_and_named_models(simulator):
            sim = simulator(lambda req: Say("main"), models={"other": [Say("other")]})
            assert sim.run(AGENT, "x").result.text == "main"
            assert sim.run(Agent.create("other"), "x").result.text == "other"

        def test_a_model_given_as_is(simulator):
            model = ScriptedModel([Say("as is")])
            assert simulator(model).model is model

        @pytest.mark.anyio
        async def test_async(async_simulator):
            sim = async_simulator([Say("late", latency=100.0)])
            run = await sim.run(AGENT, "hi", timeout=1)   # virtual time: at once
            assert run.result.status == "cancelled"
            assert run.clock == sim.clock.now == 1_700_000_001.0
        '''
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    # 3 sync tests, and the async one once per anyio backend installed (asyncio, trio)
    assert outcomes.get("passed", 0) >= 4, result.stdout.str()
    assert not {"failed", "errors", "error"} & set(outcomes), result.stdout.str()
