"""What a tree of runs costs per step, against the same steps in one run.

    python -m bench.agents [--quick] [--runs N]

The tree: a supervisor of depth 2 whose first step calls 4 child agents; each child
calls a tool, then answers; the supervisor then answers (10 model calls, 8 tool calls,
5 runs). The flat run: one agent making the same 10 model calls (9 of them calling the
tool). Both on the sync simulator, with no observer, on CPU time (`process_time`); the
figure is the CPU time per model call, and the tree's ratio to the flat run's. The last
line printed is the summary as JSON.
"""

from __future__ import annotations

import argparse
import json
import time

from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline import Agent

CHILDREN = 4


def echo(text: str) -> str:
    """Echo."""
    return text


def _tree() -> tuple[Agent, dict[str, ScriptedModel]]:
    kids = [Agent.create(f"sim/c{i}", name=f"c{i}", tools=[echo]) for i in range(CHILDREN)]
    root = Agent.create("sim/root", name="root", tools=kids)
    models = {
        "sim/root": ScriptedModel([
            Say(calls=[call(f"c{i}", input=f"ask {i}") for i in range(CHILDREN)]),
            Say("all answered"),
        ]),
        **{f"sim/c{i}": ScriptedModel([Say(calls=[call("echo", text="x")]), Say(f"answer {i}")])
           for i in range(CHILDREN)},
    }
    return root, models


def _flat() -> tuple[Agent, dict[str, ScriptedModel]]:
    steps = 2 + 2 * CHILDREN
    agent = Agent.create("sim/root", name="root", tools=[echo], max_steps=steps)
    script = [Say(calls=[call("echo", text="x")]) for _ in range(steps - 1)]
    return agent, {"sim/root": ScriptedModel([*script, Say("all answered")])}


def _measure(make: object, runs: int) -> tuple[float, int]:
    """CPU seconds for `runs` runs and the model calls of one."""
    assert callable(make)
    total = 0.0
    calls = 0
    for _ in range(runs):
        agent, models = make()
        sim = Simulator(models["sim/root"], models=models, observers=())
        t0 = time.process_time()
        result = sim.run(agent, "go").result
        total += time.process_time() - t0
        assert result.status == "finished", result.error
        calls = sum(len(m.requests) for m in models.values())
    return total, calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="a few runs: checks the code runs")
    ap.add_argument("--runs", type=int, default=None)
    args = ap.parse_args()
    runs = args.runs or (20 if args.quick else 2000)
    _measure(_tree, 5)  # warm up
    _measure(_flat, 5)
    rows = []
    for name, make in (("flat", _flat), ("tree", _tree)):
        spent, calls = _measure(make, runs)
        per_call_us = spent / runs / calls * 1e6
        rows.append({"system": name, "runs": runs, "model_calls": calls,
                     "per_model_call_us": round(per_call_us, 2)})
        print(f"{name}: {calls} model calls a run, {per_call_us:.1f} us CPU a model call")
    ratio = rows[1]["per_model_call_us"] / rows[0]["per_model_call_us"]  # type: ignore[operator]
    print(f"tree / flat per model call: {ratio:.3f}")
    print(json.dumps({"timer": "process_time", "results": rows, "ratio": round(ratio, 3)}))


if __name__ == "__main__":
    main()
