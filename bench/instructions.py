"""Instructions per unit of W1-W5 (bench/WORKLOADS.md), counted by valgrind's callgrind:
figures a loaded machine does not move, for a before and after of one change.

    python -m bench.instructions W2 --system pipeline_sync     # per step, K = 5
    python -m bench.instructions W1 --system pipeline_async    # per chunk, K = 5
    python -m bench.instructions W3 --history 2000             # per step, S from 10 to 30
    python -m bench.instructions W4                            # per concurrent run, 3 steps
    python -m bench.instructions W4 --gc-off                   # the same, the collector off
    python -m bench.instructions W5 --system provider-bedrock  # per chunk, N = 500 and 1,000
    python -m bench.instructions W5 --system all               # every W5 system, with ratios
    python -m bench.instructions W3 --whole --history 2000     # per whole run, S = 50

Each figure is the difference of two counts at two sizes divided by the difference of
the sizes, so what a process pays once (the interpreter, imports, warm-up) cancels. The
source is compiled to .pyc first and the hash seed fixed (PYTHONHASHSEED=0). W1-W3 run
their case twice at the same size (a warm-up, then the counted run) with the collector
frozen and off after the imports: the library's own instructions. W4 runs one warm-up
run, then the batch of concurrent runs (2 ms of latency per model call) with the
collector on, as a server runs (`--gc-off`: off, after a `gc.freeze()`): the difference
between the two is the collector's share. W3's figure leaves out what a run pays once
(its input check): the per-step cost at a history length, to compare with H = 0.
`W3 --whole` counts whole runs of S = 50 steps instead (the difference of 1 and 3 runs,
every history built beforehand in both): what a run costs with its input check, divided
by S to compare with H = 0 as the timed W3 does.
W5 counts one of bench/w5.py's systems (a warm-up call, then the counted one, the
collector on, as `python -m bench.w5` runs them) against two loopback servers, one per
size, that pause 20 ms before each write: the client, slowed down by valgrind, then reads
one event per read, as it does from a model; `--system all` gives each system's ratio to
its floor.
A W5 count is per event only while each read brings one event: under load the client,
run about 50 times slower under valgrind, can fall behind the servers' pace and read
several events at once, which cuts its count per chunk. So each W5 count also reads, from
its callgrind file, the calls to the socket's receive functions (`sock_recv`,
`sock_recv_into`), and says how many reads a chunk took; a figure more than 10% below one
read per chunk is flagged as not to be trusted.
Needs `valgrind` on the PATH; a pair of counts takes from seconds (W1) to minutes.
`--keep DIR` keeps the two callgrind files (`DIR/<workload>-<size>.out`, with `--whole`
`DIR/W3-whole-<runs>.out`) for
`callgrind_annotate`: the difference of two sizes' counts, function by function, is what
one unit costs where.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import contextlib
import gc
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bench import w5

SIZES = {"W1": (2000, 6000), "W2": (50, 150), "W3": (10, 30), "W4": (100, 300),
         "W5": (500, 1000)}
W5_PAUSE = "0.02"
"""Seconds the W5 servers wait before each write (see the module's doc)."""
WHOLE_RUNS = (1, 3)
"""`W3 --whole`: the numbers of runs counted (each of W3_STEPS steps)."""
ROOT = Path(__file__).resolve().parent.parent


def _whole(system: str, runs: int, history: int) -> None:
    """A warm-up run, then `runs` whole W3 runs, with the histories of as many runs as
    the larger count needs built first (so that building them cancels)."""
    from bench import workloads as w

    r = w.runner(system)
    steps = w.W3_STEPS
    fake = w.StepFake(steps, history)
    agent = w.step_agent(w.HOOKS_K, steps)
    fresh = [w.history(history) for _ in range(1 + max(WHOLE_RUNS))]
    gc.collect()
    gc.freeze()
    gc.disable()

    async def go() -> None:
        for h in fresh[: 1 + runs]:
            result = await r.run(agent, fake, h)
            if result.status != "finished" or len(result.steps) != steps:
                raise AssertionError(f"run {result.status}, {len(result.steps)} steps")
            fake.expect(steps)

    asyncio.run(go())


def _child(
    workload: str, system: str, size: int, history: int, gc_off: bool, whole: bool = False
) -> None:
    """One case at one size, in this process (the one valgrind counts)."""
    from bench import workloads as w

    if whole:
        _whole(system, size, history)
        return
    if workload == "W4":
        import anyio

        from bench import w4

        async def batch() -> None:
            one = w4.make_run(3, 0.002)
            await one()
            gc.collect()
            if gc_off:
                gc.freeze()
                gc.disable()
            await w4.batch(one, size)

        anyio.run(batch)
        return
    gc.collect()
    gc.freeze()
    gc.disable()
    r = w.runner(system)
    if workload == "W1":
        case = w.stream_case(r, "W1", 5, size)
    else:
        case = w.steps_case(r, workload, 5, size, history if workload == "W3" else 0)

    async def twice() -> None:
        for _ in range(2):  # a warm-up at the same size, then the counted run
            await case.framework()
            case.check()

    asyncio.run(twice())


READS = re.compile(r"sock_recv(_into)?(_impl)?$")
"""The C functions of `socket.recv` and `recv_into` in a callgrind file (see the doc)."""


def socket_reads(callgrind_file: Path) -> int:
    """The calls to the socket's receive functions a callgrind file records: each call
    site's `calls=` line under a `cfn=` naming one (names are given once, then
    referred to by their number)."""
    names: dict[str, str] = {}
    reads = 0
    target = False
    with callgrind_file.open() as f:
        for line in f:
            if line.startswith(("fn=", "cfn=")):
                ref, _, name = line.split("=", 1)[1].strip().partition(" ")
                if name:
                    names[ref] = name
                target = line.startswith("cfn=") and bool(READS.search(names.get(ref, "")))
            elif target and line.startswith("calls="):
                reads += int(line[6:].split()[0])
                target = False
    return reads


def count(
    workload: str, system: str, size: int, history: int, gc_off: bool,
    keep: Path | None = None, whole: bool = False, port: int = 0,
) -> int:
    """The instructions of one child process at `size` (its callgrind file kept in `keep`)."""
    return counted(workload, system, size, history, gc_off, keep, whole, port)[0]


def counted(
    workload: str, system: str, size: int, history: int, gc_off: bool,
    keep: Path | None = None, whole: bool = False, port: int = 0,
) -> tuple[int, int]:
    """`count`, and the socket reads its callgrind file records (W5: see the doc; else 0)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONHASHSEED"] = "0"
    name = f"{workload}-whole" if whole else workload
    if workload == "W5":
        env.update(w5.AWS_ENV)
        name = f"W5-{system}"
        child = ["bench.w5", "--child", system, "--port", str(port), "--n", str(size),
                 "--reps", "1", "--warm", "1"]
    else:
        child = ["bench.instructions", "--child", workload, "--system", system,
                 "--size", str(size), "--history", str(history)] \
            + (["--gc-off"] if gc_off else []) + (["--whole"] if whole else [])
    with tempfile.TemporaryDirectory() as tmp:
        where = (Path(tmp) if keep is None else keep) / f"{name}-{size}.out"
        out = str(where) if keep is not None or workload == "W5" else "/dev/null"
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
               "-m", *child]
        done = subprocess.run(
            cmd, env=env, capture_output=True, text=True, check=True, cwd=ROOT)
        found = re.search(r"Collected : (\d+)", done.stderr)
        if found is None:
            raise RuntimeError(f"no count in valgrind's output: {done.stderr[-500:]}")
        return int(found.group(1)), socket_reads(where) if workload == "W5" else 0


@contextlib.contextmanager
def w5_servers(sizes: tuple[int, int]) -> Iterator[tuple[int, int]]:
    """Two loopback servers (bench/wire_server.py) streaming N deltas each, their ports."""
    procs = [subprocess.Popen([sys.executable, "-m", "bench.wire_server", str(n), W5_PAUSE],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT) for n in sizes]
    try:
        ports = [int(p.stdout.readline()) for p in procs if p.stdout is not None]
        yield ports[0], ports[1]
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)


def w5_main(
    systems: tuple[str, ...], sizes: tuple[int, int], keep: Path | None = None
) -> None:
    """Each W5 system's instructions per chunk, and its ratio to its floor when counted."""
    n1, n2 = sizes
    per_chunk: dict[str, float] = {}
    with w5_servers(sizes) as (p1, p2):
        for system in systems:
            a, reads_a = counted("W5", system, n1, 0, False, keep, port=p1)
            b, reads_b = counted("W5", system, n2, 0, False, keep, port=p2)
            chunks = 2 * (n2 - n1)  # two calls per child
            per_chunk[system] = (b - a) / chunks
            floor = per_chunk.get(w5.FLOORS.get(system, "floor"))
            ratio = f" ({per_chunk[system] / floor:.3f}x its floor)" if floor else ""
            reads = (reads_b - reads_a) / chunks
            trust = "" if reads >= 0.9 else (
                "; NOT one event per read: the client fell behind the servers' pace (a "
                "loaded machine?), this count is too low; count again")
            print(f"W5 {system}: {per_chunk[system]:,.0f} instructions per chunk{ratio} "
                  f"(sizes {n1} and {n2}; {reads:.2f} socket reads per chunk{trust})",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("workload", choices=sorted(SIZES))
    ap.add_argument("--system", choices=("pipeline_sync", "pipeline_async", "all",
                                         *w5.SYSTEMS),
                    default=None, nargs="+",
                    help="W1-W3: pipeline_sync (default) or pipeline_async (W4 is async); W5: "
                    "bench/w5.py's systems (each with its floor), or all (the default)")
    ap.add_argument("--history", type=int, default=2000, help="W3's history length H")
    ap.add_argument("--gc-off", action="store_true", help="W4 with the collector off")
    ap.add_argument("--sizes", type=int, nargs=2, help="the two sizes (default per workload)")
    ap.add_argument("--keep", type=Path, help="keep the callgrind files in this directory")
    ap.add_argument("--whole", action="store_true",
                    help="W3: per whole run of S = 50 steps (its input check included), / S")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        system = (args.system or ["pipeline_sync"])[0]
        _child(args.workload, system, args.size, args.history, args.gc_off, args.whole)
        return
    if args.whole and args.workload != "W3":
        ap.error("--whole is for W3")
    for d in (ROOT / "src", ROOT / "bench"):
        compileall.compile_dir(d, quiet=1)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    if args.workload == "W5":
        asked = args.system or ["all"]
        if set(asked) & {"pipeline_sync", "pipeline_async"}:
            ap.error("W5's systems are bench/w5.py's")
        # The floors first, so each system's ratio can be printed with it.
        systems = w5.SYSTEMS if "all" in asked else tuple(
            {s: None for a in asked for s in (w5.FLOORS.get(a, "floor"), a)})
        ordered = tuple(sorted(systems, key=lambda s: not s.startswith("floor")))
        n1, n2 = args.sizes or SIZES["W5"]
        w5_main(ordered, (n1, n2), args.keep)
        return
    args.system = (args.system or ["pipeline_sync"])[0]
    if args.system not in ("pipeline_sync", "pipeline_async"):
        ap.error(f"{args.workload}'s systems are pipeline_sync and pipeline_async")
    n1, n2 = args.sizes or (WHOLE_RUNS if args.whole else SIZES[args.workload])
    runs = 1 if args.workload == "W4" else 2  # W1-W3 count the case twice (see the doc)
    a, b = (count(args.workload, args.system, n, args.history, args.gc_off, args.keep,
                  args.whole) for n in (n1, n2))
    if args.whole:
        from bench.workloads import W3_STEPS

        print(f"W3 H={args.history} {args.system}, whole runs of S={W3_STEPS} (input check "
              f"included): {(b - a) / (n2 - n1) / W3_STEPS:,.0f} instructions per step "
              f"(runs {n1} and {n2})")
        return
    unit = {"W1": "chunk", "W4": "run"}.get(args.workload, "step")
    what = args.workload + (f" H={args.history}" if args.workload == "W3" else "")
    system = "async, collector " + ("off" if args.gc_off else "on") if args.workload == "W4" \
        else args.system
    print(f"{what} {system}: {(b - a) / (runs * (n2 - n1)):,.0f} instructions per {unit} "
          f"(sizes {n1} and {n2})")


if __name__ == "__main__":
    main()
