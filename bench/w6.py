"""W6 of bench/WORKLOADS.md: a judged stream's throughput, on the simulator's virtual time.

    python -m bench.w6              # N = 40,000 characters at R = 1,000 characters/s
    python -m bench.w6 --quick      # smoke mode: N = 2,000, W = 100, L = 0.1 s

The scripted model streams N characters in deltas of 5 ("word ") at R characters per
second; `ModerationProcessor` judges them in windows of W characters, each verdict taking
L virtual seconds. Figure: the characters per second the consumer receives (from the
run's start to the last text delta it got) as a ratio to the same stream unguarded, on the
sync `Simulator` and on the `AsyncSimulator` (asyncio); next to it the ratio a judge
waited for window by window would give, (W / R) / (W / R + L), and the judge calls per
1,000 characters (stream windows and the step check), against one call per delta for a
judge of every chunk (Mastra's per-chunk stream processors: 1,000 / 5 = 200).

The goal: a ratio of at least 0.9 when the judge keeps up, in-flight windows x W / L >= R.

Beside it, the time to first token with a judge-using input guard (`ModerationProcessor`
as an input processor, its verdict taking L_guard) in front of a model whose first token
takes L_model: sequential (the guard, then the model: the sum) and racing
(`concurrent=True`: both at once). Goal: racing within 5% of max(L_guard, L_model).
All time is virtual: the figures do not depend on the machine.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from typing import Any

import anyio
import msgspec

from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator
from pipeline import Agent
from pipeline.processors import ModerationProcessor
from pipeline.values.chunks import TextDelta
from pipeline.values.model import ModelRequest

DELTA = "word "
GOAL_RATIO = 0.9
VERDICT = msgspec.json.encode({"category_scores": {"hate": 0.0}}).decode()


class Setup(msgspec.Struct, frozen=True):
    chars: int
    rate: float
    """Characters per second the model streams (R)."""
    window: int
    latency: float
    """Virtual seconds per judge call (L)."""
    in_flight: int
    """`max_in_flight`; 0: no guard (the unguarded stream)."""

    @property
    def keeps_up(self) -> bool:
        return self.in_flight * self.window / self.latency >= self.rate

    def agent(self) -> Agent:
        if not self.in_flight:
            return Agent.create("m")
        options: dict[str, Any] = {}
        if "max_in_flight" in inspect.signature(ModerationProcessor).parameters:
            options["max_in_flight"] = self.in_flight  # (a checkout before pipelining: none)
        guard = ModerationProcessor("judge", categories=("hate",), stream_window=self.window,
                                    **options)
        return Agent.create("m", output_processors=[guard])

    def script(self) -> Say:
        return Say([DELTA] * (self.chars // len(DELTA)), chunk_latency=len(DELTA) / self.rate)


class Judge:
    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.calls = 0

    def __call__(self, request: ModelRequest) -> Say:
        self.calls += 1
        return Say(VERDICT, latency=self.latency)


def on_sync(s: Setup) -> tuple[float, int, int]:
    """Virtual seconds to the last text delta, characters received, judge calls."""
    judge = Judge(s.latency)
    sim = Simulator(ScriptedModel([s.script()]), models={"judge": ScriptedModel(judge)},
                    start=0.0)
    last, got = 0.0, 0
    with sim.stream(s.agent(), "hi") as stream:
        for c in stream:
            if type(c) is TextDelta:
                last, got = sim.clock.now, got + len(c.text)
    if stream.result.status != "finished":
        raise AssertionError(stream.result.error)
    return last, got, judge.calls


def on_async(s: Setup) -> tuple[float, int, int]:
    async def go() -> tuple[float, int, int]:
        judge = Judge(s.latency)
        sim = AsyncSimulator(ScriptedModel([s.script()]),
                             models={"judge": ScriptedModel(judge)}, start=0.0)
        last, got = 0.0, 0
        async with sim.stream(s.agent(), "hi") as stream:
            async for c in stream:
                if type(c) is TextDelta:
                    last, got = sim.clock.now, got + len(c.text)
        if stream.result.status != "finished":
            raise AssertionError(stream.result.error)
        return last, got, judge.calls

    return anyio.run(go)


def setups(quick: bool) -> list[Setup]:
    chars, window, latency = (2_000, 100, 0.1) if quick else (40_000, 500, 1.0)
    base = Setup(chars, 1_000.0, window, latency, 0)
    # k x W / L against R: k = 1 cannot keep up (500 < 1,000 characters/s), k = 2 just
    # does, k = 4 with room to spare (2,000)
    return [msgspec.structs.replace(base, in_flight=k) for k in (0, 1, 2, 4)]


def run(quick: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for system, measure in (("sync", on_sync), ("async", on_async)):
        plain: float | None = None
        for s in setups(quick):
            print(f"[W6] {system} max_in_flight={s.in_flight}", file=sys.stderr, flush=True)
            seconds, got, calls = measure(s)
            if got != s.chars:
                raise AssertionError(f"{got} characters received, expected {s.chars}")
            row: dict[str, Any] = {
                "system": system, "workload": "W6", "units": s.chars,
                "max_in_flight": s.in_flight, "window": s.window, "latency_s": s.latency,
                "rate_chars_s": s.rate, "virtual_s": seconds, "completed": got,
                "chars_per_s": got / seconds,
            }
            if s.in_flight == 0:
                plain = seconds
            else:
                assert plain is not None
                per_window = s.window / s.rate
                row |= {
                    "ratio": plain / seconds,
                    "ratio_window_by_window": per_window / (per_window + s.latency),
                    "judge_calls_per_1000_chars": calls * 1000 / s.chars,
                    "per_chunk_judge_calls_per_1000_chars": 1000 / len(DELTA),
                    "keeps_up": s.keeps_up,
                }
                if s.keeps_up:
                    row |= {"goal_ratio": GOAL_RATIO, "met": row["ratio"] >= GOAL_RATIO}
            rows.append(row)
    return rows


TTFT_GOAL = 1.05
"""Racing: the first token within 5% of max(L_guard, L_model)."""


def first_token_at(guard_latency: float, model_latency: float, *, concurrent: bool | None,
                   on_async: bool) -> float:
    """Virtual seconds to the first text delta (`concurrent` None: no guard)."""
    script = Say([DELTA] * 20, latency=model_latency, chunk_latency=0.01)
    judge = ScriptedModel(Judge(guard_latency))
    processors = [] if concurrent is None else [
        ModerationProcessor("judge", categories=("hate",), moderate_stream=False,
                            concurrent=concurrent)
    ]
    agent = Agent.create("m", input_processors=processors)

    async def go() -> float:
        sim = AsyncSimulator(ScriptedModel([script]), models={"judge": judge}, start=0.0)
        async with sim.stream(agent, "hi") as stream:
            async for c in stream:
                if type(c) is TextDelta:
                    return sim.clock.now
        raise AssertionError(stream.result.error)

    if on_async:
        return anyio.run(go)
    sim = Simulator(ScriptedModel([script]), models={"judge": judge}, start=0.0)
    with sim.stream(agent, "hi") as stream:
        for c in stream:
            if type(c) is TextDelta:
                return sim.clock.now
    raise AssertionError(stream.result.error)


def ttft_rows(quick: bool) -> list[dict[str, Any]]:
    """TTFT with a racing input judge against the sequential one (see the module doc)."""
    pairs = ((0.5, 0.3), (0.3, 0.5)) if quick else ((1.0, 0.4), (0.4, 1.0), (0.8, 0.8))
    rows: list[dict[str, Any]] = []
    for system, on_async in (("sync", False), ("async", True)):
        for guard, model in pairs:
            bare = first_token_at(guard, model, concurrent=None, on_async=on_async)
            seq = first_token_at(guard, model, concurrent=False, on_async=on_async)
            race = first_token_at(guard, model, concurrent=True, on_async=on_async)
            bound = max(guard, bare)
            rows.append({
                "system": system, "workload": "W6-ttft", "guard_s": guard, "model_s": model,
                "unguarded_ttft_s": bare, "sequential_ttft_s": seq, "racing_ttft_s": race,
                "ratio_to_max": race / bound, "goal_ratio": TTFT_GOAL,
                "met": race <= TTFT_GOAL * bound,
            })
    return rows


def print_ttft(rows: list[dict[str, Any]]) -> None:
    print("\nW6: time to first token with an input judge, virtual time")
    for r in rows:
        print(f"  {r['system']:6} L_guard={r['guard_s']:.2f}s L_model={r['model_s']:.2f}s  "
              f"sequential {r['sequential_ttft_s']:.3f}s  racing {r['racing_ttft_s']:.3f}s  "
              f"(x{r['ratio_to_max']:.3f} of max; goal {r['goal_ratio']:.2f} "
              f"{'met' if r['met'] else 'MISSED'})")


def print_rows(rows: list[dict[str, Any]]) -> None:
    print("\nW6: judged stream throughput, virtual time (R characters/s, W, L per window)")
    for r in rows:
        head = f"  {r['system']:6} k={r['max_in_flight']}  {r['chars_per_s']:8.1f} chars/s"
        if "ratio" not in r:
            print(f"{head}  (unguarded)")
            continue
        goal = (f"  goal {r['goal_ratio']:.2f} {'met' if r['met'] else 'MISSED'}"
                if "goal_ratio" in r else "  (judge cannot keep up)")
        print(f"{head}  ratio {r['ratio']:.3f} (window by window "
              f"{r['ratio_window_by_window']:.3f}); judge calls / 1,000 chars "
              f"{r['judge_calls_per_1000_chars']:.2f} (per chunk "
              f"{r['per_chunk_judge_calls_per_1000_chars']:.0f}){goal}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke mode: N = 2,000 characters")
    args = ap.parse_args(argv)
    rows = run(args.quick)
    print_rows(rows)
    ttft = ttft_rows(args.quick)
    print_ttft(ttft)
    print(json.dumps({"workload": "W6", "results": rows, "ttft": ttft}))


if __name__ == "__main__":
    main()
