"""Many tool calls in one model response: their ids are kept unique at a cost that grows
with the calls, not with their square (comparisons counted, never timed), and a response
with more calls than `MAX_TOOL_CALLS_PER_RESPONSE` fails the run with a typed error
before any call runs."""

from __future__ import annotations

from effects import CloseStream
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.values.bounds import MAX_TOOL_CALLS_PER_RESPONSE
from pipeline.values.pairing import is_paired
from pipeline.values.result import StreamFailed

ran: list[int] = []


def echo(x: int) -> int:
    """Echo x."""
    ran.append(x)
    return x


class CountedId(str):
    """A tool-call id that counts how often it is compared or hashed."""

    ops = 0

    def __eq__(self, other: object) -> bool:
        CountedId.ops += 1
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        CountedId.ops += 1
        return str.__ne__(self, other)

    def __hash__(self) -> int:
        CountedId.ops += 1
        return str.__hash__(self)


def _ops(n: int, shared: bool) -> int:
    """The comparisons and hashes of ids a run with `n` calls in one response makes."""
    calls = [call("echo", tool_call_id=CountedId("call_0" if shared else f"c{i}"), x=i)
             for i in range(n)]
    CountedId.ops = 0
    r = Simulator(ScriptedModel([Say(calls=calls), Say("ok")])).run(
        Agent.create("m", tools=[echo]), "go").result
    assert r.status == "finished" and len(r.steps[0].tool_results) == n
    return CountedId.ops


def test_keeping_the_ids_of_a_response_unique_costs_in_proportion_to_its_calls() -> None:
    for shared in (False, True):  # distinct ids; one id for every call (renamed)
        small, large = _ops(100, shared), _ops(1000, shared)
        # 10 times the calls: about 10 times the work (a scan per call would be 100 times)
        assert large < 20 * small, (shared, small, large)


def test_more_calls_than_the_cap_in_one_response_fail_the_run_and_none_runs() -> None:
    agent = Agent.create("m", tools=[echo])
    ran.clear()
    calls = [call("echo", x=i) for i in range(MAX_TOOL_CALLS_PER_RESPONSE + 1)]
    run = Simulator(ScriptedModel([Say("Let me see. ", calls=calls), Say("ok")])).run(agent, "go")
    r = run.result
    assert r.status == "failed" and isinstance(r.error, StreamFailed)
    assert r.error.error is not None and r.error.error.error_type == "limit_exceeded"
    assert f"more than {MAX_TOOL_CALLS_PER_RESPONSE} tool calls" in r.error.message
    assert ran == []  # nothing ran
    assert not [p for m in r.messages.messages for p in m.tool_calls()]
    assert is_paired(r.messages.messages)
    assert any(isinstance(c, CloseStream) for c in run.trace.commands)  # the stream closed

    ran.clear()
    at_cap = calls[:MAX_TOOL_CALLS_PER_RESPONSE]
    r = Simulator(ScriptedModel([Say(calls=at_cap), Say("ok")])).run(agent, "go").result
    assert r.status == "finished" and len(ran) == MAX_TOOL_CALLS_PER_RESPONSE
