"""The cost of durability: durable runs (DBOS on SQLite, and on PostgreSQL when given) next
to the plain async interpreter, on the same agent and scripted model (no network).

::

    python -m bench.durable                   # 30 runs of 8 tool steps, SQLite
    python -m bench.durable --pg-url URL      # and PostgreSQL (or PIPELINE_TEST_PG_URL)
    python -m bench.durable --quick           # smoke test with tiny sizes (not for reporting)
    python -m bench.durable --timer cpu       # process CPU time instead of wall time

A run makes `steps` tool calls, one per model call, then answers: 2 * steps + 2 durable
steps (the agent's recorded definition, steps + 1 model calls, steps tool calls). Per
run: the median time of one run, started and waited for. The overhead (durable - plain)
is split with a second size, runs of one tool step: per step = the growth of the
overhead per extra durable step, fixed per run = what is left (the workflow's own
records, the agent's definition, the stream, the result). In the same sitting and on the
same kind of database, a bare DBOS workflow of as many trivial `DBOS.run_step` steps
(returning a small int) gives DBOS's own cost, split the same way: what the library adds
is the ratio of its per-step overhead to DBOS's bare per-step cost. The library also
writes the chunks published since the last step to the run's stream before each step (a
second checkpointed write): a second bare row ("+ stream") writes 32 bytes to a stream
before each step, for the like-for-like ratio. The header states the
timer and the machine's load average (`os.getloadavg()`), at the start and the end.
Prints a table, then one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio
from dbos import DBOS, DBOSConfig, SetWorkflowID

from bench.summary import summary
from interpreters.aio import AsyncInterpreter
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
    steps: int, runs: int, url: str, clock: Callable[[], float]
) -> list[float]:
    from interpreters.durable.dbos.runs import DurableRuns

    agent = make_agent(steps)
    times: list[float] = []
    with DurableRuns({"bench": agent}, make_model(steps), database_url=url, observers=()) as d:
        d.run("bench", "warm up", run_id=f"warm-{time.time_ns()}", wait=120)
        for i in range(runs):
            t = clock()
            result = d.run("bench", "look them up", run_id=f"r{i}-{time.time_ns()}", wait=120)
            times.append(clock() - t)
            assert result.status == "finished", result.error
    return times


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
) -> list[float]:
    """Bare DBOS: runs of one workflow of `n` steps, each started and waited for."""
    config: DBOSConfig = {"name": "bench-bare", "system_database_url": url,
                          "log_level": "WARNING"}
    DBOS(config=config)
    DBOS.launch()
    times: list[float] = []
    try:
        for i in range(-1, runs):  # the first is a warm-up
            t = clock()
            with SetWorkflowID(f"b{i}-{time.time_ns()}"):
                handle = DBOS.start_workflow(bare_workflow, n, stream)
            # Wait on its thread, as DurableRuns.run does (get_result writes a record too).
            future = getattr(handle, "future", None)
            assert isinstance(future, concurrent.futures.Future)
            assert future.result(120) == n * (n - 1) // 2
            if i >= 0:
                times.append(clock() - t)
    finally:
        DBOS.destroy(destroy_registry=False)
    return times


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


def row(
    system: str,
    times: list[float],
    steps: int,
    base: tuple[float, float] | None = None,
    small: list[float] | None = None,
) -> dict[str, object]:
    """`base`: the plain runs' medians at `steps` and at one step; `small`: this system's
    times at one step."""
    med = statistics.median(times)
    out: dict[str, object] = {"system": system, "runs": len(times), "per_run_ms": med * 1e3}
    if base is not None and small is not None:
        over_n = med - base[0]
        over_1 = statistics.median(small) - base[1]
        per_step = (over_n - over_1) / (2 * (steps - 1))  # 2 durable steps per tool step
        out["overhead_per_run_ms"] = over_n * 1e3
        out["overhead_per_step_ms"] = per_step * 1e3
        out["overhead_fixed_per_run_ms"] = (over_1 - 3 * per_step) * 1e3
    return out


def _num(r: dict[str, object], key: str) -> float:
    v = r[key]
    assert isinstance(v, float), (key, v)
    return v


def bare_row(system: str, big: list[float], small: list[float], steps: int) -> dict[str, object]:
    """A bare DBOS row: `big` ran 2 * steps + 1 steps, `small` 3, as many as the agent's
    runs at `steps` and at one tool step without its definition (counted in the fixed part
    there, as the workflow's own records are here)."""
    med, med_1 = statistics.median(big), statistics.median(small)
    per_step = (med - med_1) / (2 * (steps - 1))
    return {
        "system": system, "runs": len(big), "per_run_ms": med * 1e3,
        "per_step_ms": per_step * 1e3, "fixed_per_run_ms": (med_1 - 3 * per_step) * 1e3,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.durable")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--timer", choices=("wall", "cpu"), default="wall")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--pg-url", default=os.environ.get("PIPELINE_TEST_PG_URL"))
    a = p.parse_args(argv)
    steps, runs = (2, 3) if a.quick else (max(2, a.steps), a.runs)
    clock = timer(a.timer)

    t0 = time.perf_counter()
    load_start = os.getloadavg()
    base_times = plain(steps, runs, clock)
    base = (statistics.median(base_times), statistics.median(plain(1, runs, clock)))
    rows = [row("async (plain)", base_times, steps)]
    stores: list[tuple[str, Callable[[str], str]]] = [("SQLite", lambda tmp: f"sqlite:///{tmp}")]
    if a.pg_url:
        pg_base = a.pg_url
        stores.append(("PostgreSQL", lambda _tmp: fresh_pg(pg_base)))
    for name, make_url in stores:
        with tempfile.TemporaryDirectory() as tmp:
            big = durable(steps, runs, make_url(str(Path(tmp) / "n.sqlite")), clock)
            small = durable(1, runs, make_url(str(Path(tmp) / "1.sqlite")), clock)
            bare_rows = []
            for label, stream in (("", False), (" + stream", True)):
                bare_big, bare_small = (
                    bare(n, runs, make_url(str(Path(tmp) / f"b{n}{stream}.sqlite")), clock,
                         stream=stream)
                    for n in (2 * steps + 1, 3)
                )
                bare_rows.append(
                    bare_row(f"DBOS bare{label}, {name}", bare_big, bare_small, steps)
                )
        lib = row(f"durable, {name}", big, steps, base, small)
        for key, dbos in (("dbos", bare_rows[0]), ("dbos_stream", bare_rows[1])):
            dbos_step = _num(dbos, "per_step_ms")
            lib[f"{key}_bare_per_step_ms"] = dbos_step
            lib[f"per_step_ratio_to_{key}"] = (
                _num(lib, "overhead_per_step_ms") / dbos_step if dbos_step > 0 else None
            )
        rows += [lib, *bare_rows]
    load_end = os.getloadavg()

    loads = " / ".join(" ".join(f"{x:.2f}" for x in ld) for ld in (load_start, load_end))
    print(f"{steps} tool steps per run ({2 * steps + 2} durable steps), {runs} runs, "
          f"timer: {a.timer} ({clock.__name__}), medians; load average (1, 5, 15 min) "
          f"at start / end: {loads}")
    print("durable rows: overhead over the plain async interpreter; DBOS bare rows: a "
          f"workflow of {2 * steps + 1} trivial steps (3 for the split), + stream: each "
          "after a small stream write, as the library's; x DBOS, x +stream: the durable "
          "per-step overhead over those rows' per-step cost")
    print(f"{'system':<31}{'per run ms':>12}{'+ per run':>12}{'+ fixed':>10}{'+ per step':>12}"
          f"{'x DBOS':>8}{'x +stream':>11}")
    for r in rows:
        cells = [r.get(k) for k in ("overhead_per_run_ms", "overhead_fixed_per_run_ms",
                                    "overhead_per_step_ms")]
        if "per_step_ms" in r:  # a bare row: its whole cost is DBOS's
            cells = [r["per_run_ms"], r["fixed_per_run_ms"], r["per_step_ms"]]
        cells += [r.get("per_step_ratio_to_dbos"), r.get("per_step_ratio_to_dbos_stream")]
        shown = "".join(
            f"{'' if v is None else f'{v:.2f}':>{w}}"
            for v, w in zip(cells, (12, 10, 12, 8, 11), strict=True)
        )
        print(f"{r['system']!s:<31}{r['per_run_ms']:>12.2f}{shown}")
    params = {"steps": steps, "runs": runs, "timer": a.timer, "quick": a.quick}
    print(summary(params, clock.__name__, (load_start, load_end), t0, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
