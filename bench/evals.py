"""What an eval adds per case, on the simulator (wall-clock time of this machine).

    python -m bench.evals              # N = 400 cases
    python -m bench.evals --quick      # smoke mode: N = 20

The same N cases (a tool call, then an answer: two steps) run four ways, each case on a
fresh `Simulator`:

- `plain`: a loop of `Simulator.run`, the baseline;
- `evaluate`: `interpreters.evals.evaluate` with five deterministic scorers, one case at
  a time (`concurrency=1`);
- `evaluate+results`: the same, each case kept in a SQLite results file as it finishes;
- `online`: the plain loop with an `OnlineScorer` (the same five scorers) observing
  every run, its queue drained at the end (`flush`).

Figure: milliseconds per case, and the overhead per case over `plain`. Nothing here is
asserted on time (tests/test_bench_smoke.py checks that every case ran).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from interpreters.evals import (
    Case,
    Dataset,
    OnlineScorer,
    SimulatorTarget,
    contains,
    evaluate,
    max_steps,
    no_guard_tripped,
    status_is,
    tool_calls,
)
from interpreters.evals.scores import Scorer
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline import Agent


def lookup(order_id: str) -> str:
    """The status of an order."""
    return f"order {order_id} shipped"


AGENT = Agent.create("sim/m", name="bench", tools=[lookup])


def _script(case: Case) -> list[Say]:
    return [Say("Let me look.", calls=[call("lookup", order_id=case.name)]),
            Say(["Your order ", "shipped."])]


def _scorers() -> list[Scorer]:
    return [status_is(), contains("shipped"), tool_calls(["lookup"]), max_steps(3),
            no_guard_tripped()]


def _dataset(n: int) -> Dataset:
    return Dataset("bench", tuple(Case(name=str(1000 + i), input=f"where is {1000 + i}?")
                                  for i in range(n)))


def _timed(fn: Callable[[], int]) -> tuple[float, int]:
    t = time.perf_counter()
    done = fn()
    return time.perf_counter() - t, done


def run(*, quick: bool = False, n: int | None = None) -> list[dict[str, Any]]:
    cases = _dataset(n or (20 if quick else 400))

    def plain() -> int:
        done = 0
        for c in cases.cases:
            assert isinstance(c.input, str)
            r = Simulator(ScriptedModel(_script(c))).run(AGENT, c.input)
            done += r.result.status == "finished"
        return done

    def evaluated(results: Path | None) -> Callable[[], int]:
        def go() -> int:
            if results is not None:
                results.unlink(missing_ok=True)  # every case runs (and is kept)
            report = evaluate(cases, AGENT, _scorers(), target=SimulatorTarget(_script),
                              concurrency=1, results=results)
            return sum(1 for c in report.cases if c.passed)
        return go

    def online() -> int:
        scoring = OnlineScorer(_scorers(), max_pending=len(cases) + 1)
        done = 0
        for c in cases.cases:
            assert isinstance(c.input, str)
            sim = Simulator(ScriptedModel(_script(c)), observers=[scoring])
            done += sim.run(AGENT, c.input).result.status == "finished"
        scoring.flush(600)
        scored = sum(1 for r in scoring.report().cases if r.passed)
        scoring.close()
        return min(done, scored)

    rows: list[dict[str, Any]] = []
    base: float | None = None
    with tempfile.TemporaryDirectory() as tmp:
        ways: list[tuple[str, Callable[[], int]]] = [
            ("plain", plain), ("evaluate", evaluated(None)),
            ("evaluate+results", evaluated(Path(tmp) / "results.sqlite")),
            ("online", online),
        ]
        for name, fn in ways:
            fn() if not quick else None  # warm up (imports, caches)
            seconds, done = _timed(fn)
            per_case = seconds / len(cases) * 1000
            row: dict[str, Any] = {"way": name, "units": len(cases), "completed": done,
                                   "ms_per_case": round(per_case, 3)}
            if base is None:
                base = per_case
            else:
                row["overhead_ms_per_case"] = round(per_case - base, 3)
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.evals")
    p.add_argument("--quick", action="store_true", help="smoke mode: 20 cases")
    p.add_argument("--cases", type=int, default=None)
    a = p.parse_args(argv)
    rows = run(quick=a.quick, n=a.cases)
    for r in rows:
        extra = (f", +{r['overhead_ms_per_case']:.3f} ms over plain"
                 if "overhead_ms_per_case" in r else "")
        print(f"{r['way']:>17}: {r['ms_per_case']:.3f} ms per case{extra} "
              f"({r['completed']}/{r['units']})", file=sys.stderr)
    print(json.dumps({"evals": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
