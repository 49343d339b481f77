"""Started requests (`effects.started`): a hook starts I/O, goes on, and collects it later.

A user processor starts a lookup of its own (a request with a handler) on each text delta
and collects the answers at the response's end; every interpreter answers the three
requests: the sync one in worker threads, the simulators on virtual time (jobs overlap),
the async one in its run's task group, the durable loop in order, and a journal's replay
from what was recorded. A failure is raised at the job's collect; a collect of a job that
does not exist fails the hook (closed)."""

from __future__ import annotations

import threading
from collections.abc import Generator

import anyio
import msgspec
import pytest

from effects import Continue, Job, Out, Replace, Request, collect, ready, start
from interpreters.core.handlers import Handlers
from interpreters.durable.loop import drive
from interpreters.record.journal import Recorder
from interpreters.record.replay import replay_sync
from interpreters.run.common import start_run
from interpreters.sync import SyncInterpreter
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator, VirtualClock
from pipeline import Agent
from pipeline.processor import (
    StatefulProcessor,
    StreamArgs,
    StreamResult,
)
from pipeline.values.chunks import Chunk, TextDelta, TextEnd
from properties.test_equivalence import _InProcessSteps

WORDS = ["alpha ", "beta ", "gamma ", "delta"]


class Lookup(Request[str], frozen=True):
    """Look a word up (answered by the `lookup` handler)."""

    word: str


def lookup(request: Lookup) -> str:
    if request.word.strip() == "boom":
        raise RuntimeError("lookup down")
    return request.word.upper()


class Looked(msgspec.Struct, frozen=True):
    jobs: tuple[Job[str], ...] = ()
    ready_at_once: int = 0


class LookupAll(StatefulProcessor[Looked]):
    """Holds every text delta, starts a lookup for it, releases the answers at the end
    of the text block (before its TextEnd)."""

    id = "lookup-all"
    starts_requests = True

    def initial_state(self) -> Looked:
        return Looked()

    def process_output_stream(
        self, args: StreamArgs[Looked]
    ) -> Generator[object, object, StreamResult[Looked]]:
        part, st = args.part, args.state
        if isinstance(part, TextDelta):
            job = yield from start(Lookup(part.text))
            now = yield from ready(job)
            return Out(Replace(()), Looked((*st.jobs, job), st.ready_at_once + now))
        if not isinstance(part, TextEnd):
            return Continue()
        out: list[Chunk] = []
        for job in st.jobs:
            try:
                out.append(TextDelta(part.id, (yield from collect(job))))
            except RuntimeError as e:
                out.append(TextDelta(part.id, f"[{e}]"))
        return Out(Replace((*out, part)), Looked())


def agent() -> Agent:
    return Agent.create("m", output_processors=[LookupAll()])


EXPECTED = "ALPHA BETA GAMMA DELTA"


def test_a_user_processor_starts_and_collects_on_the_simulator() -> None:
    sim = Simulator(ScriptedModel([Say(WORDS)]), handlers=Handlers().add(Lookup, lookup))
    run = sim.run(agent(), "hi")
    assert run.result.text == EXPECTED


def test_a_failure_is_raised_at_its_collect_and_the_rest_goes_on() -> None:
    model = ScriptedModel([Say(["alpha ", "boom", " beta"])])
    run = Simulator(model, handlers=Handlers().add(Lookup, lookup)).run(agent(), "hi")
    assert run.result.text == "ALPHA [lookup down] BETA"


def test_the_sync_interpreter_runs_started_jobs_in_worker_threads() -> None:
    threads: list[str] = []

    def where(request: Lookup) -> str:
        threads.append(threading.current_thread().name)
        return lookup(request)

    interp = SyncInterpreter(ScriptedModel([Say(WORDS)]), handlers=Handlers().add(Lookup, where),
                             observers=())
    assert interp.run(agent(), "hi").text == EXPECTED
    assert len(threads) == len(WORDS)
    assert all(name.startswith("started-job") for name in threads)


@pytest.mark.anyio
async def test_the_async_interpreter_runs_them_in_the_runs_task_group() -> None:
    async def later(request: Lookup) -> str:
        await anyio.sleep(0)
        return lookup(request)

    sim = AsyncSimulator(ScriptedModel([Say(WORDS)]), handlers=Handlers().add(Lookup, later))
    assert (await sim.run(agent(), "hi")).result.text == EXPECTED
    sim = AsyncSimulator(ScriptedModel([Say(WORDS)]), handlers=Handlers().add(Lookup, later))
    chunks: list[Chunk] = []
    async with sim.stream(agent(), "hi") as s:
        async for c in s:
            chunks.append(c)
    assert s.result.text == EXPECTED
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == EXPECTED


@pytest.mark.anyio
async def test_a_stream_iterated_without_async_with_answers_them_in_order() -> None:
    sim = AsyncSimulator(ScriptedModel([Say(WORDS)]), handlers=Handlers().add(Lookup, lookup))
    got = [c async for c in sim.stream(agent(), "hi")]
    assert "".join(c.text for c in got if isinstance(c, TextDelta)) == EXPECTED


class Slow(Request[float], frozen=True):
    """A request whose handler takes `seconds` of virtual time."""

    seconds: float


class TwoAtOnce(StatefulProcessor[None]):
    """At the first text delta, starts two slow requests and collects both."""

    id = "two-at-once"

    def initial_state(self) -> None:
        return None

    def process_output_stream(
        self, args: StreamArgs[None]
    ) -> Generator[object, object, StreamResult[None]]:
        if not isinstance(args.part, TextDelta):
            return Continue()
        first = yield from start(Slow(3.0))
        second = yield from start(Slow(2.0))
        assert not (yield from ready(first))
        done = (yield from collect(first)) + (yield from collect(second))
        return Replace(TextDelta(args.part.id, f"{args.part.text} {done:g}"))


def test_on_the_simulator_started_jobs_overlap_in_virtual_time() -> None:
    model = ScriptedModel([Say(["x"])])
    clock = model.clock

    def slow(request: Slow) -> float:
        clock.sleep(request.seconds)
        return request.seconds

    sim = Simulator(model, handlers=Handlers().add(Slow, slow), start=0.0)
    run = sim.run(Agent.create("m", output_processors=[TwoAtOnce()]), "hi")
    assert run.result.text == "x 5"
    assert run.clock == 3.0  # both waited at once: the longer one, not the sum


def test_the_durable_loop_answers_them_in_order() -> None:
    clock = VirtualClock(0.0)
    model = ScriptedModel([Say(WORDS)], clock=clock)

    class Steps(_InProcessSteps):
        def perform(self, request: object) -> object:
            assert isinstance(request, Lookup)  # the started request itself: one step
            return lookup(request)

    driver = start_run(agent(), "hi", run_id="run1", clock=clock, options={})
    assert drive(driver, Steps(clock, lambda _: model)).text == EXPECTED


def test_a_replay_gives_the_recorded_run_again() -> None:
    recorder = Recorder()
    interp = SyncInterpreter(ScriptedModel([Say(WORDS)]), handlers=Handlers().add(Lookup, lookup),
                             observers=[recorder], run_ids=lambda: "run1")
    recorded = interp.run(agent(), "hi")
    replayed = replay_sync(recorder.journal("run1"), agent())
    assert replayed.identical, replayed.divergence
    assert replayed.result.text == recorded.text == EXPECTED


class Forged(StatefulProcessor[None]):
    id = "forged"

    def initial_state(self) -> None:
        return None

    def process_output_stream(
        self, args: StreamArgs[None]
    ) -> Generator[object, object, StreamResult[None]]:
        yield from collect(Job(7, Lookup("never started")))
        return Continue()


def test_collecting_a_job_never_started_fails_the_run_closed() -> None:
    run = Simulator(ScriptedModel([Say(WORDS)]), handlers=Handlers().add(Lookup, lookup)).run(
        Agent.create("m", output_processors=[Forged()]), "hi"
    )
    assert run.result.status == "failed"
    assert "no started job with ticket 7" in str(run.result.error)
    assert run.result.text == ""


def test_a_sync_run_past_its_timeout_stops_waiting_for_a_started_job() -> None:
    release = threading.Event()

    def stuck(request: Lookup) -> str:
        release.wait(10.0)  # (the test lets it go at the end)
        return lookup(request)

    interp = SyncInterpreter(ScriptedModel([Say(WORDS)]), handlers=Handlers().add(Lookup, stuck),
                             observers=())
    try:
        with interp.stream(agent(), "hi", timeout=0.2) as s:
            got = list(s)
    finally:
        release.set()
    assert s.result.status == "cancelled"
    assert not [c for c in got if isinstance(c, TextDelta)]  # nothing it held came out
