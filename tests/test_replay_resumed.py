"""Replaying a resumed run: its journal holds the suspension it went on from and the
decisions, beside the journal of the part that suspended; a replay runs no tool, types
the processors' states again, and refuses what it cannot replay."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from effects import AskApproval, Continue, Out
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.record.journal import Journal, Recorder
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.approval import AgentChanged, edit
from pipeline.processor import BaseProcessor, ToolCallArgs, ToolCallResult, processor
from pipeline.values.result import RunResult
from tests.helpers import unpaired_tool_calls

ran: list[tuple[str, int]] = []


def send(to: str, amount: int) -> str:
    """Send money."""
    ran.append((to, amount))
    return f"sent {amount} to {to}"


def ask_big(a: ToolCallArgs[None]) -> ToolCallResult[None]:
    if int(str(a.args["amount"])) >= 100:
        return AskApproval(f"send {a.args['amount']}?")
    return Continue()


class Seen(msgspec.Struct, frozen=True):
    calls: int = 0


class CountCalls(BaseProcessor[Seen]):
    """Counts the tool calls it saw in its state (a Struct: JSON in a journal)."""

    id = "count"

    def initial_state(self) -> Seen:
        return Seen()

    def process_tool_call(self, args: ToolCallArgs[Seen]) -> ToolCallResult[Seen]:
        return Out(Continue(), Seen(args.state.calls + 1))


class Opaque:
    """A state JSON cannot encode."""


class KeepsOpaque(BaseProcessor[Opaque]):
    id = "opaque"

    def initial_state(self) -> Opaque:
        return Opaque()

    def process_tool_call(self, args: ToolCallArgs[Opaque]) -> ToolCallResult[Opaque]:
        return Continue()


def _agent(*extra: BaseProcessor[Seen] | BaseProcessor[Opaque]) -> Agent:
    return Agent.create("sim/model", tools=[send], input_processors=[
        processor("ask", process_tool_call=ask_big), *extra,
    ])


def _model() -> ScriptedModel:
    return ScriptedModel([Say(calls=[call("send", to="eve", amount=500)]), Say("paid")])


def _suspend_and_resume(agent: Agent, rec: Recorder) -> tuple[str, int, RunResult]:
    """Run until the gate suspends, resume with an edit: the run id, the suspended step
    and the resumed run's result."""
    ran.clear()
    approvals = Approvals(MemoryApprovalStore())
    sim = Simulator(_model(), observers=[rec])
    s = approvals.keep(sim.run(agent, "pay eve").result).suspension
    assert s is not None
    (p,) = s.pending
    go_on = approvals.take(agent, s.run_id, [edit(p, {"to": "eve", "amount": 50})])
    return s.run_id, s.step.step_number, sim.run(agent, (), resume=go_on).result


def test_a_resumed_run_replays_from_its_own_journal_running_no_tool(tmp_path: Path) -> None:
    agent = _agent(CountCalls())
    rec = Recorder(tmp_path)
    run_id, step, resumed = _suspend_and_resume(agent, rec)
    assert resumed.status == "finished" and ran == [("eve", 50)]
    # the part that suspended keeps its journal; the resumed part has its own
    names = [f"{run_id}.ndjson", f"{run_id}.resumed-{step}.ndjson"]
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    journal = Journal.read(tmp_path / names[1])
    assert journal.header.resume is not None
    replay = Simulator.replay(journal, agent)
    assert replay.identical and replay.result == resumed
    assert ran == [("eve", 50)]  # the approved call did not run again
    assert unpaired_tool_calls(replay.result.messages.messages) == []
    # the suspended part replays too, to its suspension
    before = Simulator.replay(Journal.read(tmp_path / names[0]), agent)
    assert before.identical and before.result.status == "suspended"


def test_a_resumed_run_in_memory_is_recorded_beside_its_first_part() -> None:
    agent = _agent(CountCalls())
    rec = Recorder()
    run_id, step, resumed = _suspend_and_resume(agent, rec)
    replay = Simulator.replay(rec.journal(f"{run_id}.resumed-{step}"), agent)
    assert replay.identical and replay.result == resumed
    assert rec.journal(run_id).header.resume is None


def test_a_resumed_run_replays_only_on_its_agent() -> None:
    rec = Recorder()
    _suspend_and_resume(_agent(CountCalls()), rec)
    with pytest.raises(AgentChanged):
        Simulator.replay(rec.last(), _agent())


def test_a_state_the_journal_could_not_encode_is_said_on_replay() -> None:
    agent = _agent(KeepsOpaque())
    rec = Recorder()
    _, _, resumed = _suspend_and_resume(agent, rec)
    assert resumed.status == "finished"  # recording never stops the run
    j = Journal.from_ndjson(rec.last().to_ndjson())
    assert j.header.resume is not None
    with pytest.raises(TypeError, match="state of processor 'opaque'"):
        Simulator.replay(j, agent)


def test_a_journal_whose_suspension_kept_no_owner_replays_in_the_header_s_thread() -> None:
    """A resumed run recorded before a suspension kept its thread and resource went on
    in the thread its header names: its replay does too."""
    import json

    agent = _agent()
    rec = Recorder()
    approvals = Approvals(MemoryApprovalStore())
    sim = Simulator(_model(), observers=[rec])
    s = approvals.keep(sim.run(agent, "pay eve", thread_id="t1", resource_id="u1").result
                       ).suspension
    assert s is not None and (s.thread_id, s.resource_id) == ("t1", "u1")
    go_on = approvals.take(agent, s.run_id, [edit(s.pending[0], {"to": "eve", "amount": 5})])
    resumed = sim.run(agent, (), resume=go_on).result
    header, *rest = rec.last().to_ndjson().decode().splitlines()
    old = json.loads(header)
    assert (old["thread_id"], old["resource_id"]) == ("t1", "u1")  # inherited
    del old["resume"]["suspension"]["thread_id"], old["resume"]["suspension"]["resource_id"]
    j = Journal.from_ndjson("\n".join([json.dumps(old), *rest]) + "\n")
    assert j.header.resume is not None and j.header.resume.suspension.thread_id is None
    replay = Simulator.replay(j, agent)
    assert replay.identical and replay.result == resumed
