"""A tree of runs (agents calling agents, docs/agents.md) recorded to one journal and
replayed offline: each child's commands and replies under its path, replayed against
the tree's agents as they are now, the diverging node named."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from effects import AskApproval, Continue, Replace
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.memory import HashEmbedder, InMemoryStore, memory_handlers
from interpreters.record.journal import Journal, Recorder
from interpreters.record.replay import replay_async
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator, call
from pipeline import Agent, Processor, StreamArgs, TextDelta, ToolCallArgs, ToolCallResult
from pipeline.approval import approve
from pipeline.processor import StreamResult, processor
from pipeline.processors import MessageHistory


def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


class Shout(Processor):
    id = "shout"

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta):
            return Replace(TextDelta(args.part.id, args.part.text.upper()))
        return Continue()


def team(*, child_extra: tuple[Processor, ...] = (),
         lead_extra: tuple[Processor, ...] = ()) -> Agent:
    research = Agent.create("sim/research", name="research", tools=[look],
                            output_processors=list(child_extra))
    writer = Agent.create("sim/writer", name="writer")
    return Agent.create("sim/lead", name="lead", tools=[research, writer],
                        output_processors=list(lead_extra))


def models() -> dict[str, ScriptedModel]:
    return {
        "sim/lead": ScriptedModel([
            Say(calls=[call("research", input="policy"), call("writer", input="a note")]),
            Say("All done."),
        ]),
        "sim/research": ScriptedModel([Say(calls=[call("look", q="policy")]),
                                       Say("30 days")]),
        "sim/writer": ScriptedModel([Say(["Dear ", "customer"])]),
    }


def recorded_sync() -> Journal:
    rec = Recorder()
    m = models()
    r = Simulator(m["sim/lead"], models=m, observers=[rec]).run(team(), "refund policy?")
    assert r.result.status == "finished"
    return rec.last()


def test_a_tree_recorded_in_one_journal_replays_identical() -> None:
    journal = recorded_sync()
    replay = Simulator.replay(journal, team())
    assert replay.divergence is None, str(replay.divergence)
    assert replay.identical
    assert [n.agent for n in replay.result.children] == ["research", "writer"]
    assert Journal.from_ndjson(journal.to_ndjson()).entries == journal.entries


def test_a_tree_recorded_under_the_async_interpreter_replays_identical() -> None:
    rec = Recorder()
    m = models()

    async def main() -> None:
        await AsyncSimulator(m["sim/lead"], models=m, observers=[rec]).run(team(), "q?")

    anyio.run(main)
    replay = Simulator.replay(rec.last(), team())
    assert replay.identical, str(replay.divergence)


def test_a_changed_child_is_named_where_the_replay_diverges() -> None:
    replay = Simulator.replay(recorded_sync(), team(child_extra=(Shout(),)))
    d = replay.divergence
    assert d is not None and not replay.identical
    assert d.path == ("call_0_0",) and d.agent == "research"
    assert "call_0_0" in str(d) and "research" in str(d)
    assert replay.result.children[0].status == "finished"
    results = [p.result for m in replay.result.messages.messages for p in m.tool_results()]
    assert results == ["30 DAYS", "Dear customer"]  # the tree ran again, the child changed


def test_a_changed_parent_is_named_where_the_replay_diverges_its_children_replayed() -> None:
    replay = Simulator.replay(recorded_sync(), team(lead_extra=(Shout(),)))
    d = replay.divergence
    assert d is not None and d.path == () and d.agent == "lead"
    assert replay.result.text == "ALL DONE."
    assert [n.status for n in replay.result.children] == ["finished", "finished"]


def test_an_async_replay_replays_the_tree_too() -> None:
    journal = recorded_sync()
    replay = anyio.run(lambda: replay_async(journal, team()))
    assert replay.identical, str(replay.divergence)


def test_a_resumed_tree_replays_identical(tmp_path: Path) -> None:
    def ask(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        return AskApproval("ok?") if a.tool_name == "look" else Continue()

    def tree() -> Agent:
        research = Agent.create("sim/research", name="research", tools=[look],
                                input_processors=[processor("ask", process_tool_call=ask)])
        notes = Agent.create("sim/notes", name="notes", input_processors=[MessageHistory()])
        return Agent.create("sim/lead", name="lead", tools=[research, notes])

    rec = Recorder(tmp_path)
    m = {
        "sim/lead": ScriptedModel([
            Say(calls=[call("research", input="policy"), call("notes", input="keep")]),
            Say("done")]),
        "sim/research": ScriptedModel([Say(calls=[call("look", q="policy")]), Say("30 days")]),
        "sim/notes": ScriptedModel([Say("kept")]),
    }
    store = InMemoryStore()
    sim = Simulator(m["sim/lead"], models=m, observers=[rec],
                    handlers=memory_handlers(store, HashEmbedder()))
    first = sim.run(tree(), "policy?", thread_id="t").result
    assert first.status == "suspended" and first.suspension is not None
    desk = Approvals(MemoryApprovalStore(), tree())
    desk.keep(first)
    go_on = desk.decide(first.suspension.run_id, [approve(p) for p in first.suspension.pending])
    done = sim.run(tree(), (), resume=go_on).result
    assert done.status == "finished"
    for name in (first.suspension.run_id, f"{first.suspension.run_id}.resumed-0"):
        replay = Simulator.replay(Journal.read(tmp_path / f"{name}.ndjson"), tree())
        assert replay.identical, (name, str(replay.divergence))


def test_the_journal_of_a_tree_is_one_file(tmp_path: Path) -> None:
    rec = Recorder(tmp_path)
    m = models()
    Simulator(m["sim/lead"], models=m, observers=[rec]).run(team(), "q?")
    (only,) = list(tmp_path.iterdir())
    assert Simulator.replay(Journal.read(only), team()).identical


@pytest.mark.parametrize("changed", ["research", "writer"])
def test_a_replay_with_a_child_the_recording_lacks_says_so(changed: str) -> None:
    journal = recorded_sync()
    research = Agent.create("sim/research", name="research", tools=[look])
    writer = Agent.create("sim/writer", name="writer")
    other = Agent.create("sim/other", name="other")
    tools = [research, other] if changed == "writer" else [other, writer]
    renamed = [t if t is not other else other.as_tool(changed) for t in tools]
    lead = Agent.create("sim/lead", name="lead", tools=renamed)
    replay = Simulator.replay(journal, lead)
    assert replay.divergence is not None and not replay.identical


def test_the_studio_shows_a_trees_child_runs_under_their_paths() -> None:
    from interpreters.cli.studio import timeline

    t = timeline(recorded_sync())
    paths = {tuple(p) for r in t.rows if isinstance(p := r.get("path"), list)}
    assert paths == {("call_0_0",), ("call_0_1",)}
    assert t.summary["child_runs"] == 2
    assert t.summary["model_calls"] == 2  # the root's own


def test_the_studio_nests_each_child_run_under_the_run_that_called_it(tmp_path: Path) -> None:
    from interpreters.cli.studio import timeline
    from tests.studio_runs import record_tree_run

    name = record_tree_run(tmp_path)
    t = timeline(Journal.read(tmp_path / f"{name}.ndjson"))
    tree = t.summary["tree"]
    assert isinstance(tree, dict)

    def shape(node: object) -> object:
        assert isinstance(node, dict)
        return (node["agent"], node["status"], [shape(c) for c in node["children"]])

    assert shape(tree) == ("lead", "finished", [
        ("research", "finished", [("source", "finished", [])]),
        ("writer", "finished", []),
    ])
    (research,) = [c for c in tree["children"] if c["agent"] == "research"]
    (source,) = research["children"]
    assert source["path"] == [*research["path"], source["path"][-1]]
    assert (research["model_calls"], source["model_calls"]) == (2, 1)
    # each row of a child run says how deep it is and which of its own steps it is in
    first = next(r for r in t.rows if r["n"] == source["n"])
    assert first["depth"] == 2 and first["agent"] == "source" and first["kind"] == "run"
    steps = {r["step"] for r in t.rows if r.get("path") == source["path"]
             and r["kind"] == "command"}
    assert steps == {0}
