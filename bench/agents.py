"""What a tree of runs costs per step, against the same steps in one run.

    python -m bench.agents                      # CPU time, 2000 runs of each
    python -m bench.agents --instructions       # instruction counts (valgrind's callgrind)
    python -m bench.agents --quick              # smoke test, tiny sizes (not for reporting)

The tree: a supervisor of depth 2 whose first step calls 4 child agents; each child
makes `k` tool calls, one a step, then answers; the supervisor then answers
(2 + 4 (k + 1) model calls in 5 runs). The flat run: one agent making as many model
calls, every one but the last calling the tool. Both on the sync simulator, with no
observer.

Two sizes (k = 1 and k = 5) split what a tree costs: per step = the growth of a run's
cost per extra model call (what a child's step costs through its relay and its parent,
against a step of the one run: the ratio is the tree's overhead per step); fixed per
child = what is left of the tree's extra cost once its steps are paid, a quarter for
each child (starting and ending its run, folding its result into its parent's).

`--instructions` counts the instructions of a process running `--runs` runs of one
system and size under `valgrind --tool=callgrind`, at two numbers of runs: their
difference is what the runs cost, the interpreter's start and the imports cancel.
Otherwise the CPU time (`process_time`) of the runs themselves. The last line printed is
the summary as JSON.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline import Agent

CHILDREN = 4
SIZES = (1, 5)
"""Tool calls of each child (`k`): two sizes, whose difference is steps alone."""

Make = Callable[[int], tuple[Agent, dict[str, ScriptedModel]]]


def echo(text: str) -> str:
    """Echo."""
    return text


def model_calls(k: int) -> int:
    """The model calls of a run of either system at size `k`."""
    return 2 + CHILDREN * (k + 1)


@functools.cache
def _tree_agent(k: int) -> Agent:
    kids = [Agent.create(f"sim/c{i}", name=f"c{i}", tools=[echo], max_steps=k + 2)
            for i in range(CHILDREN)]
    return Agent.create("sim/root", name="root", tools=kids)


@functools.cache
def _flat_agent(k: int) -> Agent:
    return Agent.create("sim/root", name="root", tools=[echo], max_steps=model_calls(k))


def tree(k: int) -> tuple[Agent, dict[str, ScriptedModel]]:
    """The tree's agents (made once: an app defines its agents once) and fresh models."""
    root = _tree_agent(k)
    models = {
        "sim/root": ScriptedModel([
            Say(calls=[call(f"c{i}", input=f"ask {i}") for i in range(CHILDREN)]),
            Say("all answered"),
        ]),
        **{f"sim/c{i}": ScriptedModel([*(Say(calls=[call("echo", text="x")])
                                         for _ in range(k)), Say(f"answer {i}")])
           for i in range(CHILDREN)},
    }
    return root, models


def flat(k: int) -> tuple[Agent, dict[str, ScriptedModel]]:
    steps = model_calls(k)
    agent = _flat_agent(k)
    script = [Say(calls=[call("echo", text="x")]) for _ in range(steps - 1)]
    return agent, {"sim/root": ScriptedModel([*script, Say("all answered")])}


SYSTEMS: dict[str, Make] = {"flat": flat, "tree": tree}


def run_once(make: Make, k: int) -> float:
    """One run of `make(k)` to its end, checked; the CPU seconds of the run itself (its
    instructions under callgrind: the models' making too, a few per model call)."""
    agent, models = make(k)
    sim = Simulator(models["sim/root"], models=models, observers=())
    t0 = time.process_time()
    result = sim.run(agent, "go").result
    spent = time.process_time() - t0
    assert result.status == "finished", result.error
    calls = sum(m.calls for m in models.values())
    assert calls == model_calls(k), calls
    return spent


def cpu_per_run(make: Make, k: int, runs: int) -> float:
    """Mean CPU microseconds of one run."""
    for _ in range(max(1, runs // 20)):  # warm up
        run_once(make, k)
    return sum(run_once(make, k) for _ in range(runs)) / runs * 1e6


def instructions_per_run(system: str, k: int, runs: int) -> float:
    """Instructions of one run: callgrind's totals for `runs` runs and for `2 * runs`,
    their difference over `runs` (what the process does besides, once, cancels)."""
    totals = [_callgrind(system, k, n) for n in (runs, 2 * runs)]
    return (totals[1] - totals[0]) / runs


def _callgrind(system: str, k: int, runs: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
             sys.executable, "-m", "bench.agents", "--one", system, "--k", str(k),
             "--runs", str(runs)],
            check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        m = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)
        assert m is not None, "no totals in callgrind's output"
        return int(m.group(1))


def split(per_run: Mapping[tuple[str, int], float]) -> dict[str, float]:
    """Per model call of each system (the growth between the sizes), their ratio, and
    the tree's fixed cost per child (what its extra cost is beyond its steps)."""
    lo, hi = SIZES
    grown = model_calls(hi) - model_calls(lo)
    step = {s: (per_run[s, hi] - per_run[s, lo]) / grown for s in SYSTEMS}
    fixed = {s: per_run[s, lo] - step[s] * model_calls(lo) for s in SYSTEMS}
    return {
        "flat_per_step": round(step["flat"], 1),
        "tree_per_step": round(step["tree"], 1),
        "per_step_ratio": round(step["tree"] / step["flat"], 3),
        "fixed_per_child": round((fixed["tree"] - fixed["flat"]) / CHILDREN, 1),
        "whole_run_ratio": round(per_run["tree", lo] / per_run["flat", lo], 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", "--smoke", action="store_true",
                    help="a few runs: checks the code runs (not for reporting)")
    ap.add_argument("--instructions", action="store_true",
                    help="instruction counts under valgrind's callgrind, not CPU time")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--one", choices=tuple(SYSTEMS), help=argparse.SUPPRESS)
    ap.add_argument("--k", type=int, default=SIZES[0], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one is not None:  # one process under callgrind: warm up, then the runs
        run_once(SYSTEMS[args.one], args.k)
        for _ in range(args.runs or 1):
            run_once(SYSTEMS[args.one], args.k)
        return
    if args.instructions:
        if shutil.which("valgrind") is None:
            sys.exit("--instructions needs valgrind")
        runs = args.runs or (1 if args.quick else 10)
        unit = "instructions"
        per_run = {(s, k): instructions_per_run(s, k, runs) for s in SYSTEMS for k in SIZES}
    else:
        runs = args.runs or (20 if args.quick else 2000)
        unit = "us CPU"
        per_run = {(s, k): cpu_per_run(SYSTEMS[s], k, runs) for s in SYSTEMS for k in SIZES}
    for (s, k), v in per_run.items():
        print(f"{s} k={k}: {model_calls(k)} model calls a run, {v:,.1f} {unit} a run")
    figures = split(per_run)
    print(f"a step: {figures['flat_per_step']:,} {unit} in one run, "
          f"{figures['tree_per_step']:,} in the tree "
          f"(tree / one run: {figures['per_step_ratio']}); "
          f"fixed per child: {figures['fixed_per_child']:,}; "
          f"whole runs at k={SIZES[0]}: {figures['whole_run_ratio']}")
    print(json.dumps({
        "unit": unit, "runs": runs,
        "results": [{"system": s, "k": k, "model_calls": model_calls(k), "per_run": round(v, 1)}
                    for (s, k), v in per_run.items()],
        **figures,
    }))


if __name__ == "__main__":
    main()
