"""Exact vector search over stored float32 rows: the k best by cosine, best first.

The SQLite store scores a scope's vectors here: with numpy when it is importable (a
matrix-vector product in C), else in Python (a dot product per row; bench/memory.py
measures both). Between searches it keeps each scope's vectors in memory (`Index`), read
once and then only the rows written since, so a search reads from the file what changed,
not the whole scope. Ties go to the smaller message id, as in every store.
"""

from __future__ import annotations

import heapq
import operator
from array import array
from collections.abc import Sequence
from typing import Any, Literal

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
    """The rows that may be among the k best, with their scores."""
    import numpy as np

    matrix = np.frombuffer(b"".join(row[3] for row in rows), dtype="<f4")
    matrix = matrix.reshape(len(rows), len(query))
    return _best(_dot(matrix, np.frombuffer(pack(query), dtype="<f4")), k)


def _dot(matrix: Any, q: Any) -> Any:
    """Each row's dot product with `q`. einsum's own loop, not BLAS: OpenBLAS's threads,
    on a machine whose cores are busy, made one 10,000 x 384 product 20-50 times slower
    (bench/memory.py)."""
    import numpy as np

    return np.einsum("ij,j->i", matrix, q)


def _best(scores: Any, k: int) -> list[tuple[int, float]]:
    """The rows of `scores` (a numpy vector) at or above the k-th best score (ties at the
    edge included, so the message-id tie-break sees them all)."""
    import numpy as np

    n = len(scores)
    if k < n:
        edge = np.partition(scores, n - k)[n - k]
        picked = np.flatnonzero(scores >= edge)
    else:
        picked = np.arange(n)
    return [(int(i), float(scores[i])) for i in picked]


class Index:
    """One scope's vectors held in memory between searches (all of one dimension count),
    brought up to date from the rows written since (`seen`: the last write sequence
    number read). Scored like `top_k`."""

    def __init__(self, scorer: Scorer) -> None:
        self.scorer = scorer
        self.dim = 0
        self.seen = 0
        self.tseen = 0  # the last tombstone read (rows replaced or deleted)
        self.ids: list[str] = []
        self.threads: list[str] = []
        self._pos: dict[tuple[str, str], int] = {}
        self._rows: list[array[float]] = []  # the python scorer's
        self._matrix: Any = None  # numpy's: a float32 buffer, grown by doubling

    @property
    def nbytes(self) -> int:
        return len(self.ids) * self.dim * 4

    def fits(self, dim: int) -> bool:
        """Whether a row of `dim` dimensions can be held (one count per index)."""
        return not self.ids or dim == self.dim

    def put(self, thread_id: str, message_id: str, raw: bytes) -> None:
        dim = len(raw) // 4
        if not self.ids:
            self.dim = dim
        at = self._pos.get((thread_id, message_id))
        if at is None:
            at = len(self.ids)
            self._pos[(thread_id, message_id)] = at
            self.ids.append(message_id)
            self.threads.append(thread_id)
            if self.scorer == "python":
                self._rows.append(unpack(raw))
            else:
                self._grow(at + 1)
        if self.scorer == "python":
            self._rows[at] = unpack(raw)
        else:
            import numpy as np

            self._matrix[at] = np.frombuffer(raw, dtype="<f4")

    def drop(self, thread_id: str, message_id: str) -> None:
        """Forget a row (it left the scope): the last row takes its place."""
        at = self._pos.pop((thread_id, message_id), None)
        if at is None:
            return
        last = len(self.ids) - 1
        if at != last:
            moved = (self.threads[last], self.ids[last])
            self.ids[at], self.threads[at] = moved[1], moved[0]
            self._pos[moved] = at
            if self.scorer == "python":
                self._rows[at] = self._rows[last]
            else:
                self._matrix[at] = self._matrix[last]
        self.ids.pop()
        self.threads.pop()
        if self.scorer == "python":
            self._rows.pop()

    def _grow(self, n: int) -> None:
        import numpy as np

        if self._matrix is None or self._matrix.shape[0] < n:
            size = max(64, n, 0 if self._matrix is None else 2 * self._matrix.shape[0])
            grown = np.zeros((size, self.dim), dtype="<f4")
            if self._matrix is not None:
                grown[: self._matrix.shape[0]] = self._matrix
            self._matrix = grown

    def top(self, query: Vector, k: int) -> tuple[RecallHit, ...]:
        n = len(self.ids)
        if k == 0 or n == 0:
            return ()
        if len(query) != self.dim:
            raise dimension_error(self.dim, len(query))
        if self.scorer == "python":
            q = unpack(pack(query))
            mul = operator.mul
            candidates = [(i, sum(map(mul, q, row))) for i, row in enumerate(self._rows)]
        else:
            import numpy as np

            scores = _dot(self._matrix[:n], np.frombuffer(pack(query), dtype="<f4"))
            candidates = _best(scores, k)
        best = heapq.nsmallest(k, candidates, key=lambda c: (-c[1], self.ids[c[0]]))
        return tuple(
            RecallHit(message_id=self.ids[i], thread_id=self.threads[i], score=s)
            for i, s in best
        )
