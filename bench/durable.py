"""The cost of durability: durable runs (DBOS on SQLite, and on PostgreSQL when given) next
to the plain async interpreter, on the same agent and scripted model (no network).

::

    python -m bench.durable                   # 3 rounds of 10 runs of 8 tool steps, SQLite
    python -m bench.durable --pg-url URL      # and PostgreSQL (or PIPELINE_TEST_PG_URL)
    python -m bench.durable --quick           # smoke test with tiny sizes (not for reporting)
    python -m bench.durable --timer cpu       # process CPU time instead of wall time
    python -m bench.durable --stat min        # the fastest run instead of the median

A run makes `steps` tool calls, one per model call, then answers: 2 * steps + 2 durable
steps (the agent's recorded definition, steps + 1 model calls, steps tool calls). Per
run: the median (or with `--stat min`, the fastest) time of one run, started and waited
for, over `--rounds` rounds of `--runs` runs: each round measures every configuration in
turn, so a load that drifts over the sitting reaches them alike. The overhead (durable -
plain) is split with a second size, runs of one tool step: per step = the growth of the
overhead per extra durable step, fixed per run = what is left (the workflow's own
records, the agent's definition, the stream, the result). In the same sitting and on the
same kind of database, a bare DBOS workflow of as many trivial `DBOS.run_step` steps
(returning a small int) gives DBOS's own cost, split the same way: what the library adds
is the ratio of its per-step overhead to DBOS's bare per-step cost. The library also
writes the chunks published since the last step to the run's stream before each step (a
second checkpointed write): a second bare row ("+ stream") writes 32 bytes to a stream
before each step, for the like-for-like ratio. Durable runs are measured with both
stream modes: "live" (the default: the chunks in a write of their own before the next
step) and "with_steps" (the chunks in the transaction of the next step's record).

Each row also counts, with a SQLAlchemy event listener on the system database's engine,
the statements a run sends and its commits that wrote (a transaction with an INSERT,
UPDATE or DELETE; the worker's heartbeat thread not counted), split per step and fixed
per run as the times are: counts do not move with the machine's load. The header states
the timer and the machine's load average (`os.getloadavg()`), at the start and the end.
Prints a table, then one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import sqlalchemy as sa
from dbos import DBOS, DBOSConfig, SetWorkflowID

from bench.summary import summary
from interpreters.aio import AsyncInterpreter
from interpreters.durable.dbos.internals import StepPosition, SystemStore
from interpreters.testing import Say, ScriptedModel, call
from pipeline.agent import Agent
from pipeline.tools import tool
from pipeline.values.model import ModelRequest


def lookup(i: int) -> int:
    """Look a number up."""
    return i * 2


def make_agent(steps: int) -> Agent:
    return Agent.create("bench/model", tools=[tool(lookup)], max_steps=steps + 2)


def make_model(steps: int) -> ScriptedModel:
    def script(request: ModelRequest) -> Say:
        done = sum(1 for m in request.messages if m.role == "tool")
        if done < steps:
            return Say(calls=[call("lookup", i=done)])
        return Say(["All ", "looked ", "up."])

    return ScriptedModel(script)


def timer(kind: str) -> Callable[[], float]:
    return time.process_time if kind == "cpu" else time.perf_counter


class Counts:
    """Statements sent and commits that wrote on an engine (a write in autocommit counts
    as one) by the runs: from the caller's thread and the workflows' (not DBOS's queue
    poller and notifier, nor the worker's heartbeat, which work on their own clocks)."""

    _WRITES = ("INSERT", "UPDATE", "DELETE")

    def __init__(self, engine: sa.Engine) -> None:
        self.statements = self.writes = 0
        self._engine = engine
        sa.event.listen(engine, "before_cursor_execute", self._statement)
        sa.event.listen(engine, "commit", self._commit)
        sa.event.listen(engine, "rollback", self._rollback)

    def close(self) -> None:
        sa.event.remove(self._engine, "before_cursor_execute", self._statement)
        sa.event.remove(self._engine, "commit", self._commit)
        sa.event.remove(self._engine, "rollback", self._rollback)

    def now(self) -> tuple[int, int]:
        return self.statements, self.writes

    def _statement(self, conn: sa.Connection, cursor: object, statement: str,
                   *args: object) -> None:
        if threading.current_thread() is not threading.main_thread() and \
                StepPosition().workflow_id is None:
            return
        text = statement.lstrip().upper()
        self.statements += 1
        if text.startswith(self._WRITES) or (text.startswith("WITH") and "UPDATE" in text):
            if conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
                self.writes += 1
            else:
                conn.info["bench_wrote"] = True

    def _commit(self, conn: sa.Connection) -> None:
        if conn.info.pop("bench_wrote", False):
            self.writes += 1

    def _rollback(self, conn: sa.Connection) -> None:
        conn.info.pop("bench_wrote", None)


Measured = tuple[list[float], list[tuple[int, int]]]
"""Per run: its time, and its (statements, commits that wrote)."""


def plain(steps: int, runs: int, clock: Callable[[], float]) -> list[float]:
    interp = AsyncInterpreter(make_model(steps), observers=())
    agent = make_agent(steps)
    times: list[float] = []

    async def main() -> None:
        for _ in range(runs):
            t = clock()
            result = await interp.run(agent, "look them up")
            times.append(clock() - t)
            assert result.status == "finished", result.error

    anyio.run(main)
    return times


def durable(
    steps: int, runs: int, url: str, clock: Callable[[], float], stream: str = "live"
) -> Measured:
    from interpreters.durable.dbos.runs import DurableRuns

    agent = make_agent(steps)
    times: list[float] = []
    counted: list[tuple[int, int]] = []
    mode: dict[str, Any] = {} if stream == "live" else {"stream": stream}  # (older: live)
    with DurableRuns({"bench": agent}, make_model(steps), database_url=url, observers=(),
                     **mode) as d:
        d.run("bench", "warm up", run_id=f"warm-{time.time_ns()}", wait=120)
        counts = Counts(d._system().engine)
        try:
            for i in range(runs):
                before = counts.now()
                t = clock()
                result = d.run("bench", "look them up", run_id=f"r{i}-{time.time_ns()}",
                               wait=120)
                times.append(clock() - t)
                counted.append(_minus(counts.now(), before))
                assert result.status == "finished", result.error
        finally:
            counts.close()
    return times, counted


def _minus(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] - b[0], a[1] - b[1]


def _small(i: int) -> int:
    return i


@DBOS.workflow(name="bench_bare_steps")
def bare_workflow(n: int, stream: bool) -> int:
    """`n` trivial checkpointed steps, as the library runs them (`DBOS.run_step`); with
    `stream`, each preceded by a small stream write, as the library writes the chunks
    published since the last step."""
    total = 0
    for i in range(n):
        if stream:
            DBOS.write_stream("chunks", b"x" * 32)
        total += DBOS.run_step({"name": "step"}, _small, i)
    if stream:
        DBOS.close_stream("chunks")
    return total


def bare(
    n: int, runs: int, url: str, clock: Callable[[], float], *, stream: bool = False
) -> Measured:
    """Bare DBOS: runs of one workflow of `n` steps, each started and waited for."""
    config: DBOSConfig = {"name": "bench-bare", "system_database_url": url,
                          "log_level": "WARNING"}
    DBOS(config=config)
    DBOS.launch()
    times: list[float] = []
    counted: list[tuple[int, int]] = []
    counts = Counts(SystemStore.of(DBOS).engine)
    try:
        for i in range(-1, runs):  # the first is a warm-up
            before = counts.now()
            t = clock()
            with SetWorkflowID(f"b{i}-{time.time_ns()}"):
                handle = DBOS.start_workflow(bare_workflow, n, stream)
            # Wait on its thread, as DurableRuns.run does (get_result writes a record too).
            future = getattr(handle, "future", None)
            assert isinstance(future, concurrent.futures.Future)
            assert future.result(120) == n * (n - 1) // 2
            if i >= 0:
                times.append(clock() - t)
                counted.append(_minus(counts.now(), before))
    finally:
        counts.close()
        DBOS.destroy(destroy_registry=False)
    return times, counted


def fresh_pg(base: str) -> str:
    """A new database on the server at `base`, so runs start from empty tables."""
    import sqlalchemy as sa

    name = f"pa_bench_{time.time_ns()}"
    url = sa.make_url(base).set(drivername="postgresql+psycopg")
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return sa.make_url(base).set(database=name).render_as_string(hide_password=False)


def _stat(values: Sequence[float], how: str) -> float:
    return min(values) if how == "min" else statistics.median(values)


def _split(big: float, small: float, steps: int) -> tuple[float, float]:
    """(per durable step, fixed per run) of a figure measured at `steps` tool steps
    (2 * steps + 2 durable steps) and at one (4): two durable steps per tool step."""
    per_step = (big - small) / (2 * (steps - 1))
    return per_step, small - 3 * per_step


def _counted(out: dict[str, object], big: Measured, small: Measured, steps: int) -> None:
    """The statement and write counts of a row: per run, per step and fixed."""
    for k, name in enumerate(("statements", "writes")):
        n = statistics.median(c[k] for c in big[1])
        one = statistics.median(c[k] for c in small[1])
        per_step, fixed = _split(n, one, steps)
        out[f"{name}_per_run"] = float(n)
        out[f"{name}_per_step"] = per_step
        out[f"{name}_fixed_per_run"] = fixed


def row(
    system: str,
    times: list[float],
    how: str,
    steps: int,
    base: tuple[float, float] | None = None,
    big: Measured | None = None,
    small: Measured | None = None,
) -> dict[str, object]:
    """`base`: the plain runs' figures at `steps` and at one step; `big`, `small`: this
    system's runs at `steps` and at one step."""
    out: dict[str, object] = {
        "system": system, "runs": len(times), "per_run_ms": _stat(times, how) * 1e3,
        "per_run_ms_median": statistics.median(times) * 1e3, "per_run_ms_min": min(times) * 1e3,
    }
    if base is not None and big is not None and small is not None:
        over_n = _stat(big[0], how) - base[0]
        over_1 = _stat(small[0], how) - base[1]
        per_step, fixed = _split(over_n, over_1, steps)
        out["overhead_per_run_ms"] = over_n * 1e3
        out["overhead_per_step_ms"] = per_step * 1e3
        out["overhead_fixed_per_run_ms"] = fixed * 1e3
        _counted(out, big, small, steps)
    return out


def _num(r: dict[str, object], key: str) -> float:
    v = r[key]
    assert isinstance(v, float), (key, v)
    return v


def bare_row(system: str, big: Measured, small: Measured, steps: int,
             how: str) -> dict[str, object]:
    """A bare DBOS row: `big` ran 2 * steps + 1 steps, `small` 3, as many as the agent's
    runs at `steps` and at one tool step without its definition (counted in the fixed part
    there, as the workflow's own records are here)."""
    per_step, fixed = _split(_stat(big[0], how), _stat(small[0], how), steps)
    out: dict[str, object] = {
        "system": system, "runs": len(big[0]), "per_run_ms": _stat(big[0], how) * 1e3,
        "per_run_ms_median": statistics.median(big[0]) * 1e3,
        "per_run_ms_min": min(big[0]) * 1e3,
        "per_step_ms": per_step * 1e3, "fixed_per_run_ms": fixed * 1e3,
    }
    _counted(out, big, small, steps)
    return out


COLUMNS = (("per run ms", 12), ("+ per run", 11), ("+ fixed", 9), ("+ per step", 11),
           ("x DBOS", 8), ("x +stream", 10), ("stmts/step", 11), ("writes/step", 12),
           ("stmts fixed", 12), ("writes fixed", 13))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.durable")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--timer", choices=("wall", "cpu"), default="wall")
    p.add_argument("--stat", choices=("median", "min"), default="median")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3,
                   help="times each configuration is measured, in turn, across the sitting")
    p.add_argument("--pg-url", default=os.environ.get("PIPELINE_TEST_PG_URL"))
    p.add_argument("--modes", default="live,with_steps",
                   help="the stream modes to measure, comma-separated")
    a = p.parse_args(argv)
    steps, runs = (2, 3) if a.quick else (max(2, a.steps), a.runs)
    clock = timer(a.timer)
    how = a.stat

    t0 = time.perf_counter()
    load_start = os.getloadavg()
    rounds = 1 if a.quick else max(1, a.rounds)
    stores: list[tuple[str, Callable[[str], str]]] = [("SQLite", lambda tmp: f"sqlite:///{tmp}")]
    if a.pg_url:
        pg_base = a.pg_url
        stores.append(("PostgreSQL", lambda _tmp: fresh_pg(pg_base)))
    modes = a.modes.split(",")
    # Every configuration once per round, in turn: a load that drifts over the sitting
    # reaches them alike (and the figures take the runs of all the rounds).
    got: dict[tuple[str, ...], Measured] = {}

    def add(key: tuple[str, ...], m: Measured) -> None:
        times, counted = got.setdefault(key, ([], []))
        times += m[0]
        counted += m[1]

    with tempfile.TemporaryDirectory() as tmp:
        for k in range(rounds):
            for n in (steps, 1):
                add(("plain", str(n)), (plain(n, runs, clock), []))
            for name, make_url in stores:
                for mode in modes:
                    for n in (steps, 1):
                        db = make_url(str(Path(tmp) / f"{k}-{mode}-{n}.sqlite"))
                        add((name, mode, str(n)), durable(n, runs, db, clock, mode))
                for stream in (False, True):
                    for n in (2 * steps + 1, 3):
                        db = make_url(str(Path(tmp) / f"{k}-b{n}{stream}.sqlite"))
                        add((name, f"bare{stream}", str(n)),
                            bare(n, runs, db, clock, stream=stream))
    base_times = got[("plain", str(steps))][0]
    base = (_stat(base_times, how), _stat(got[("plain", "1")][0], how))
    rows = [row("async (plain)", base_times, how, steps)]
    for name, _ in stores:
        libs = []
        for mode in modes:
            big, small = got[(name, mode, str(steps))], got[(name, mode, "1")]
            label = "" if mode == "live" else f" ({mode})"
            libs.append(row(f"durable{label}, {name}", big[0], how, steps, base, big, small))
        bare_rows = [
            bare_row(f"DBOS bare{label}, {name}", got[(name, f"bare{stream}", str(2 * steps + 1))],
                     got[(name, f"bare{stream}", "3")], steps, how)
            for label, stream in (("", False), (" + stream", True))
        ]
        for lib in libs:
            for key, dbos in (("dbos", bare_rows[0]), ("dbos_stream", bare_rows[1])):
                dbos_step = _num(dbos, "per_step_ms")
                lib[f"{key}_bare_per_step_ms"] = dbos_step
                lib[f"per_step_ratio_to_{key}"] = (
                    _num(lib, "overhead_per_step_ms") / dbos_step if dbos_step > 0 else None
                )
        rows += [*libs, *bare_rows]
    load_end = os.getloadavg()

    loads = " / ".join(" ".join(f"{x:.2f}" for x in ld) for ld in (load_start, load_end))
    print(f"{steps} tool steps per run ({2 * steps + 2} durable steps), {runs} runs x "
          f"{rounds} rounds, "
          f"timer: {a.timer} ({clock.__name__}), {how} of the runs; load average "
          f"(1, 5, 15 min) at start / end: {loads}")
    print("durable rows: overhead over the plain async interpreter; DBOS bare rows: a "
          f"workflow of {2 * steps + 1} trivial steps (3 for the split), + stream: each "
          "after a small stream write, as the library's; x DBOS, x +stream: the durable "
          "per-step overhead over those rows' per-step cost; stmts, writes: statements "
          "sent and commits that wrote, per step and fixed per run")
    print(f"{'system':<34}" + "".join(f"{h:>{w}}" for h, w in COLUMNS))
    for r in rows:
        cells = [r.get(k) for k in ("overhead_per_run_ms", "overhead_fixed_per_run_ms",
                                    "overhead_per_step_ms")]
        if "per_step_ms" in r:  # a bare row: its whole cost is DBOS's
            cells = [r["per_run_ms"], r["fixed_per_run_ms"], r["per_step_ms"]]
        cells += [r.get(k) for k in ("per_step_ratio_to_dbos", "per_step_ratio_to_dbos_stream",
                                     "statements_per_step", "writes_per_step",
                                     "statements_fixed_per_run", "writes_fixed_per_run")]
        shown = "".join(
            f"{'' if v is None else f'{v:.2f}':>{w}}"
            for v, (_, w) in zip(cells, COLUMNS[1:], strict=True)
        )
        print(f"{r['system']!s:<34}{r['per_run_ms']:>12.2f}{shown}")
    params = {"steps": steps, "runs": runs * rounds, "rounds": rounds, "timer": a.timer,
              "stat": how, "quick": a.quick}
    print(summary(params, clock.__name__, (load_start, load_end), t0, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
