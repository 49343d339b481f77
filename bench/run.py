"""Run the shared workloads on this library and print them the way peers.py does.

::

    python -m bench.run                    # everything (W1-W6 and growth), a few minutes
    python -m bench.run --only sync        # one interpreter (sync or async)
    python -m bench.run --workload W3      # one workload (W1, W2, W3, W4, W5, W6 or growth)
    python -m bench.run --workload W1pii   # W1's stream through the built-in PIIDetector
    python -m bench.run --workload W3L     # W3 with a TokenLimiterProcessor
    python -m bench.run --quick            # smoke test with tiny sizes (not for reporting)
    python -m bench.run --gc-off           # diagnostic: cyclic GC off while timing
    python -m bench.run --timer cpu        # W1-W3 in process CPU time (a shared machine)

Each interpreter's W1-W3 and growth cases run in one subprocess (baseline and framework
share it), W4 in one subprocess per system, next to a baseline process doing the same
sleeps with plain asyncio. The script prints a table, the goals (bench/WORKLOADS.md) with whether
each is met, and last one JSON line in the shape of peers.py's (params, versions,
platform, total_s, results; plus goals).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from importlib import metadata
from typing import Any

from bench import w5, w6
from bench.workloads import (
    ASYNC,
    CASES,
    SYNC,
    Case,
    Params,
    async_available,
    run_case,
    runner,
    time_reps,
    w4_runner,
)

SYSTEMS = {"sync": SYNC, "async": ASYNC}
WORKLOADS = ("W1", "W1pii", "W2", "W3", "W3L", "growth", "W4", "W5", "W6")
W4_SYSTEMS = ("baseline", ASYNC)
CHILD_TIMEOUT_S = 900
DISTRIBUTIONS = ("pipeline-agents", "msgspec", "anyio")

# The goals (microseconds per unit, or ratios).
GOAL_W1 = {SYNC: 2.0, ASYNC: 5.0}
GOAL_W2 = 50.0
GOAL_W3 = 1.3
GOAL_W4_WALL = 1.2  # bench.w4 also checks trio, against 1.3
GOAL_W4_RSS_MIB = 64.0
GOAL_GROWTH = 1.3


# --------------------------------------------------------------------------- children


async def child_cases(system: str, workloads: list[str], p: Params) -> list[dict[str, Any]]:
    r = runner(system)
    rows: list[dict[str, Any]] = []
    for w in workloads:
        cases: list[Case] = CASES[w](r, p)
        for case in cases:
            t0 = time.perf_counter()
            try:
                row = await run_case(system, case, p)
            except Exception as exc:  # report and go on with the other cases
                row = {
                    "system": system,
                    "workload": case.workload,
                    "variant": case.variant,
                    "hooks": case.hooks,
                    "units": case.units,
                    "error": f"{type(exc).__name__}: {exc}",
                }
            row["case_wall_s"] = time.perf_counter() - t0
            print(
                f"  {system:14} {case.workload} {case.variant}: "
                f"{row.get('overhead_median_us', row.get('error'))}",
                file=sys.stderr,
                flush=True,
            )
            rows.append(row)
    return rows


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def child_w4(system: str, p: Params) -> dict[str, Any]:
    one = w4_runner(system, p)
    await one()  # first run: lazy imports, caches
    gc.collect()
    rss_setup = rss_kib()
    done = {"steps": 0}

    async def all_runs() -> None:
        steps = await asyncio.gather(*(one() for _ in range(p.w4_concurrency)))
        done["steps"] = sum(steps)

    def check() -> int:
        expected = p.w4_concurrency * p.w4_steps
        if done["steps"] != expected:
            raise AssertionError(f"{done['steps']} steps in all runs, expected {expected}")
        return p.w4_concurrency

    times, completed = await time_reps(all_runs, p, check)
    ideal = p.w4_steps * p.w4_latency_s
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "system": system,
        "workload": "W4",
        "variant": "plain asyncio sleeps" if system == "baseline" else "AsyncInterpreter.run",
        "hooks": 0,
        "units": p.w4_concurrency,
        "completed": completed,
        "wall_min_s": min(times),
        "wall_median_s": statistics.median(times),
        "ms_per_run_median": statistics.median(times) / p.w4_concurrency * 1e3,
        "wall_over_ideal_min": min(times) / ideal,
        "wall_over_ideal_median": statistics.median(times) / ideal,
        "rss_after_setup_mib": rss_setup / 1024,
        "rss_end_mib": rss_kib() / 1024,
        "peak_rss_mib": peak / 1024,
        "kib_per_run": (peak - rss_setup) / p.w4_concurrency,
        "framework_times_s": times,
    }


def spawn(args: list[str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.run", *args]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, cwd=root
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {CHILD_TIMEOUT_S} s"}
    sys.stderr.write(proc.stderr)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        return {"error": f"exit {proc.returncode}: {tail[0]}"}
    out: dict[str, Any] = json.loads(lines[-1])
    return out


# --------------------------------------------------------------------------- reporting


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for d in DISTRIBUTIONS:
        try:
            out[d] = metadata.version(d)
        except metadata.PackageNotFoundError:
            out[d] = "not installed"
    return out


def ratio_row(
    system: str, workload: str, variant: str, lo: dict[str, Any], hi: dict[str, Any]
) -> dict[str, Any]:
    return {
        "system": system,
        "workload": workload,
        "variant": variant,
        "hooks": lo["hooks"],
        "ratio_median": hi["overhead_median_us"] / lo["overhead_median_us"],
        "ratio_min": hi["overhead_min_us"] / lo["overhead_min_us"],
    }


def ratios(rows: list[dict[str, Any]], p: Params) -> list[dict[str, Any]]:
    """W3's ratio H=max / H=0, and each growth series' largest / smallest size."""
    out = []
    for system in SYSTEMS.values():
        ok = [r for r in rows if r["system"] == system and "error" not in r and "units" in r]
        w3 = {r.get("history"): r for r in ok if r["workload"] == "W3"}
        if 0 in w3 and p.w3_history in w3:
            out.append(ratio_row(system, "W3", f"ratio H={p.w3_history} / H=0",
                                 w3[0], w3[p.w3_history]))
        w3l = [r for r in ok if r["workload"] == "W3L"]
        if w3l and p.w3_history in w3:
            out.append(ratio_row(system, "W3L", f"ratio with TokenLimiterProcessor / W3 "
                                 f"H={p.w3_history}", w3[p.w3_history], w3l[0]))
        for g, sizes, unit in (("G1", p.growth_w1, "N"), ("G2", p.growth_w2, "S")):
            by = {r.get("size"): r for r in ok if r["workload"] == g}
            if sizes[0] in by and sizes[-1] in by:
                out.append(ratio_row(system, g, f"growth {unit}={sizes[-1]} / {unit}={sizes[0]}",
                                     by[sizes[0]], by[sizes[-1]]))
    return out


def goals(rows: list[dict[str, Any]], p: Params) -> list[dict[str, Any]]:
    """Each goal with the figure measured (the min-based one, median beside)."""
    out: list[dict[str, Any]] = []

    def add(name: str, limit: float, row: dict[str, Any] | None, key: str, med: str) -> None:
        if row is None or "error" in row:
            out.append({"goal": name, "limit": limit, "value": None, "met": None})
            return
        v = row[key]
        out.append({"goal": name, "limit": limit, "value": v, "median": row.get(med),
                    "met": v <= limit, "over_by": v / limit})

    def find(**kv: object) -> dict[str, Any] | None:
        for r in rows:
            if all(r.get(k) == v for k, v in kv.items()):
                return r
        return None

    for system, limit in GOAL_W1.items():
        row = find(system=system, workload="W1", hooks=p.hooks_k)
        add(f"W1 K={p.hooks_k} {system} us/chunk", limit, row,
            "overhead_min_us", "overhead_median_us")
    for system in SYSTEMS.values():
        row = find(system=system, workload="W2", hooks=p.hooks_k)
        add(f"W2 K={p.hooks_k} {system} us/step", GOAL_W2, row,
            "overhead_min_us", "overhead_median_us")
    for system in SYSTEMS.values():
        ratio = find(system=system, workload="W3", variant=f"ratio H={p.w3_history} / H=0")
        add(f"W3 ratio {system}", GOAL_W3, ratio, "ratio_min", "ratio_median")
    for g in ("G1", "G2"):
        for system in SYSTEMS.values():
            ratio = next((r for r in rows if r["system"] == system and r["workload"] == g
                          and "ratio_min" in r), None)
            add(f"growth {g} {system} largest/smallest", GOAL_GROWTH, ratio,
                "ratio_min", "ratio_median")
    w4 = find(system=ASYNC, workload="W4")
    add("W4 wall / 150 ms", GOAL_W4_WALL, w4, "wall_over_ideal_min", "wall_over_ideal_median")
    add("W4 peak RSS MiB", GOAL_W4_RSS_MIB, w4, "peak_rss_mib", "peak_rss_mib")
    return out


def fmt(x: Any, spec: str = ".2f") -> str:
    return format(x, spec) if isinstance(x, int | float) else "-"


def print_table(rows: list[dict[str, Any]], goal_rows: list[dict[str, Any]]) -> None:
    cols = ("base med", "fw med", "ovh min", "ovh med")
    head = (f'{"system":14} {"wl":3} {"variant":62} {"K":>2} '
            + " ".join(f"{c:>9}" for c in cols) + "  ratio / W4")
    blank = " " * (10 * len(cols) - 1)
    print()
    print("Overhead in microseconds per unit (W1/G1: chunk, W2/W3/G2: step); "
          "ratio = W3 per-step overhead at H=max / H=0, G1/G2 = largest / smallest size;")
    print("W4: wall time / (steps x fake latency), wall time / runs, RSS")
    print(head)
    print("-" * len(head))
    for r in rows:
        lead = (f'{r["system"]:14} {r["workload"]:3} {r.get("variant", "")[:62]:62} '
                f'{fmt(r.get("hooks"), "d"):>2}')
        if "error" in r:
            print(f'{lead} ERROR {r["error"]}')
        elif r["workload"] == "W4":
            print(
                f'{lead} {blank}  wall/ideal min {r["wall_over_ideal_min"]:.2f} '
                f'med {r["wall_over_ideal_median"]:.2f} ({r["ms_per_run_median"]:.2f} ms/run); '
                f'RSS MiB: setup {r["rss_after_setup_mib"]:.0f}, end {r["rss_end_mib"]:.0f}, '
                f'peak {r["peak_rss_mib"]:.0f} ({r["kib_per_run"]:.1f} KiB/run)'
            )
        elif "ratio_median" in r:
            print(f'{lead} {blank}  {r["ratio_median"]:.2f} (min/min {r["ratio_min"]:.2f})')
        else:
            keys = ("baseline_median_us", "framework_median_us", "overhead_min_us",
                    "overhead_median_us")
            print(f"{lead} " + " ".join(f"{r[k]:9.2f}" for k in keys))
    print()
    print("Goals, on the min-based figure (median in brackets):")
    for g in goal_rows:
        if g["met"] is None:
            print(f'  {g["goal"]:40} limit {g["limit"]:7.2f}  not measured')
        else:
            print(f'  {g["goal"]:40} limit {g["limit"]:7.2f}  got {g["value"]:8.2f} '
                  f'({fmt(g["median"])})  {"met" if g["met"] else "MISSED"}')


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=tuple(SYSTEMS), help="one interpreter")
    ap.add_argument("--workload", choices=WORKLOADS, help="one workload")
    ap.add_argument("--quick", action="store_true", help="smoke test, tiny sizes")
    ap.add_argument("--reps", type=int, help="timed repetitions (default 5)")
    ap.add_argument("--gc-off", action="store_true", help="cyclic GC off while timing")
    ap.add_argument("--timer", choices=("wall", "cpu"), default="wall",
                    help="W1-W3: wall clock (default, as peers.py) or process CPU time")
    ap.add_argument("--child", choices=tuple(SYSTEMS.values()), help=argparse.SUPPRESS)
    ap.add_argument("--w4-child", choices=W4_SYSTEMS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    p = Params.quick() if args.quick else Params()
    if args.reps:
        p.reps = args.reps
    p.gc_off = args.gc_off
    p.timer = args.timer  # W4 children are never passed --timer: they measure wall time
    workloads = [args.workload] if args.workload else list(WORKLOADS)
    passthrough = [
        *(["--quick"] if args.quick else []),
        *(["--gc-off"] if args.gc_off else []),
        *(["--reps", str(args.reps)] if args.reps else []),
    ]
    w123_args = ["--timer", args.timer] if args.timer != "wall" else []

    if args.child:
        w = [x for x in workloads if x not in ("W4", "W5", "W6")]
        print(json.dumps({"rows": asyncio.run(child_cases(args.child, w, p))}))
        return
    if args.w4_child:
        print(json.dumps({"rows": [asyncio.run(child_w4(args.w4_child, p))]}))
        return

    t_start = time.perf_counter()
    have_async = async_available()
    systems = [SYSTEMS[args.only]] if args.only else list(SYSTEMS.values())
    rows: list[dict[str, Any]] = []
    cases = [w for w in workloads if w not in ("W4", "W5", "W6")]
    for system in systems:
        if system == ASYNC and not have_async:
            rows.append({"system": system, "workload": ",".join(cases) or "W4", "variant": "",
                         "error": "interpreters.aio does not exist yet"})
            continue
        if cases:
            print(f"[{system}] {', '.join(cases)}", file=sys.stderr, flush=True)
            out = spawn(["--child", system,
                         *(["--workload", args.workload] if args.workload else []),
                         *passthrough, *w123_args])
            rows += out.get("rows", [{"system": system, "workload": ",".join(cases),
                                      "variant": "", "error": out.get("error")}])
    rows += ratios(rows, p)
    if "W4" in workloads and have_async and args.only != "sync":
        for system in W4_SYSTEMS:
            print(f"[{system}] W4", file=sys.stderr, flush=True)
            out = spawn(["--w4-child", system, *passthrough])
            rows += out.get("rows", [{"system": system, "workload": "W4", "variant": "",
                                      "error": out.get("error")}])

    # W5 (the real HTTP path) has its own processes and table: bench/w5.py.
    w5_rows = (
        w5.run(200 if args.quick else 2000, args.reps or (2 if args.quick else 7),
               1 if args.quick else w5.WARM)
        if "W5" in workloads and args.only is None else []
    )
    # W6 (a judged stream, on virtual time) has its own table too: bench/w6.py.
    w6_rows = w6.run(args.quick) if "W6" in workloads and args.only is None else []
    order = {w: i for i, w in enumerate(("W1", "W1pii", "W2", "W3", "W3L", "G1", "G2", "W4"))}
    sys_order = {s: i for i, s in enumerate(("baseline", SYNC, ASYNC))}
    rows.sort(key=lambda r: (order.get(r["workload"], 9), sys_order.get(r["system"], 9)))
    goal_rows = goals(rows, p)
    print_table(rows, goal_rows)
    if w5_rows:
        w5.print_rows(w5_rows)
    if w6_rows:
        w6.print_rows(w6_rows)
    total = time.perf_counter() - t_start
    print(f"\ntotal {total:.0f} s; versions: "
          + ", ".join(f"{k} {v}" for k, v in versions().items()))
    summary = {
        "params": p.__dict__,
        "versions": versions(),
        "platform": {"machine": platform.machine(), "cpus": os.cpu_count(),
                     "system": platform.system()},
        "total_s": total,
        "results": rows,
        "goals": goal_rows,
        "w5": w5_rows,
        "w6": w6_rows,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
