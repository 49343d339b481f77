"""An approximate (HNSW) index of one scope's vectors for the SQLite store: usearch's.

The index is derived data: the SQLite rows stay the truth. Its labels are the rows' write
sequence numbers (`vseq`), so the store brings it up to date from what was written since
(`seen`) and from the tombstones of rows replaced or deleted since (`tseen`), and looks
each candidate up by its label: a candidate whose row is gone, changed or outside the
scope is dropped, and the kept ones are scored exactly from the stored vector. Kept in a
file beside the database (one per scope), with a header the store checks before use
(format, the database's identity, the scope, the dimension count, how far it had read).

Why usearch (bench/recall.py, docs/memory-stores.md): kept up (frequent releases), wheels
for every platform, removal by label, save and restore from bytes, and queries well under
a millisecond at 100,000 vectors; hnswlib was faster to build here but has had no release
since 2023 and builds from source, faiss's HNSW cannot remove a vector, voyager was the
slowest to build.
"""

from __future__ import annotations

import math
import os
import struct
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from interpreters.memory.store import MemoryStoreError

FORMAT = 1
"""The header's format; a file of another is rebuilt, never read."""

_MAGIC = b"pipeline-agents vector index\n"
_CONNECTIVITY = 16  # HNSW's M: edges per node (usearch's default)
_EXPANSION_ADD = 64  # candidates while inserting: half of usearch's 128, for shorter
# builds (bench/recall.py measures the recall with it)
_EXPANSION_SEARCH = 64
"""usearch's search width (HNSW's ef) up to `_WIDE_FROM` vectors (`search_width`)."""
_WIDE_FROM = 100_000
_WIDEST = 512
_BATCH = 4096  # rows added per call: a build can stop between two


def search_width(size: int) -> int:
    """The search width for an index of `size` vectors: a graph of more vectors needs a
    wider search for the same recall (bench/recall.py: recall at 5 of 0.99 at 100,000
    with 64, 0.90 at a million; 0.95-0.96 at a million with its 203), so past
    `_WIDE_FROM` it grows as the square root of the size, up to `_WIDEST`."""
    if size <= _WIDE_FROM:
        return _EXPANSION_SEARCH
    return min(_WIDEST, math.ceil(_EXPANSION_SEARCH * math.sqrt(size / _WIDE_FROM)))


class VectorIndexNotInstalled(MemoryStoreError, ImportError):
    """`vector_index="hnsw"` was asked for without its package (the memory-ann extra)."""


def require_usearch() -> None:
    """VectorIndexNotInstalled unless usearch (and numpy) import."""
    try:
        import numpy  # noqa: F401
        import usearch.index  # noqa: F401
    except ImportError as e:
        raise VectorIndexNotInstalled(
            "vector_index='hnsw' needs usearch: pip install 'pipeline-agents[memory-ann]' "
            f"({e})"
        ) from None


class Header(msgspec.Struct, frozen=True, kw_only=True):
    """What a saved index says of itself; checked before it is used."""

    format: int
    database: str
    scope: tuple[str, ...]
    dim: int
    seen: int
    tseen: int


class ApproxIndex:
    """One scope's HNSW index over unit vectors (inner product), labelled by `vseq`."""

    def __init__(self, scope: tuple[str, ...], dim: int, index: Any = None) -> None:
        from usearch.index import Index

        self.scope = scope
        self.dim = dim
        self.seen = 0  # the last vseq read
        self.tseen = 0  # the last tombstone read
        self.dirty = True  # changed since it was saved
        self._nbytes: int | None = None
        self._width = _EXPANSION_SEARCH  # the search width set in usearch
        self._index: Any = index if index is not None else Index(
            ndim=dim, metric="ip", dtype="f32", connectivity=_CONNECTIVITY,
            expansion_add=_EXPANSION_ADD, expansion_search=_EXPANSION_SEARCH,
        )

    def __len__(self) -> int:
        return len(self._index)

    @property
    def nbytes(self) -> int:
        """The index's memory (read from usearch once per change: it is not free)."""
        if self._nbytes is None:
            self._nbytes = int(self._index.memory_usage)
        return self._nbytes

    def add(self, labels: Sequence[int], raw: bytes) -> None:
        """Rows of float32 bytes, one per label (a label already held is replaced)."""
        import numpy as np

        if not labels:
            return
        keys = np.asarray(labels, dtype=np.uint64)
        held = self._index.contains(keys)
        if held.any():
            self._index.remove(keys[held])
        matrix = np.frombuffer(raw, dtype="<f4").reshape(len(labels), self.dim)
        self._index.add(keys, matrix, threads=1)
        self.dirty, self._nbytes = True, None

    def build(self, labels: Sequence[int], raw: bytes, stop: Any = None) -> bool:
        """Add every row, in batches, on every core; False when `stop` (an Event) was set
        between two batches."""
        import numpy as np

        keys = np.asarray(labels, dtype=np.uint64)
        matrix = np.frombuffer(raw, dtype="<f4").reshape(len(labels), self.dim)
        for i in range(0, len(labels), _BATCH):
            if stop is not None and stop.is_set():
                return False
            self._index.add(keys[i : i + _BATCH], matrix[i : i + _BATCH], threads=0)
        self.dirty, self._nbytes = True, None
        return True

    def remove(self, labels: Sequence[int]) -> None:
        import numpy as np

        if labels:
            keys = np.asarray(labels, dtype=np.uint64)
            held = self._index.contains(keys)
            if held.any():
                self._index.remove(keys[held])
                self.dirty, self._nbytes = True, None

    def candidates(self, query: bytes, n: int) -> list[int]:
        """The labels of (about) the `n` nearest rows."""
        import numpy as np

        if n == 0 or len(self._index) == 0:
            return []
        width = search_width(len(self._index))
        if width != self._width:
            self._index.expansion_search = self._width = width
        found = self._index.search(np.frombuffer(query, dtype="<f4"), n, threads=1)
        return [int(k) for k in found.keys]

    # --- the file ------------------------------------------------------------------------
    def save(self, path: Path, database: str) -> None:
        """Written whole to a temporary file beside `path`, then moved over it (another
        process reads the old file or the new one, never half of one)."""
        header = msgspec.json.encode(Header(
            format=FORMAT, database=database, scope=self.scope, dim=self.dim,
            seen=self.seen, tseen=self.tseen,
        ))
        body = self._index.save()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + struct.pack("<I", len(header)) + header)
                f.write(body)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self.dirty = False

    @classmethod
    def load(
        cls, path: Path, database: str, scope: tuple[str, ...], seen_max: int, tseen_max: int
    ) -> ApproxIndex | None:
        """The index saved at `path` if its header is this database's, this scope's, and
        read no further than the database has (else None: it is rebuilt)."""
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        if not raw.startswith(_MAGIC) or len(raw) < len(_MAGIC) + 4:
            return None
        at = len(_MAGIC)
        (size,) = struct.unpack_from("<I", raw, at)
        try:
            header = msgspec.json.decode(raw[at + 4 : at + 4 + size], type=Header)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        if (header.format != FORMAT or header.database != database or header.scope != scope
                or header.seen > seen_max or header.tseen > tseen_max):
            return None
        from usearch.index import Index

        index: Any  # (its stubs make the settable parameters read-only)
        try:
            index = Index.restore(raw[at + 4 + size :])
        except (RuntimeError, ValueError):
            return None
        if index is None or index.ndim != header.dim:
            return None
        index.expansion_add = _EXPANSION_ADD
        index.expansion_search = _EXPANSION_SEARCH
        loaded = cls(scope, header.dim, index)
        loaded.seen, loaded.tseen, loaded.dirty = header.seen, header.tseen, False
        return loaded
