"""Replay recorded durable runs on the agents as they are now, without running anything:
a check for CI that a deploy will not break the runs under way (as Temporal's `Replayer`
replays workflow histories against new workflow code).

    problems = replay_runs("postgresql://...", {"support": agent})
    assert not problems, "\\n".join(map(str, problems))

Each run's loop is driven again from its recorded steps only: every step the loop asks
for must be the next recorded one (same kind, same tool, one the agent still has), and a
run that ended must end with the same steps and outcome. The recorded agent definition is
compared too (the check behind `AgentChangedError`); `migrations` accepts old ones as
`DurableRuns` does. No model, tool or handler is called, and the store is only read.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

import msgspec
from dbos import DBOSClient

from interpreters.durable import fingerprint as fp
from interpreters.durable.dbos import approval as da
from interpreters.durable.dbos.runs import WORKFLOW, RunStart, StepAnswer, StepFailed, deps_type
from interpreters.durable.loop import ModelOutcome, RecordedClock, ToolDone, drive_resumed
from interpreters.durable.payload import expand, recorder
from interpreters.providers.provider import ProviderError
from interpreters.run.common import start_run
from pipeline.agent import Agent
from pipeline.approval import Decision, Resumption
from pipeline.processor import AskModel
from pipeline.protocol import Driver, ToolInvocation
from pipeline.values.chunks import Chunk
from pipeline.values.model import ModelRequest
from pipeline.values.result import RunResult, Suspension

_START = msgspec.json.Decoder(RunStart)
_MODEL = msgspec.json.Decoder(ModelOutcome)
_TOOL = msgspec.json.Decoder(ToolDone)
_ANSWER = msgspec.json.Decoder(StepAnswer)

MAX_RUNS = 10_000
"""Runs one call replays at most (the newest first); pass `run_ids` for others."""


class ReplayProblem(msgspec.Struct, frozen=True):
    """Why one recorded run would not replay on the current agent."""

    run_id: str
    agent: str
    problem: str

    def __str__(self) -> str:
        return f"run {self.run_id!r} (agent {self.agent!r}): {self.problem}"


# BaseExceptions: the driver throws an Exception from a step into the loop (a failed
# tool call), and these must end the replay instead.
class _Diverged(BaseException):
    """The loop asked for another step than the recorded one."""


class _OutOfSteps(BaseException):
    """The recorded steps ended (a run under way): the replay stops there."""


class _RecordedSteps(RecordedClock):
    """`durable_loop.Steps` that hand back recorded outcomes and run nothing."""

    def __init__(self, steps: Sequence[tuple[str, object]], started_at: float,
                 timeout: float | None, agent: Agent) -> None:
        super().__init__(started_at, timeout)
        self._steps = [s for s in steps if s[0] not in _BOOKKEEPING]
        self._pos = 0
        self._agent = agent

    def _next(self, name: str) -> object:
        if self._pos >= len(self._steps):
            raise _OutOfSteps
        got, output = self._steps[self._pos]
        if got != name:
            raise _Diverged(
                f"step {self._pos + 1} was recorded as {got!r}; the agent now asks for {name!r}"
            )
        self._pos += 1
        return output

    def _timed(self, name: str) -> bytes:
        out = self._next(name)
        if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], bytes)):
            raise _Diverged(f"step {name!r} has an output this version cannot read")
        self._now = float(out[0])
        return out[1]

    @property
    def left(self) -> int:
        """The position (from 1) of the first recorded step not replayed, 0 if none."""
        return self._pos + 1 if self._pos < len(self._steps) else 0

    def publish(self, chunks: tuple[Chunk, ...]) -> None:
        pass

    def model(self, request: ModelRequest) -> ModelOutcome:
        return _MODEL.decode(self._timed("model"))

    def tool(self, inv: ToolInvocation) -> ToolDone:
        done = _TOOL.decode(self._timed(f"tool:{inv.call.tool_name}"))
        if inv.tool is None and not done.outcome.is_error:
            raise _Diverged(f"the run called tool {inv.call.tool_name!r}, "
                            "which the agent no longer has")
        return done

    def perform(self, request: object) -> object:
        if isinstance(request, AskModel):
            got = _ANSWER.decode(self._timed("ask-model"))
            if got.error is not None:
                raise ProviderError(got.error)
            if got.failure is not None:
                raise StepFailed(got.failure)
            return got.answer
        out = self._next(f"perform:{type(request).__name__}")
        if not (isinstance(out, tuple) and len(out) == 2):
            raise _Diverged("a handler's step has an output this version cannot read")
        self._now = float(out[1])
        return out[0]

    def approval(self, s: Suspension) -> tuple[Decision, ...]:
        # as `_DbosSteps.approval` records it: the deadline, publish, looks (each a
        # wait, its timeout a sleep, and what the look found), publish, the time
        self._next("approval-deadline")
        self._next("DBOS.setEvent")
        decisions: tuple[Decision, ...] | None = None
        for _ in range(da.MAX_LOOKS):
            message = self._next("DBOS.recv")
            self._next("DBOS.sleep")
            try:
                settled = da.read_settled(self._next("approval-settle"))
            except (TypeError, msgspec.DecodeError) as e:
                raise _Diverged(f"an approval's look cannot be read: {e}") from e
            decisions = da.look(s, message, settled, self._agent)
            if decisions is not None:
                break
        if decisions is None:
            decisions = da.deny_all(s, f"no decision taken in {da.MAX_LOOKS} looks: the "
                                       "call was not run")
        self._next("DBOS.setEvent")
        at = self._next("approval-time")
        if not isinstance(at, int | float):
            raise _Diverged("an approval's time has an output this version cannot read")
        self._now = max(self._now, float(at))
        return decisions

    def sleep(self, seconds: float) -> None:
        self._next("DBOS.sleep")
        if self._deadline is not None:
            seconds = max(0.0, min(seconds, self._deadline - self._now))
        self._now += seconds


_BOOKKEEPING = frozenset({"DBOS.writeStream", "DBOS.closeStream"})
_ENDED_FOR_GOOD = frozenset({"ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"})
"""Runs no worker resumes: nothing to check."""


def replay_runs(
    database_url: str,
    agents: Mapping[str, Agent],
    *,
    run_ids: Sequence[str] | None = None,
    migrations: Mapping[str, Collection[str]] | None = None,
    deps: Callable[[str], object] | None = None,
) -> tuple[ReplayProblem, ...]:
    """The recorded runs (all, up to `MAX_RUNS`, or `run_ids`) that would not replay on
    `agents`; empty when every one does. `deps` builds live deps as a worker would."""
    client = DBOSClient(system_database_url=database_url)
    try:
        found = client.list_workflows(
            workflow_ids=list(run_ids) if run_ids is not None else None,
            name=WORKFLOW, limit=None if run_ids is not None else MAX_RUNS,
            sort_desc=True,
        )
        problems: list[ReplayProblem] = []
        for wf in found:
            if wf.status in _ENDED_FOR_GOOD:
                continue
            steps = [(s["function_name"], s["output"])
                     for s in client.list_workflow_steps(wf.workflow_id)]
            inputs: object = wf.input
            args = inputs.get("args", ()) if isinstance(inputs, dict) else ()
            problem = _replay_one(wf.workflow_id, tuple(args), steps, wf.status, wf.output,
                                  agents, migrations or {}, deps)
            if problem is not None:
                problems.append(problem)
        return tuple(problems)
    finally:
        client.destroy()


def _replay_one(
    run_id: str,
    args: tuple[object, ...],
    steps: list[tuple[str, object]],
    status: str,
    output: object,
    agents: Mapping[str, Agent],
    migrations: Mapping[str, Collection[str]],
    deps: Callable[[str], object] | None,
) -> ReplayProblem | None:
    if len(args) != 2 or not isinstance(args[0], str) or not isinstance(args[1], bytes):
        return ReplayProblem(run_id, "?", "its input is not a pipeline-agents run's")
    name, payload = args[0], args[1]
    agent = agents.get(name)
    if agent is None:
        return ReplayProblem(run_id, name, "no agent of that name here")
    current = fp.definition(agent)
    start = _START.decode(payload)
    if start.definition is not None:  # stored with the inputs: no step of its own
        recorded = fp.DEFINITION.decode(start.definition)
        loop_steps = steps
    elif steps and steps[0][0] == "agent" and isinstance(steps[0][1], bytes):
        recorded = fp.DEFINITION.decode(steps[0][1])
        loop_steps = steps[1:]
    else:
        return ReplayProblem(run_id, name, "no recorded agent definition")
    if recorded != current and fp.digest(recorded) not in migrations.get(name, ()):
        changed = "; ".join(fp.changes(recorded, current))
        return ReplayProblem(run_id, name, f"agent changed ({fp.digest(recorded)}): {changed}")
    if start.deps is not None:
        run_deps: object = msgspec.json.decode(start.deps, type=deps_type(agent))
    else:
        run_deps = deps(name) if deps is not None else None
    replay = _RecordedSteps(loop_steps, start.started_at, start.timeout, agent)
    messages = start.messages if isinstance(start.messages, str) else list(start.messages)

    def begin(resume: Resumption | None) -> Driver:
        return start_run(
            agent, () if resume is not None else messages, run_id=run_id, clock=replay.now,
            options={"thread_id": start.thread_id, "resource_id": start.resource_id,
                     "values": start.values, "deps": run_deps, "resume": resume},
        )

    try:
        result = drive_resumed(begin, replay)
    except _OutOfSteps:
        if status == "SUCCESS":
            return ReplayProblem(run_id, name, "the run now asks for more steps than it ran")
        return None  # a run under way: what it recorded replays
    except _Diverged as e:
        return ReplayProblem(run_id, name, str(e))
    if replay.left:
        return ReplayProblem(
            run_id, name, f"the run now ends before recorded step {replay.left}"
        )
    if (status == "SUCCESS" and isinstance(output, bytes)
            and _outcome(expand(output, recorder(lambda: steps))) != _outcome(result)):
        return ReplayProblem(run_id, name, "the replay ends with another result")
    return None


def _outcome(r: RunResult) -> tuple[object, ...]:
    """What a replay must reproduce: the steps and how the run ended (the messages carry
    the instructions, which a migration may change)."""
    return (r.status, r.text, r.steps, r.output, r.error, r.finish_reason)
