"""Which evaluation rows the classifier's training sources already hold: an exact copy
(the same words, case and punctuation aside) or a near copy (at least half of the row's
word 8-grams in one training text). A benchmark row found there is not held out.

The check needs the training texts' 8-grams, as digests. `python -m bench.injection
--data DIR` takes them from the training sources in DIR (training/fetch_sources.py);
offline, the vendored sample is checked against `bench/data/injection_overlap.json.gz`:
each training text's 8-gram digests that occur in the sample, and the digests of the
training texts whose words are a sample row's. `training/make_bench_sample.py` writes
both files from the sources at their recorded commits.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate, pairwise
from pathlib import Path
from typing import Literal

from training.sources import Row

GRAM = 8
"""Words per n-gram."""
NEAR = 0.5
"""The share of a row's 8-grams one training text must hold for a near copy."""
OVERLAP = Path(__file__).resolve().parent / "data/injection_overlap.json.gz"
"""The training texts' fingerprints as the vendored sample's check needs them."""

_WORD = re.compile(r"\w+")


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def exact_key(text: str) -> str:
    """A digest of the text's words: the same for copies that differ in case, spacing
    or punctuation only."""
    return _digest(" ".join(words(text)))


def grams(text: str) -> frozenset[str]:
    """Digests of the text's word 8-grams (none for a text of fewer than 8 words)."""
    w = words(text)
    return frozenset(_digest(" ".join(w[i:i + GRAM])) for i in range(len(w) - GRAM + 1))


@dataclass(frozen=True)
class Fingerprints:
    """Training texts as the check reads them."""

    sources: tuple[str, ...]
    """The training sources they come from (the check covers these only)."""
    exact: dict[str, str]
    """`exact_key` -> the training source of that text."""
    texts: tuple[tuple[str, frozenset[str]], ...]
    """(training source, `grams`) per training text."""


def fingerprints(rows: Iterable[Row], sources: Sequence[str],
                 keep: frozenset[str] | None = None) -> Fingerprints:
    """The fingerprints of training `rows`; with `keep`, only those 8-grams (and texts
    holding one)."""
    exact: dict[str, str] = {}
    texts: list[tuple[str, frozenset[str]]] = []
    for r in rows:
        exact.setdefault(exact_key(r.text), r.source)
        g = grams(r.text)
        if keep is not None:
            g &= keep
        if g:
            texts.append((r.source, g))
    return Fingerprints(tuple(sources), exact, tuple(texts))


@dataclass(frozen=True)
class Seen:
    """An evaluation row a training source holds."""

    how: Literal["exact", "near"]
    source: str
    share: float
    """Of the row's 8-grams, the share the closest training text holds."""


def check(rows: Sequence[Row], train: Fingerprints) -> list[Seen | None]:
    """Per row: how a training source holds it, or None (held out)."""
    row_grams = [grams(r.text) for r in rows]
    where: dict[str, list[int]] = defaultdict(list)  # 8-gram -> the rows holding it
    for i, g in enumerate(row_grams):
        for x in g:
            where[x].append(i)
    best = [0.0] * len(rows)
    best_source = [""] * len(rows)
    for source, g in train.texts:
        shared: dict[int, int] = defaultdict(int)
        for x in g:
            for i in where.get(x, ()):
                shared[i] += 1
        for i, n in shared.items():
            if n / len(row_grams[i]) > best[i]:
                best[i], best_source[i] = n / len(row_grams[i]), source
    out: list[Seen | None] = []
    for i, r in enumerate(rows):
        copied = train.exact.get(exact_key(r.text))
        if copied is not None:
            out.append(Seen("exact", copied, 1.0))
        elif best[i] >= NEAR:
            out.append(Seen("near", best_source[i], best[i]))
        else:
            out.append(None)
    return out


def sample_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_overlap(sample: list[Row], sample_path: Path, train: Iterable[Row],
                  sources: Sequence[str], out: Path = OVERLAP) -> None:
    """The fingerprints of `train` the check of `sample` needs, for `read_overlap`."""
    keep = frozenset().union(*(grams(r.text) for r in sample))
    keys = {exact_key(r.text) for r in sample}
    fp = fingerprints(train, sources, keep)
    table = sorted(frozenset().union(*(g for _, g in fp.texts)))
    index = {x: i for i, x in enumerate(table)}

    def steps(g: frozenset[str]) -> list[int]:  # sorted indexes, each from the one before
        at = sorted(index[x] for x in g)
        return [at[0], *(b - a for a, b in pairwise(at))]

    data = {
        "about": "bench/contamination.py: the word 8-gram digests (blake2b, 8 bytes) the "
                 "sample and the training texts share, each text's as steps through that "
                 "sorted table; the digests of training texts whose words are a sample row's",
        "sample_sha256": sample_digest(sample_path),
        "sources": list(sources),
        "exact": {k: s for k, s in sorted(fp.exact.items()) if k in keys},
        "grams": table,
        "texts": [[s, steps(g)] for s, g in fp.texts],
    }
    text = json.dumps(data, separators=(",", ":"))
    out.write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))  # reproducible


class StaleOverlap(ValueError):
    """The vendored fingerprints were made for another sample."""


def read_overlap(sample_path: Path, path: Path = OVERLAP) -> Fingerprints:
    """The vendored fingerprints; StaleOverlap when they are not the sample's."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    if data["sample_sha256"] != sample_digest(sample_path):
        raise StaleOverlap(f"{path.name} was made for another {sample_path.name}: run "
                           "training/make_bench_sample.py --data DIR again")
    table: list[str] = data["grams"]
    texts = tuple((str(s), frozenset(table[i] for i in accumulate(steps)))
                  for s, steps in data["texts"])
    return Fingerprints(tuple(data["sources"]), dict(data["exact"]), texts)


def main(argv: list[str] | None = None) -> dict[str, tuple[int, int]]:
    """How many rows of one source the other sources (training and evaluation) hold, and
    how many of theirs it holds: exact and near copies, by the test above.

    ::

        python -m bench.contamination --data DIR --source NAME
    """
    import argparse

    from training.sources import SOURCES

    ap = argparse.ArgumentParser(description="copies between one source and the others")
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--source", required=True)
    args = ap.parse_args(argv)
    rows = {s.name: s.rows(args.data) for s in SOURCES if s.present(args.data)}
    if args.source not in rows:
        raise SystemExit(f"{args.source}: not found in {args.data}")
    mine = rows.pop(args.source)
    out: dict[str, tuple[int, int]] = {}
    print(f"{args.source}: {len(mine)} rows; the other sources' rows it holds, and its "
          "rows they hold (exact / near copies)")
    for name, theirs in rows.items():
        held_here = check(theirs, fingerprints(mine, (args.source,)))
        held_there = check(mine, fingerprints(theirs, (name,)))
        counts = [(sum(s is not None and s.how == how for s in seen)) for seen in
                  (held_here, held_there) for how in ("exact", "near")]
        out[name] = (counts[0] + counts[1], counts[2] + counts[3])
        print(f"  {name:22} {len(theirs):6} rows: {counts[0]} / {counts[1]} of theirs in "
              f"{args.source}, {counts[2]} / {counts[3]} of {args.source}'s in {name}")
    return out


if __name__ == "__main__":
    main()
