"""Trees of runs (docs/agents.md): random trees (depth <= 3, fan-out <= 4) of scripted
agents that finish, trip, fail, retry or wait for approval. Whatever the tree does:

- what the root delivers (its stream and its messages) holds nothing a guard on the path
  would have blocked: each agent says a secret its own guard redacts and its parent's
  guard would redact too;
- the store holds only the threads of runs that finished in a tree whose root finished;
- every approved nested call runs exactly once, none before its approval;
- the journal of each part of the run (the tree in one journal) replays identical;
- the sync interpreter, the async one on asyncio and on trio, and the durable
  interpreter's loop over in-process steps (as properties/test_equivalence.py drives it)
  give the same statuses, tree, text, store and stream: the root's own chunks in order,
  and each child's live chunks in order (children running at once interleave theirs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio
import msgspec
from hypothesis import given
from hypothesis import strategies as st

from effects import Abort, AskApproval, Continue, Replace
from interpreters.core.options import TracedScope
from interpreters.core.trace import Trace
from interpreters.durable.loop import ModelOutcome, ToolDone, drive
from interpreters.memory import HashEmbedder, InMemoryStore, memory_handlers
from interpreters.record.journal import Recorder
from interpreters.record.replay import replay_sync
from interpreters.run.common import perform_here, run_tool, start_run, stream_failed
from interpreters.testing import (
    AsyncSimulator,
    Fail,
    Say,
    ScriptedModel,
    Simulator,
    VirtualClock,
    call,
    numbered_run_ids,
)
from pipeline import Agent, RunResult, ToolCallArgs, ToolCallResult, processor
from pipeline.approval import Resumption, approve, resumption
from pipeline.processor import BaseProcessor, StreamArgs, StreamResult
from pipeline.processors import MessageHistory
from pipeline.protocol import ToolInvocation
from pipeline.values.chunks import Chunk, DataChunk, ModelEvent, TextDelta, ToolResult
from pipeline.values.model import ModelRequest

SECRET = "SECRET"
KINDS = ("ok", "trip", "fail", "retry", "approve")


@dataclass
class Node:
    kind: str
    children: list[Node] = field(default_factory=list)


def trees(depth: int) -> st.SearchStrategy[Node]:
    kids = st.lists(trees(depth - 1), max_size=4) if depth > 1 else st.just([])
    return st.builds(Node, st.sampled_from(KINDS), kids)


def _scrub(value: object) -> object:
    if isinstance(value, str):
        return value.replace(SECRET, "[x]")
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


class Guard(BaseProcessor):
    """Redacts the secret from text, tool results and data chunks on the way out."""

    id = "guard"
    process_data_parts = True

    def process_output_stream(self, args: StreamArgs[object]) -> StreamResult[object]:
        c = args.part
        if type(c) is TextDelta and SECRET in c.text:
            return Replace(TextDelta(c.id, c.text.replace(SECRET, "[x]")))
        if type(c) is DataChunk:
            return Replace(DataChunk(c.name, _scrub(c.data), c.transient))
        if type(c) is ToolResult:
            return Replace(ToolResult(c.tool_call_id, c.tool_name, _scrub(c.result)))
        return Continue()


class Tree:
    """A random tree as agents, their scripts, and what their tools did."""

    def __init__(self, root: Node) -> None:
        self.scripts: dict[str, list[Say | Fail]] = {}
        self.acted: list[str] = []
        self.agents: dict[str, Agent] = {}
        self.kinds: dict[str, str] = {}
        self.parent: dict[str, str] = {}
        self.root = self._agent("n", root, top=True)

    def _agent(self, name: str, node: Node, *, top: bool = False) -> Agent:
        kids = [self._agent(f"{name}{i}", c) for i, c in enumerate(node.children)]
        for i in range(len(node.children)):
            self.parent[f"{name}{i}"] = name
        self.kinds[name] = node.kind
        acted = self.acted

        def act(x: int) -> str:
            """Act."""
            acted.append(name)
            return f"acted {x}"

        ins: list[BaseProcessor] = [MessageHistory()]
        outs: list[BaseProcessor] = [Guard()]
        kind = "ok" if top and node.kind in ("approve", "fail") else node.kind
        if kind == "approve":
            def ask(args: ToolCallArgs[None]) -> ToolCallResult[None]:
                return AskApproval("ok?") if args.tool_name == "act" else Continue()
            ins.append(processor("ask", process_tool_call=ask))
        if kind == "trip":
            outs.append(processor("block", process_output_result=lambda a: Abort("no")))
        script: list[Say | Fail] = []
        if kind == "fail":
            script.append(Fail(status=400, message="refused"))
        else:
            first_calls = [call(k.name, input=f"ask {k.name}") for k in kids]
            if kind == "approve":
                first_calls.append(call("act", x=1))
            if first_calls:
                script.append(Say(calls=first_calls))
            if kind == "retry":
                script.append(Say(f"draft {SECRET}"))

                def once(args: object) -> object:
                    return Abort("again", retry=True) if "draft" in getattr(args, "text", "") \
                        else Continue()
                outs.append(processor("retry", process_output_step=once))  # type: ignore[arg-type]
            script.append(Say(f"{SECRET} from {name}"))
        self.scripts[f"sim/{name}"] = script
        agent = Agent.create(
            f"sim/{name}", name=name, tools=[*kids, act], input_processors=ins,
            output_processors=outs, max_processor_retries=1,
        )
        self.agents[name] = agent
        return agent

    def models(self) -> dict[str, ScriptedModel]:
        return {k: ScriptedModel(list(v)) for k, v in self.scripts.items()}


def _drive_sync(tree: Tree, store: InMemoryStore) -> tuple[list[RunResult], list[Chunk]]:
    """The tree on the sync simulator, recorded: each part's journal replays identical."""
    models = tree.models()
    recorder = Recorder()
    sim = Simulator(models["sim/n"], models=models, run_ids=numbered_run_ids(),
                    handlers=memory_handlers(store, HashEmbedder()), observers=[recorder])
    results: list[RunResult] = []
    chunks: list[Chunk] = []
    resume: Resumption | None = None
    for _ in range(4):
        ran = sim.run(tree.root, "go" if resume is None else (), thread_id="t", resume=resume)
        replay = replay_sync(recorder.last(), tree.root)
        assert replay.identical, str(replay.divergence)
        results.append(ran.result)
        chunks.extend(ran.trace.chunks)
        s = ran.result.suspension
        if ran.result.status != "suspended" or s is None:
            break
        resume = resumption(s, [approve(p) for p in s.pending])
    return results, chunks


Driven = tuple[list[RunResult], list[Chunk], InMemoryStore]


def _drive_async(tree: Tree, backend: str) -> Driven:
    models = tree.models()
    store = InMemoryStore()

    async def main() -> tuple[list[RunResult], list[Chunk]]:
        sim = AsyncSimulator(models["sim/n"], models=models, run_ids=numbered_run_ids(),
                             handlers=memory_handlers(store, HashEmbedder()))
        results: list[RunResult] = []
        chunks: list[Chunk] = []
        resume: Resumption | None = None
        for _ in range(4):
            ran = await sim.run(tree.root, "go" if resume is None else (), thread_id="t",
                                resume=resume)
            results.append(ran.result)
            chunks.extend(ran.trace.chunks)
            s = ran.result.suspension
            if ran.result.status != "suspended" or s is None:
                break
            resume = resumption(s, [approve(p) for p in s.pending])
        return results, chunks

    results, chunks = anyio.run(main, backend=backend)
    return results, chunks, store


class _InProcessSteps:
    """The durable loop's `Steps` carried out in process (as properties/test_equivalence.py
    does): the scripted models, the memory store's handlers, a virtual clock."""

    def __init__(self, models: dict[str, ScriptedModel], store: InMemoryStore,
                 clock: VirtualClock) -> None:
        self.models = models
        self.handlers = memory_handlers(store, HashEmbedder())
        self.clock = clock
        self.published: list[Chunk] = []

    def model(self, request: ModelRequest) -> ModelOutcome:
        events: list[ModelEvent] = []
        try:
            for e in self.models[request.model].stream(request):
                events.append(e)
        except Exception as e:
            return ModelOutcome(tuple(events), stream_failed(e, started=bool(events)))
        return ModelOutcome(tuple(events))

    def tool(self, inv: ToolInvocation) -> ToolDone:
        return ToolDone(run_tool(inv))

    def perform(self, request: object) -> object:
        return perform_here(lambda m: self.models[m], self.handlers, request)

    def sleep(self, seconds: float) -> None:
        self.clock.sleep(seconds)

    def publish(self, chunks: tuple[Chunk, ...]) -> None:
        self.published.extend(chunks)

    def expired(self) -> str | None:
        return None

    def now(self) -> float:
        return self.clock.now


def _drive_durable(tree: Tree) -> Driven:
    models = tree.models()
    store = InMemoryStore()
    clock = VirtualClock(1_700_000_000.0)
    steps = _InProcessSteps(models, store, clock)
    results: list[RunResult] = []
    resume: Resumption | None = None
    for n in range(4):
        options: TracedScope = {"trace": Trace(), "thread_id": "t"}
        if resume is not None:
            options["resume"] = resume
        d = start_run(tree.root, "go" if resume is None else (), run_id=f"run{n + 1}",
                      clock=clock, options=options)
        result = drive(d, steps)
        results.append(result)
        s = result.suspension
        if result.status != "suspended" or s is None:
            break
        resume = resumption(s, [approve(p) for p in s.pending])
    return results, steps.published, store


def _live(c: Chunk) -> tuple[str, ...] | None:
    """The path of the child whose live chunk `c` is, or None for the root's own: a
    child's text and discarded steps, and what its own children's ends it streams."""
    if type(c) is DataChunk and c.name == "data-agent" and isinstance(c.data, dict):
        path = tuple(c.data["path"])
        if c.data.get("status") in ("running", "discarded"):
            return path
        if len(path) > 1:  # a grandchild's end, which its parent (a child) streamed
            return path[:-1]
    return None


def _by_node(chunks: list[Chunk]) -> tuple[list[Chunk], dict[str, list[Chunk]]]:
    """The root's own chunks in order, and each child's live chunks in order."""
    own: list[Chunk] = []
    live: dict[str, list[Chunk]] = {}
    for c in chunks:
        path = _live(c)
        if path is None:
            own.append(c)
        else:
            live.setdefault("/".join(path), []).append(c)
    return own, live


def _stored(tree: Tree, store: InMemoryStore) -> dict[str, list[str]]:
    threads = ["t", *(f"t/{'/'.join(p)}" for p in _threads(tree))]
    return {t: [m.text for m in store.last_messages(t, 100)] for t in threads
            if store.last_messages(t, 100)}


def _finished_paths(r: RunResult) -> set[str]:
    """The agents of the tree that finished under a finished root (by name)."""
    out: set[str] = set()
    if r.status != "finished":
        return out
    out.add("n")

    def walk(nodes: tuple[object, ...]) -> None:
        for n in nodes:
            if getattr(n, "status", None) == "finished":
                out.add(getattr(n, "agent"))  # noqa: B009
                walk(getattr(n, "children"))  # noqa: B009

    walk(r.children)
    return out


@given(trees(3))
def test_a_tree_of_runs_keeps_the_promises_of_one_run(root: Node) -> None:
    tree = Tree(root)
    store = InMemoryStore()
    results, chunks = _drive_sync(tree, store)
    final = results[-1]

    # nothing unapproved delivered
    assert SECRET.encode() not in msgspec.json.encode(chunks)
    assert SECRET.encode() not in msgspec.json.encode(final.messages)

    # the store holds only approved runs of approved trees
    stored = {
        thread for thread in ["t", *(f"t/{'/'.join(p)}" for p in _threads(tree))]
        if store.last_messages(thread, 100)
    }
    allowed = {_thread_of(tree, n) for n in _finished_paths(final)}
    assert stored <= allowed
    if final.status != "finished":
        assert stored == set()

    # every approved nested call ran exactly once, none before its approval
    approved_calls = [p for r in results[:-1] if r.suspension for p in r.suspension.pending]
    assert sorted(tree.acted) == sorted(
        next(n for n in _names(p.path, tree)) for p in approved_calls)

    # every other interpreter gives the same statuses, tree, text, store and stream
    own, live = _by_node(chunks)
    for name, drive_it in (("asyncio", lambda t: _drive_async(t, "asyncio")),
                           ("trio", lambda t: _drive_async(t, "trio")),
                           ("durable", _drive_durable)):
        other = Tree(root)
        results2, chunks2, store2 = drive_it(other)
        assert [r.status for r in results2] == [r.status for r in results], name
        assert results2[-1].text == final.text, name
        assert results2[-1].children == final.children, name
        assert _stored(other, store2) == _stored(tree, store), name
        own2, live2 = _by_node(chunks2)
        assert msgspec.json.encode(own2) == msgspec.json.encode(own), name
        assert msgspec.json.encode(live2, order="sorted") == msgspec.json.encode(
            live, order="sorted"), name
        assert sorted(other.acted) == sorted(tree.acted), name


def _threads(tree: Tree) -> list[list[str]]:
    """Every child's chain of tool names from the root (its thread under "t")."""
    out: list[list[str]] = []
    for name in tree.agents:
        if name == "n":
            continue
        chain = [name]
        while tree.parent.get(chain[0], "n") != "n":
            chain.insert(0, tree.parent[chain[0]])
        out.append(chain)
    return out


def _thread_of(tree: Tree, name: str) -> str:
    if name == "n":
        return "t"
    chain = [name]
    while tree.parent.get(chain[0], "n") != "n":
        chain.insert(0, tree.parent[chain[0]])
    return "t/" + "/".join(chain)


def _names(path: tuple[str, ...], tree: Tree) -> list[str]:
    """The agent whose call waited at `path` (a path of call ids): read off the calls'
    order in each parent's script (the simulator numbers calls `call_<step>_<i>`)."""
    name = "n"
    for call_id in path:
        i = int(call_id.rsplit("_", 1)[1])
        name = f"{name}{i}"
    return [name]
