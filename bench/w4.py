"""W4 of bench/WORKLOADS.md: many concurrent async runs against a slow model.

    python -m bench.w4                       # 1,000 runs x 3 steps, 50 ms per model call
    python -m bench.w4 --backend trio --runs 2000 --reps 5

Each run is 3 steps on the `AsyncSimulator` with real sleeps: steps 0 and 1 call the
tool `echo`, step 2 answers "done"; every model call sleeps 50 ms (`anyio.sleep`) before
its first event (the fake model keeps no log of the requests, `keep_requests=False`, as
the peers' fake models keep none). With perfect concurrency the whole batch takes 3 x 50
ms = 150 ms, so the figure is wall time / 150 ms (goal: at most 1.2 on asyncio, 1.3 on
trio). A baseline does the same 3,000 sleeps in 1,000 plain tasks. Both also report the
process CPU time per run: the event loop runs on one core, so the CPU a batch needs is
what stretches its wall time past the ideal (the machine is shared: compare with the
baseline of the same sitting). Peak RSS is the process's high-water mark
(`resource.getrusage`), which includes the interpreter and every import (goal: under
64 MiB). `--gc-freeze` moves everything alive after the warm-up (imports, caches) out of
the garbage collector's reach (`gc.freeze()`, as long-running servers do), to show what
the collector's full passes over the imported modules cost.

`--gc-stats` runs one batch more with a `gc.callbacks` hook and prints how many collections
of each generation it started and how many objects each kind walked, per run: what a
waiting run keeps tracked is walked by every collection that reaches its generation, so
this says what the collector's share of a run is made of (the hook counts the objects,
so that batch is not timed).

`--harness` says how the runs are started and how the fake model sleeps: `anyio` (the
default, the only one on trio) starts each run in an anyio task group and sleeps with
`anyio.sleep`; `workload` does what `../shared/bench/peers.py` does for every peer on
asyncio, `asyncio.gather` over the runs' coroutines and `asyncio.sleep`. The baseline
uses the same harness, so the two are compared within one; the anyio harness costs a
run about 20 us of CPU, 19 tracked objects and 2.7 KB more (its task, cancel scope,
events and backend lookups), which the figures of `python -m bench.run --workload W4`
and the peers' do not pay. Both print the peak RSS per concurrent run: the high-water
mark's growth past the warm-up (which follows the baseline's batch) divided by the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Literal

import anyio

from interpreters.testing import AsyncSimulator, Say, ScriptedModel, call
from pipeline.agent import Agent
from pipeline.values.model import ModelRequest


def echo(text: str) -> str:
    """Echo the text."""
    return text


Sleep = Callable[[float], Awaitable[None]]
Harness = Literal["anyio", "workload"]
HARNESSES: tuple[Harness, ...] = ("anyio", "workload")


def make_run(
    steps: int, latency: float, sleep: Sleep = anyio.sleep
) -> Callable[[], Awaitable[int]]:
    """One W4 run; returns its number of steps. `sleep`: the fake model's."""

    def script(request: ModelRequest) -> Say:
        done = sum(1 for m in request.messages if m.role == "tool")
        if done < steps - 1:
            return Say(calls=[call("echo", text=f"step {done}")], latency=latency)
        return Say("done", latency=latency)

    model = ScriptedModel(script, async_sleep=sleep, keep_requests=False)
    sim = AsyncSimulator(model, real_sleep=True)
    agent = Agent.create("bench/w4", tools=[echo], max_steps=steps)
    interp = sim.interpreter

    async def one() -> int:
        result = await interp.run(agent, "go")
        if result.status != "finished" or result.text != "done":
            raise AssertionError(f"run {result.status}: {result.error}")
        return len(result.steps)

    return one


async def batch(
    one: Callable[[], Awaitable[int]], runs: int, harness: Harness = "anyio"
) -> tuple[float, float, int]:
    """`runs` concurrent runs: (wall seconds, CPU seconds, steps done)."""
    if harness not in HARNESSES:
        raise ValueError(f"harness must be one of {HARNESSES}, not {harness!r}")
    if harness == "workload":  # as ../shared/bench/peers.py runs every peer
        t0, c0 = time.perf_counter(), time.process_time()
        done = await asyncio.gather(*(one() for _ in range(runs)))
        return time.perf_counter() - t0, time.process_time() - c0, sum(done)
    steps = 0

    async def task() -> None:
        nonlocal steps
        n = await one()  # (`steps += await one()` would read `steps` before the await)
        steps += n

    t0, c0 = time.perf_counter(), time.process_time()
    async with anyio.create_task_group() as tg:
        for _ in range(runs):
            tg.start_soon(task)
    return time.perf_counter() - t0, time.process_time() - c0, steps


class Walked:
    """A `gc.callbacks` hook: the collections of each generation started, and the tracked
    objects each one had to walk (its generation and the younger ones)."""

    def __init__(self) -> None:
        self.collections = [0, 0, 0]
        self.objects = [0, 0, 0]

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase != "start":
            return
        g = info["generation"]
        self.collections[g] += 1
        self.objects[g] += sum(len(gc.get_objects(k)) for k in range(g + 1))


async def collector_walk(
    one: Callable[[], Awaitable[int]], runs: int, harness: Harness = "anyio"
) -> Walked:
    """One batch of `runs` with the `Walked` hook installed."""
    walked = Walked()
    gc.callbacks.append(walked)
    try:
        await batch(one, runs, harness)
    finally:
        gc.callbacks.remove(walked)
    return walked


def baseline(
    steps: int, latency: float, sleep: Sleep = anyio.sleep
) -> Callable[[], Awaitable[int]]:
    async def one() -> int:
        for _ in range(steps):
            await sleep(latency)
        return steps

    return one


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


async def measure(args: argparse.Namespace) -> None:
    ideal = args.steps * args.latency
    harness = args.harness
    sleep: Sleep = asyncio.sleep if harness == "workload" else anyio.sleep
    base = baseline(args.steps, args.latency, sleep)
    await batch(base, 10, harness)
    base_runs = [await batch(base, args.runs, harness) for _ in range(args.reps)]
    base_times = [wall for wall, _, _ in base_runs]
    base_cpu = min(cpu_s for _, cpu_s, _ in base_runs)

    one = make_run(args.steps, args.latency, sleep)
    await one()  # warm up: lazy imports, caches
    gc.collect()
    if args.gc_freeze:
        gc.freeze()
    rss_before = peak_rss_mib()
    times: list[float] = []
    cpu: list[float] = []
    for _ in range(args.reps):
        wall, cpu_s, steps = await batch(one, args.runs, harness)
        if steps != args.runs * args.steps:
            raise AssertionError(f"{steps} steps, expected {args.runs * args.steps}")
        times.append(wall)
        cpu.append(cpu_s)
        one = make_run(args.steps, args.latency, sleep)  # a fresh model per rep

    goal = 1.2 if args.backend == "asyncio" else 1.3
    print(f"W4 on {args.backend} ({harness} harness): {args.runs} concurrent runs x "
          f"{args.steps} steps, {args.latency * 1e3:g} ms per model call; "
          f"ideal {ideal * 1e3:g} ms")
    print(f"  baseline (plain sleeps): wall / ideal min {min(base_times) / ideal:.3f}, "
          f"median {statistics.median(base_times) / ideal:.3f}; "
          f"CPU per run {base_cpu / args.runs * 1e6:.0f} us (min)")
    print(f"  AsyncInterpreter.run:    wall / ideal min {min(times) / ideal:.3f}, "
          f"median {statistics.median(times) / ideal:.3f}  "
          f"(goal <= {goal}; {statistics.median(times) / args.runs * 1e6:.0f} us wall per run)")
    print(f"  CPU per run {min(cpu) / args.runs * 1e6:.0f} us (min): the batch cannot take "
          f"less than {min(cpu) / ideal:.2f} x ideal on one core")
    peak = peak_rss_mib()
    if args.gc_stats:
        w = await collector_walk(make_run(args.steps, args.latency, sleep), args.runs, harness)
        per_run = ", ".join(f"{o / args.runs:.1f}" for o in w.objects)
        print(f"  collector (one batch more): {' / '.join(map(str, w.collections))} "
              f"collections of generations 0 / 1 / 2; objects they walked per run: {per_run}")
    print(f"  peak RSS {peak:.1f} MiB (after imports and warm-up {rss_before:.1f} MiB; "
          f"goal < 64 MiB): {(peak - rss_before) * 1024 / args.runs:.1f} KiB per concurrent "
          "run" + ("; gc frozen" if args.gc_freeze else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--gc-freeze", action="store_true",
                    help="gc.freeze() after the warm-up (see the module doc)")
    ap.add_argument("--gc-stats", action="store_true",
                    help="one batch more: the collections and the objects they walked")
    ap.add_argument("--harness", choices=HARNESSES, default="anyio",
                    help="how the runs start and the fake model sleeps (see the module doc)")
    args = ap.parse_args()
    if args.harness == "workload" and args.backend != "asyncio":
        ap.error("--harness workload is asyncio's (asyncio.gather, asyncio.sleep)")
    anyio.run(measure, args, backend=args.backend)


if __name__ == "__main__":
    main()
