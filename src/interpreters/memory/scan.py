"""Exact vector search over stored float32 rows: the k best by cosine, best first.

The SQLite store reads the scope's rows (one indexed query) and scores them here: with
numpy when it is importable (a matrix-vector product in C), else in Python (a dot product
per row; bench/memory.py measures both). Ties go to the smaller message id, as in every
store.
"""

from __future__ import annotations

import heapq
import operator
from collections.abc import Sequence
from typing import Literal

from interpreters.memory.rows import dimension_error, pack, unpack
from interpreters.memory.store import RecallHit, Vector

Scorer = Literal["numpy", "python"]

Row = tuple[str, str, int, bytes]
"""(message id, thread id, dimensions, packed vector)."""


def numpy_available() -> bool:
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True


def _check_dims(rows: Sequence[Row], dim: int) -> None:
    for row in rows:
        if row[2] != dim:
            raise dimension_error(row[2], dim)


def top_k(rows: Sequence[Row], query: Vector, k: int, scorer: Scorer) -> tuple[RecallHit, ...]:
    """The k rows most similar to `query` (normalized), best first."""
    if k == 0 or not rows:
        return ()
    _check_dims(rows, len(query))
    if scorer == "numpy":
        candidates = _numpy_candidates(rows, query, k)
    else:
        candidates = list(zip(range(len(rows)), _python_scores(rows, query), strict=True))
    best = heapq.nsmallest(k, candidates, key=lambda c: (-c[1], rows[c[0]][0]))
    return tuple(
        RecallHit(message_id=rows[i][0], thread_id=rows[i][1], score=s) for i, s in best
    )


def _python_scores(rows: Sequence[Row], query: Vector) -> list[float]:
    q = unpack(pack(query))  # float32, as the rows are
    mul = operator.mul
    return [sum(map(mul, q, unpack(row[3]))) for row in rows]


def _numpy_candidates(
    rows: Sequence[Row], query: Vector, k: int
) -> list[tuple[int, float]]:
    """The rows scoring at least the k-th best score (ties at the edge included, so the
    message-id tie-break sees them all), with their scores."""
    import numpy as np

    matrix = np.frombuffer(b"".join(row[3] for row in rows), dtype="<f4")
    matrix = matrix.reshape(len(rows), len(query))
    scores = matrix @ np.frombuffer(pack(query), dtype="<f4")
    if k < len(rows):
        edge = np.partition(scores, len(rows) - k)[len(rows) - k]
        picked = np.flatnonzero(scores >= edge)
    else:
        picked = np.arange(len(rows))
    return [(int(i), float(scores[i])) for i in picked]
