"""The benchmark's quick mode runs, so its code cannot rot. No timing is asserted, ever:
only that every workload completed with the right number of chunks, steps and runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import agents, w6
from bench.w5 import SYSTEMS as W5_SYSTEMS
from bench.workloads import ASYNC, SYNC, Params, async_available

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_quick_mode_completes_every_workload() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.run", "--quick"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    rows: list[dict[str, Any]] = summary["results"]
    p = Params.quick()

    systems = [SYNC, ASYNC] if async_available() else [SYNC]
    for system in systems:
        mine = [r for r in rows if r["system"] == system]
        assert not [r for r in mine if "error" in r], [r["error"] for r in mine if "error" in r]
        measured = [r for r in mine if "units" in r and r["workload"] != "W4"]
        expected = {
            ("W1", p.w1_chunks): 2,  # K = 0 and K = 5
            ("W1pii", p.w1_chunks): 1,  # W1's stream through PIIDetector
            ("W2", p.w2_steps): 2,
            ("W3", p.w3_steps): 2,  # H = 0 and H = max
            ("W3L", p.w3_steps): 1,  # H = max with a TokenLimiterProcessor
            **{("G1", n): 1 for n in p.growth_w1},
            **{("G2", s): 1 for s in p.growth_w2},
        }
        got: dict[tuple[str, int], int] = {}
        for r in measured:
            key = (r["workload"], r["units"])
            got[key] = got.get(key, 0) + 1
            # every chunk (W1, G1) or step (W2, W3, G2) of the workload was done
            assert r["completed"] == r["units"], r
        assert got == expected
        ratios = {r["workload"] for r in mine if "ratio_median" in r}
        assert ratios == {"W3", "W3L", "G1", "G2"}

    assert [r["max_in_flight"] for r in summary["w6"]] == [0, 1, 2, 4] * 2

    w5 = summary["w5"]
    assert [r["system"] for r in w5] == list(W5_SYSTEMS)
    for r in w5:
        assert "error" not in r, r["error"]
        assert r["completed"] == r["units"] == 200  # every delta of every call was read
        assert r["ratio_min"] > 0

    w4 = [r for r in rows if r["workload"] == "W4"]
    if async_available():
        assert {r["system"] for r in w4} == {"baseline", ASYNC}
        for r in w4:
            assert "error" not in r, r["error"]
            assert r["completed"] == p.w4_concurrency  # each run did all its steps
    else:
        assert [r for r in rows if r["system"] == ASYNC and "error" in r]


def test_the_judged_stream_workload_completes_in_smoke_mode() -> None:
    # W6 runs on virtual time: every character reached the consumer, on both simulators,
    # with and without the guard (its figures are bench/WORKLOADS.md's, not asserted).
    rows = w6.run(quick=True)
    assert [(r["system"], r["max_in_flight"]) for r in rows] == [
        (s, k) for s in ("sync", "async") for k in (0, 1, 2, 4)
    ]
    for r in rows:
        assert r["completed"] == r["units"] == 2_000
        assert ("ratio" in r) == (r["max_in_flight"] > 0)


def test_the_racing_input_judge_case_completes_in_smoke_mode() -> None:
    # W6's time to first token with an input judge, sequential and racing, on both
    # simulators (virtual time; its figures are the benchmark's, not asserted here).
    rows = w6.ttft_rows(quick=True)
    assert {r["system"] for r in rows} == {"sync", "async"}
    for r in rows:
        assert r["racing_ttft_s"] > 0 and r["sequential_ttft_s"] > 0


def test_the_evals_overhead_bench_completes_in_smoke_mode() -> None:
    # bench/evals.py: every case of every way ran and passed (its times are not asserted)
    from bench import evals

    rows = evals.run(quick=True)
    assert [r["way"] for r in rows] == ["plain", "evaluate", "evaluate+results", "online"]
    for r in rows:
        assert r["completed"] == r["units"] == 20
        assert ("overhead_ms_per_case" in r) == (r["way"] != "plain")


def test_the_tree_bench_completes_every_run_in_smoke_mode() -> None:
    # bench.agents: each system at each size ran to its end with its model calls (every
    # run is checked as it goes); its figures are the benchmark's, not asserted here.
    proc = subprocess.run(
        [sys.executable, "-m", "bench.agents", "--smoke"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [(r["system"], r["k"], r["model_calls"]) for r in summary["results"]] == [
        (s, k, 2 + 4 * (k + 1)) for s in ("flat", "tree") for k in agents.SIZES
    ]
    assert {"per_step_ratio", "fixed_per_child", "whole_run_ratio"} <= set(summary)


def test_the_tree_bench_splits_a_step_from_a_child_start() -> None:
    # made-up costs: a step costs 10 in one run and 11 in the tree, each child 100 more
    calls = agents.model_calls
    per_run = {(s, k): (10 if s == "flat" else 11) * calls(k) + (400 if s == "tree" else 0)
               for s in agents.SYSTEMS for k in agents.SIZES}
    got = agents.split(per_run)
    assert (got["flat_per_step"], got["tree_per_step"]) == (10, 11)
    assert got["per_step_ratio"] == 1.1
    assert got["fixed_per_child"] == 100


@pytest.mark.slow
@pytest.mark.parametrize("case", [
    ["W1", "--size", "20"], ["W2", "--size", "3"], ["W3", "--size", "2", "--history", "20"],
    ["W3", "--whole", "--size", "1", "--history", "20"],
    ["W4", "--size", "3"], ["W4", "--size", "3", "--gc-off"],
    ["W2", "--size", "3", "--system", "pipeline_async"],
], ids=lambda c: "-".join(c))
def test_each_instruction_count_case_completes_without_valgrind(case: list[str]) -> None:
    # bench/instructions.py: what valgrind would count runs (and its checks pass) alone
    proc = subprocess.run(
        [sys.executable, "-m", "bench.instructions", "--child", *case],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_http_bench_runs_some_systems_against_a_paced_server(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Each asked system with its floor, the server pausing before each write.
    from bench import w5

    w5.main(["--n", "20", "--reps", "1", "--warm", "0", "--pause", "0.001",
             "--systems", "agent-async", "provider-gemini"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["pause"] == 0.001
    rows = summary["results"]
    assert [r["system"] for r in rows] == ["floor", "floor-gemini", "agent-async",
                                           "provider-gemini"]
    for r in rows:
        assert "error" not in r, r["error"]
        assert r["completed"] == r["units"] == 20 and r["ratio_min"] > 0


def test_the_w5_count_reads_socket_receives_from_the_callgrind_file(tmp_path: Path) -> None:
    # A callgrind file names a function once, then refers to it by its number; each call
    # site of a receive function is a `cfn=` line followed by its `calls=` line.
    from bench.instructions import socket_reads

    f = tmp_path / "cg.out"
    f.write_text(
        "fn=(1) _PyEval_EvalFrameDefault\n"
        "cfn=(2) sock_recv\ncalls=3 0x0\n0x0 40\n"
        "cfn=(3) sock_recv_into_impl\ncalls=2 0x0\n0x0 40\n"
        "cfn=(4) sock_recvfrom\ncalls=100 0x0\n0x0 40\n"  # not a receive this counts
        "fn=(5) other\n"
        "cfn=(2)\ncalls=4 0x0\n0x0 10\n"
        "cfn=(6) PyObject_Call\ncalls=7 0x0\n0x0 10\n"
    )
    assert socket_reads(f) == 3 + 2 + 4


def test_the_w4_bench_runs_under_both_harnesses() -> None:
    import anyio

    from bench import w4

    async def go(harness: w4.Harness) -> tuple[float, float, int]:
        return await w4.batch(w4.make_run(2, 0.001, anyio.sleep), 5, harness)

    for harness in w4.HARNESSES:
        wall, cpu, steps = anyio.run(go, harness)
        assert steps == 5 * 2 and wall > 0 and cpu > 0
    with pytest.raises(ValueError, match="harness"):
        anyio.run(go, "trio")  # type: ignore[arg-type]  # (not a harness: refused)


def test_the_w4_collector_walk_counts_collections_and_the_objects_they_walk() -> None:
    import gc

    import anyio

    from bench import w4

    walked = w4.Walked()
    gc.callbacks.append(walked)
    try:
        for generation in (0, 1, 2, 2):
            gc.collect(generation)
    finally:
        gc.callbacks.remove(walked)
    assert walked.collections == [1, 1, 2]
    # a full collection walks every tracked object; a young one only the young ones
    assert walked.objects[2] >= 2 * 1000 > walked.objects[0]

    async def go() -> w4.Walked:
        return await w4.collector_walk(w4.make_run(2, 0.001, anyio.sleep), 20)

    threshold = gc.get_threshold()
    hooks = list(gc.callbacks)
    gc.set_threshold(50)  # (a small batch starts young collections)
    try:
        walked = anyio.run(go)
    finally:
        gc.set_threshold(*threshold)
    assert gc.callbacks == hooks  # the hook is gone
    assert walked.collections[0] > 0 and walked.objects[0] > 0
