"""Semantic recall on the SQLite store at N vectors: the exact scan against the HNSW index
(`vector_index="hnsw"`, the memory-ann extra), and the index's recall against the scan.

::

    python -m bench.recall                              # 1,000, 10,000 and 100,000
    python -m bench.recall --sizes 1000000 --queries 50  # one million: built once, timed
    python -m bench.recall --sizes 100000 1000000        # (or 100000,1000000)
    python -m bench.recall --sizes 1000000 --widths 256 320  # also at these search widths
    python -m bench.recall --smoke                      # tiny, for CI (not for reporting)

Each size is one SQLite file holding one thread of N vectors (`--dim`, 384 by default):
seeded, clustered unit vectors (N / 100 centres, noise of about the centres' spread, as
embeddings of related texts are; `--data random` for uniform ones, the hard case for any
approximate index). Two stores over the file: one exact (every vector held in memory,
scanned with numpy), one with the HNSW index, built once (`build_vector_index`, timed) and
saved beside the file. Then `--queries` searches of k = 5 from the same distribution,
each store warmed first: the median and 90th percentile search time of each, and the
recall at 5 of the index (the share of the exact top 5 it returns) at its search width
(`ef`, chosen by the index's size: `interpreters.memory.ann.search_width`; `--widths`: the
same index searched at other widths too). Also the index's
memory and file size, and how long a restart takes to load it. Prints a table, then one
JSON line with every figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.summary import summary
from interpreters.memory import SQLiteStore, ann
from interpreters.memory.ann import search_width
from interpreters.memory.store import Vector

K = 5


def vectors(n: int, dim: int, seed: int, data: str, centres: Any) -> Any:
    import numpy as np

    rng = np.random.default_rng(seed)
    if data == "random":
        x = rng.standard_normal((n, dim), dtype=np.float32)
    else:
        picked = centres[rng.integers(0, len(centres), n)]
        x = picked + 0.8 * rng.standard_normal((n, dim), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def fill(store: SQLiteStore, matrix: Any) -> None:
    batch = 5000
    for start in range(0, len(matrix), batch):
        rows = matrix[start : start + batch]
        store.save_vectors("t", [(f"m{start + i:08d}", tuple(v.tolist()))
                                 for i, v in enumerate(rows)], resource_id="u")


def timed(store: SQLiteStore, queries: list[Vector]) -> tuple[list[float], list[list[str]]]:
    store.search(queries[0], k=K, thread_id="t")  # warm: the scope read, the index loaded
    times, found = [], []
    for q in queries:
        t = time.perf_counter()
        hits = store.search(q, k=K, thread_id="t")
        times.append((time.perf_counter() - t) * 1e3)
        found.append([h.message_id for h in hits])
    return times, found


def p90(xs: list[float]) -> float:
    return sorted(xs)[int(0.9 * (len(xs) - 1))]


def recall_of(want: list[list[str]], got: list[list[str]]) -> float:
    """The share of the exact top K the index returned."""
    return sum(len(set(w) & set(g)) for w, g in zip(want, got, strict=True)) / (K * len(want))


def at_width(store: SQLiteStore, queries: list[Vector], want: list[list[str]],
             width: int) -> dict[str, float]:
    """The index searched at one search width instead of the one its size chooses."""
    chosen = ann.search_width
    ann.search_width = lambda size: width  # read by the index at every search
    try:
        ms, got = timed(store, queries)
    finally:
        ann.search_width = chosen
    return {"width": width, "hnsw_ms": statistics.median(ms), "hnsw_p90_ms": p90(ms),
            "recall_at_5": recall_of(want, got)}


def measure(folder: Path, n: int, dim: int, queries: int, data: str,
            widths: list[int]) -> dict[str, object]:
    import numpy as np

    centres = np.random.default_rng(42).standard_normal((max(10, n // 100), dim)).astype(
        np.float32)
    path = folder / f"recall-{n}.db"
    matrix = vectors(n, dim, n, data, centres)
    t = time.perf_counter()
    exact = SQLiteStore(path, cache_bytes=16 << 30)
    fill(exact, matrix)
    fill_s = time.perf_counter() - t
    qs = [tuple(v.tolist()) for v in vectors(queries, dim, 1, data, centres)]
    approx = SQLiteStore(path, vector_index="hnsw", hnsw_min_vectors=1, hnsw_cache_bytes=16 << 30)
    try:
        t = time.perf_counter()
        assert approx.build_vector_index(thread_id="t") == n
        build_s = time.perf_counter() - t
        assert approx._approx is not None
        index = approx._approx._indexes[("thread", "t")]
        index_mb = index.nbytes / 2**20
        file_path = approx._approx.path(("thread", "t"))
        file_mb = file_path.stat().st_size / 2**20 if file_path else 0.0
        exact_ms, want = timed(exact, qs)
        approx_ms, got = timed(approx, qs)
        assert ("thread", "t") in approx._approx._indexes, "the index did not answer"
        at_widths = [at_width(approx, qs, want, w) for w in widths]
    finally:
        approx.close()
        exact.close()
    restart = SQLiteStore(path, vector_index="hnsw", hnsw_min_vectors=1,
                          hnsw_cache_bytes=16 << 30)
    try:
        t = time.perf_counter()
        restart.search(qs[0], k=K, thread_id="t")
        load_s = time.perf_counter() - t
        assert restart._approx is not None and ("thread", "t") in restart._approx._indexes
    finally:
        restart.close()
    recall = recall_of(want, got)
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        p.unlink(missing_ok=True)
    return {"vectors": n, "dim": dim, "data": data, "queries": len(qs),
            "exact_ms": statistics.median(exact_ms), "exact_p90_ms": p90(exact_ms),
            "hnsw_ms": statistics.median(approx_ms), "hnsw_p90_ms": p90(approx_ms),
            "recall_at_5": recall, "search_width": search_width(n), "build_s": build_s,
            "load_s": load_s,
            "index_mib": index_mb, "file_mib": file_mb, "fill_s": fill_s,
            "at_widths": at_widths}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.recall")
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--sizes", nargs="+", default=["1000,10000,100000"])
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--data", choices=("clustered", "random"), default="clustered")
    p.add_argument("--dir", default=None, help="where the files go (default: a temporary one)")
    p.add_argument("--widths", nargs="*", type=int, default=[],
                   help="also search each index at these search widths (recall and time)")
    a = p.parse_args(argv)
    sizes = [300, 1000] if a.smoke else [int(s) for arg in a.sizes for s in arg.split(",") if s]
    dim, queries = (16, 20) if a.smoke else (a.dim, a.queries)

    t0 = time.perf_counter()
    load_start = os.getloadavg()
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        for n in sizes:
            rows.append(measure(Path(tmp), n, dim, queries, a.data, a.widths))
    load_end = os.getloadavg()
    loads = " / ".join(" ".join(f"{x:.2f}" for x in ld) for ld in (load_start, load_end))
    print(f"recall k={K} in one thread of N vectors, {dim} dimensions, {a.data}; {queries} "
          f"queries, wall time (perf_counter), ms; load average (1, 5, 15 min) at start / "
          f"end: {loads}")
    print(f"{'vectors':>10}{'exact':>9}{'p90':>8}{'hnsw':>9}{'p90':>8}{'recall@5':>10}"
          f"{'ef':>5}{'build s':>9}{'load s':>8}{'MiB':>8}{'file MiB':>10}")
    for r in rows:
        print(f"{r['vectors']!s:>10}" + "".join(f"{float(str(r[k])):>{w}.{d}f}" for k, w, d in (
            ("exact_ms", 9, 2), ("exact_p90_ms", 8, 2), ("hnsw_ms", 9, 3),
            ("hnsw_p90_ms", 8, 3), ("recall_at_5", 10, 3), ("search_width", 5, 0),
            ("build_s", 9, 1),
            ("load_s", 8, 2), ("index_mib", 8, 0), ("file_mib", 10, 0))))
        for wr in r["at_widths"]:  # type: ignore[attr-defined]
            print(f"{'':>10}{'at width':>17}{wr['hnsw_ms']:>9.3f}{wr['hnsw_p90_ms']:>8.3f}"
                  f"{wr['recall_at_5']:>10.3f}{wr['width']:>5}")
    params = {"sizes": sizes, "dim": dim, "queries": queries, "k": K, "data": a.data,
              "smoke": a.smoke}
    print(summary(params, "perf_counter", (load_start, load_end), t0, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
