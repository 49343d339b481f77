"""The store fails under a run: a checkpoint write refused after a tool ran (a real full
disk for SQLite, an injected lock timeout on PostgreSQL) is retried, and past the retry
deadline the run stops unrecorded and resumes at the next launch; the tool runs once."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from effects import RunTools
from interpreters.durable.dbos.runs import DurableRuns, StreamMode
from interpreters.durable.dbos.store import RunTakenOver, StoreRetry, StoreUnavailable, Takeover
from interpreters.observers.observe import RunInfo, RunObserver
from interpreters.testing import Say, ScriptedModel, call
from pipeline.agent import Agent
from pipeline.protocol import LoopCommand
from pipeline.tools import tool
from pipeline.values.chunks import ToolCall
from pipeline.values.model import ModelRequest
from tests.durable_harness import fill, pg_url, small_filesystem
from tests.helpers import make_agent

REFUNDS: list[str] = []
FAULT: list[str] = []  # what the tool breaks after it ran ("fill" the disk...)


def refund(order: str) -> str:
    """Refund an order."""
    REFUNDS.append(order)
    for fault in FAULT:
        _BREAK[fault]()
    return f"refunded {order}"


_BREAK: dict[str, Callable[[], None]] = {}


def refund_agent() -> Agent:
    return make_agent(tools=[tool(refund)])


ANSWER_FAULT: list[str] = []  # what the model's answer breaks after the tool's checkpoint


def refund_model() -> ScriptedModel:
    def turn(req: ModelRequest) -> Say:
        if len(req.messages) == 1:
            return Say(calls=[call("refund", order="A1")])
        for fault in ANSWER_FAULT:
            _BREAK[fault]()
        return Say("Refunded A1.")

    return ScriptedModel(turn)


class OnRetry(logging.Handler):
    """Calls `then` at the first 'checkpoint write failed' warning (the store is
    healthy again once the run has seen it fail)."""

    def __init__(self, then: Callable[[], None]) -> None:
        super().__init__(logging.WARNING)
        self.then = then
        self.seen = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "checkpoint write failed" in record.getMessage():
            self.seen += 1
            if self.seen == 1:
                self.then()


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    REFUNDS.clear()
    FAULT.clear()
    ANSWER_FAULT.clear()
    with small_filesystem(tmp_path / "disk") as d:
        _BREAK["fill"] = lambda: fill(d / "filler")
        yield d


def runs_on(url: str, retry: StoreRetry, stream: StreamMode = "live") -> DurableRuns:
    return DurableRuns({"refunds": refund_agent()}, refund_model(), database_url=url,
                       observers=(), store_retry=retry, takeover=None, stream=stream)


@contextlib.contextmanager
def watch(handler: logging.Handler) -> Iterator[None]:
    logger = logging.getLogger("interpreters.durable")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def test_a_full_disk_after_a_tool_ran_is_retried_and_the_run_finishes(disk: Path) -> None:
    url = f"sqlite:///{disk / 'runs.sqlite'}"
    freed = OnRetry(lambda: (disk / "filler").unlink())
    with runs_on(url, StoreRetry(initial=0.01, max_wait=0.1, deadline=60)) as runs:
        FAULT.append("fill")
        with watch(freed):
            result = runs.run("refunds", "refund A1", run_id="r1", wait=60)
        assert runs.status("r1") == "SUCCESS"
    assert freed.seen >= 1, "the disk never filled: the test tests nothing"
    assert result.status == "finished" and result.text == "Refunded A1."
    assert REFUNDS == ["A1"], "the refund ran again"


def test_a_store_down_past_the_deadline_stops_the_run_which_resumes_once_it_heals(
    disk: Path,
) -> None:
    url = f"sqlite:///{disk / 'runs.sqlite'}"
    with runs_on(url, StoreRetry(initial=0.01, max_wait=0.05, deadline=0.3)) as runs:
        ANSWER_FAULT.append("fill")  # after the refund's checkpoint: the answer's fails
        with pytest.raises(StoreUnavailable):
            runs.run("refunds", "refund A1", run_id="r2", wait=60)
        ANSWER_FAULT.clear()
        (disk / "filler").unlink()  # the store heals: the run resumes in this process
        result = runs.result("r2", timeout=60)
        assert runs.status("r2") == "SUCCESS"
    assert result.status == "finished" and result.text == "Refunded A1."
    assert REFUNDS == ["A1"], "the refund ran again"


def test_a_run_stopped_by_the_store_resumes_at_the_next_launch(disk: Path) -> None:
    url = f"sqlite:///{disk / 'runs.sqlite'}"
    retry = StoreRetry(initial=0.01, max_wait=0.05, deadline=0.3)
    with runs_on(url, retry) as runs:
        ANSWER_FAULT.append("fill")
        with pytest.raises(StoreUnavailable):
            runs.run("refunds", "refund A1", run_id="r3", wait=60)
        runs.shutdown()  # the process ends before the store heals
    ANSWER_FAULT.clear()
    (disk / "filler").unlink()
    with runs_on(url, StoreRetry()) as runs:  # relaunched: it resumes
        assert runs.status("r3") in ("PENDING", "ENQUEUED", "SUCCESS")
        result = runs.result("r3", timeout=60)
    assert result.status == "finished" and result.text == "Refunded A1."
    assert REFUNDS == ["A1"], "the refund ran again"


@pytest.mark.parametrize("stream", ["live", "with_steps"])
def test_an_injected_lock_timeout_on_postgresql_is_retried_and_the_tool_runs_once(
    stream: StreamMode,
) -> None:
    import sqlalchemy as sa
    from dbos import DBOS

    from interpreters.durable.dbos.internals import SystemStore

    REFUNDS.clear()
    FAULT.clear()
    ANSWER_FAULT.clear()
    url = pg_url()  # skips (fails under CI) without a server
    with runs_on(url, StoreRetry(initial=0.01, max_wait=0.1, deadline=60), stream) as runs:
        store = SystemStore.of(DBOS)
        schema = store.schema
        engine = store.engine
        # While public.fault holds a row, recording a tool's outcome fails as a lock
        # timeout does (SQLSTATE 55P03, which the driver does not retry).
        with engine.begin() as c:
            c.execute(sa.text("CREATE TABLE public.fault (armed int)"))
            c.execute(sa.text(
                "CREATE FUNCTION public.refuse() RETURNS trigger AS $$ BEGIN "
                "IF NEW.function_name LIKE 'tool:%' AND EXISTS (SELECT 1 FROM public.fault) "
                "THEN RAISE EXCEPTION 'lock timeout (injected)' "
                "USING ERRCODE = 'lock_not_available'; END IF; RETURN NEW; END $$ "
                "LANGUAGE plpgsql"))
            c.execute(sa.text(
                f'CREATE TRIGGER refuse BEFORE INSERT ON "{schema}".operation_outputs '
                "FOR EACH ROW EXECUTE FUNCTION public.refuse()"))

        def arm() -> None:
            with engine.begin() as c:
                c.execute(sa.text("INSERT INTO public.fault VALUES (1)"))

        def disarm() -> None:
            with engine.begin() as c:
                c.execute(sa.text("DELETE FROM public.fault"))

        _BREAK["arm"] = arm
        FAULT.append("arm")
        healed = OnRetry(disarm)
        with watch(healed):
            result = runs.run("refunds", "refund A1", run_id="p1", wait=60)
        assert runs.status("p1") == "SUCCESS"
        chunks = list(runs.chunks("p1", timeout=60))
    assert healed.seen >= 1, "no write failed: the test tests nothing"
    # (with_steps, the call's chunk is written with the failed record: once, on the retry)
    assert [c.tool_name for c in chunks if isinstance(c, ToolCall)] == ["refund"]
    assert result.status == "finished" and result.text == "Refunded A1."
    assert REFUNDS == ["A1"], "the refund ran again"


def test_store_and_takeover_settings_not_understood_are_refused() -> None:
    with pytest.raises(TypeError, match="store_retry"):
        DurableRuns({}, refund_model(), store_retry=30)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takeover"):
        DurableRuns({}, refund_model(), takeover=60)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_wait"):
        StoreRetry(initial=2.0, max_wait=1.0)
    with pytest.raises(ValueError, match="interval"):
        Takeover(after=10, interval=10)
    with pytest.raises(ValueError, match="after"):
        Takeover(after=0)


class TakenOverBeforeTools(RunObserver):
    """When the loop asks for its tools, another worker claims the run (as a takeover
    does while this worker is stalled between steps)."""

    sees_stream = False

    def __init__(self, url: str) -> None:
        self.url = url

    def start(self, run: RunInfo) -> RunObserver:
        return self

    def command(self, cmd: LoopCommand, at: float) -> None:
        if isinstance(cmd, RunTools):
            import sqlalchemy as sa

            engine = sa.create_engine(self.url)
            with engine.begin() as c:
                c.execute(sa.text(
                    "UPDATE workflow_status SET owner_xid = 'another-worker' "
                    "WHERE workflow_uuid = 'z1'"))
            engine.dispose()


@pytest.mark.parametrize("stream", ["live", "with_steps"])
def test_a_worker_that_lost_its_run_does_not_start_its_tool(
    tmp_path: Path, stream: StreamMode
) -> None:
    # Live, the chunks written before the tool's step carry DBOS's ownership check;
    # with_steps, the step reads it before its body: the worker stops there
    # (RunTakenOver), before the tool.
    REFUNDS.clear()
    FAULT.clear()
    ANSWER_FAULT.clear()
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    with DurableRuns({"refunds": refund_agent()}, refund_model(), database_url=url,
                     observers=(TakenOverBeforeTools(url),), takeover=None,
                     stream=stream) as runs:
        with pytest.raises(RunTakenOver):
            runs.run("refunds", "refund A1", run_id="z1", wait=60)
        assert runs.status("z1") == "PENDING"  # the other worker's to finish
    assert REFUNDS == [], "the refund ran on a worker that no longer owned the run"


@pytest.mark.parametrize("stream", ["live", "with_steps"])
def test_a_worker_that_lost_its_run_between_two_steps_runs_no_further_step_body(
    tmp_path: Path, stream: StreamMode
) -> None:
    # Two calls in one step: the second tool's step writes no chunks before it (the
    # results are published after both), so only a check before its body can stop it.
    # The first tool's checkpoint, written while this worker still owned the run, hands
    # the run to another worker as it lands (a trigger), as a takeover does while this
    # worker is stalled between the two steps.
    REFUNDS.clear()
    FAULT.clear()
    ANSWER_FAULT.clear()
    import sqlalchemy as sa

    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    model = ScriptedModel([Say(calls=[call("refund", order="A1"), call("refund", order="B2")]),
                           Say("Refunded both.")])
    with DurableRuns({"refunds": refund_agent()}, model, database_url=url, observers=(),
                     takeover=None, stream=stream) as runs:
        engine = sa.create_engine(url)
        with engine.begin() as c:
            c.execute(sa.text(
                "CREATE TRIGGER taken_over AFTER INSERT ON operation_outputs "
                "WHEN NEW.function_name = 'tool:refund' BEGIN "
                "UPDATE workflow_status SET owner_xid = 'another-worker' "
                "WHERE workflow_uuid = NEW.workflow_uuid; END"))
        engine.dispose()
        with pytest.raises(RunTakenOver):
            runs.run("refunds", "refund A1 and B2", run_id="z2", wait=60)
        assert runs.status("z2") == "PENDING"  # the other worker's to finish
    assert REFUNDS == ["A1"], "a step ran on a worker that no longer owned the run"


def test_a_step_right_after_a_stream_write_does_not_read_its_ownership_again(
    tmp_path: Path,
) -> None:
    # The stream write before a step checked the ownership in its own transaction
    # (once a step's body ran here, no write is a replayed one): only the first step,
    # and a step no chunks precede, read it.
    REFUNDS.clear()
    FAULT.clear()
    ANSWER_FAULT.clear()
    from sqlalchemy import event

    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    model = ScriptedModel([Say(calls=[call("refund", order="A1"), call("refund", order="B2")]),
                           Say("Refunded both.")])
    reads: list[str] = []

    def seen(conn: object, cursor: object, statement: str, *rest: object) -> None:
        if statement.lstrip().startswith("SELECT") and "owner_xid" in statement:
            reads.append(statement)

    with DurableRuns({"refunds": refund_agent()}, model, database_url=url, observers=(),
                     takeover=None) as runs:
        engine = runs._system().engine
        event.listen(engine, "before_cursor_execute", seen)
        try:
            assert runs.run("refunds", "refund A1 and B2", run_id="o1",
                            wait=60).status == "finished"
        finally:
            event.remove(engine, "before_cursor_execute", seen)
    assert REFUNDS == ["A1", "B2"]
    # model (first), tool A1 (after the model's chunks), tool B2 (no chunks before it),
    # model (after the results): the first and B2 read it
    assert len(reads) == 2


def test_a_store_fault_writing_a_runs_outcome_hands_the_run_back_and_it_finishes() -> None:
    # The run's final outcome is written by DBOS after the run's last step, outside the
    # retried checkpoints: a fault there must not strand the run on this live worker.
    import sqlalchemy as sa
    from dbos import DBOS

    from interpreters.durable.dbos.internals import SystemStore

    REFUNDS.clear()
    FAULT.clear()
    ANSWER_FAULT.clear()
    url = pg_url()  # skips (fails under CI) without a server
    with runs_on(url, StoreRetry(initial=0.01, max_wait=0.1, deadline=60)) as runs:
        store = SystemStore.of(DBOS)
        engine = store.engine
        # While public.outcome_fault holds a row, recording a run's outcome fails as a
        # lock timeout does (SQLSTATE 55P03, which neither the driver nor DBOS retries).
        with engine.begin() as c:
            c.execute(sa.text("CREATE TABLE public.outcome_fault (armed int)"))
            c.execute(sa.text(
                "CREATE FUNCTION public.refuse_outcome() RETURNS trigger AS $$ BEGIN "
                "IF NEW.status IN ('SUCCESS', 'ERROR') AND OLD.status = 'PENDING' "
                "AND EXISTS (SELECT 1 FROM public.outcome_fault) "
                "THEN RAISE EXCEPTION 'lock timeout (injected)' "
                "USING ERRCODE = 'lock_not_available'; END IF; RETURN NEW; END $$ "
                "LANGUAGE plpgsql"))
            c.execute(sa.text(
                f'CREATE TRIGGER refuse_outcome BEFORE UPDATE ON "{store.schema}".'
                "workflow_status FOR EACH ROW EXECUTE FUNCTION public.refuse_outcome()"))

        def arm() -> None:
            with engine.begin() as c:
                c.execute(sa.text("INSERT INTO public.outcome_fault VALUES (1)"))

        _BREAK["arm-outcome"] = arm
        FAULT.append("arm-outcome")
        with pytest.raises(sa.exc.OperationalError, match="injected"):
            runs.run("refunds", "refund A1", run_id="o1", wait=60)
        FAULT.clear()
        assert runs.status("o1") == "PENDING"
        with engine.begin() as c:  # the store heals
            c.execute(sa.text("DELETE FROM public.outcome_fault"))
        result = runs.result("o1", timeout=60)
        assert runs.status("o1") == "SUCCESS"
    assert result.status == "finished" and result.text == "Refunded A1."
    assert REFUNDS == ["A1"], "the refund ran again"
