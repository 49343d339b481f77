"""PromptInjectionDetector measured on benchmarks its classifier was not trained on:
attack recall and benign false positives per source and per language, at several
thresholds, for the classifier, the heuristics and the two together (the detector's
defaults), with the CPU each costs per 1,000 characters.

::

    python -m bench.injection --quick             # the vendored sample (bench/data)
    python -m bench.injection --data DIR          # the sample and every evaluation
                                                  # source found in DIR

DIR is what `training/fetch_sources.py --data DIR` writes; the evaluation sources
(JailbreakBench, Tensor Trust, NotInject, WildGuard's benign prompts, BIPIA, garak's
and PromptInject's attacks as Giskard collected them, XQuAD's multilingual questions)
are in training/sources.py; none is trained on. A source absent from DIR is skipped and
named. The sample in bench/data/injection_heldout.jsonl (see its NOTICE.md) is a few
rows of each source whose licence lets it be copied, so the smoke test runs offline.

Not trained on is not unseen: a benchmark may copy a text a training source holds
(JailbreakBench's JBC prompts are all the AIM jailbreak, which jailbreakhub has). Every
row is checked against the training sources first (bench/contamination.py: an exact
copy, or half of its word 8-grams in one training text): the rows found there are
reported apart, as seen in training, never as held out; the summary pools held-out
rows only.

Obfuscated: the sample's attacks spaced out, in leetspeak, ROT13, with Cyrillic
look-alikes, and split in two tool results (scored joined, as the detector does).
"""

from __future__ import annotations

import argparse
import codecs
import json
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.contamination import (  # noqa: E402
    Fingerprints,
    Seen,
    check,
    fingerprints,
    read_overlap,
)
from pipeline.processors.guards.injection import (  # noqa: E402
    PromptInjectionDetector,
    scan_injection,
)
from pipeline.processors.guards.injection_model import classify_injection, load_model  # noqa: E402
from training.sources import SOURCES, Row, load  # noqa: E402

SAMPLE = ROOT / "bench/data/injection_heldout.jsonl"
THRESHOLDS = (0.5, 0.7, 0.8, 0.9, 0.95, 0.96, 0.98)


def vendored() -> list[Row]:
    """The vendored held-out sample."""
    rows = []
    with SAMPLE.open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            rows.append(Row(d["text"], d["attack"], d["source"], d["lang"]))
    return rows


def spaced(t: str) -> str:
    return "  ".join(" ".join(w) for w in t.split(" "))  # words two spaces apart


def leet(t: str) -> str:
    return t.translate(str.maketrans("aeiostAEIOST", "4310574310$7"))


def cyrillic(t: str) -> str:
    return t.translate(str.maketrans("aeopcxi", "аеорсхі"))  # noqa: RUF001


def rot13(t: str) -> str:
    return codecs.encode(t, "rot13")


def split_join(t: str) -> str:
    """The text as the detector scores two tool results of one step: joined."""
    cut = len(t) // 2
    return f"{t[:cut]}\n{t[cut:]}"


OBFUSCATIONS: dict[str, Callable[[str], str]] = {
    "spaced letters": spaced, "leetspeak": leet, "look-alikes": cyrillic,
    "ROT13": rot13, "split in 2 results": split_join,
}


def obfuscated(rows: Iterable[Row], n: int, flagged: Callable[[str], bool]) -> list[Row]:
    """`n` short English attacks of `rows` that the detector flags as written, each
    obfuscated every way (what obfuscation costs, not what the plain text misses)."""
    short = [r for r in rows if r.attack and r.lang == "en" and 20 < len(r.text) < 600]
    short = [r for r in random.Random("obfuscate").sample(short, len(short)) if flagged(r.text)]
    picked = short[:n]
    return [Row(f(r.text), True, f"obfuscated: {name}", "en")
            for name, f in OBFUSCATIONS.items() for r in picked]


Scorer = Callable[[str], float]


def scorers() -> dict[str, Scorer]:
    """The classifier's probability, the heuristics' score, and the detector's (both,
    the classifier's on the heuristics' scale), each at the thresholds."""
    det = PromptInjectionDetector()
    return {
        "classifier": classify_injection,
        "heuristics": lambda t: scan_injection(t).score,
        "detector": lambda t: det.local_score(t)[0],
    }


Table = dict[tuple[str, bool, str], list[float]]


def score_rows(rows: list[Row], scorer: Scorer) -> tuple[Table, float]:
    """Scores by (source, attack, language), and CPU ms per 1,000 characters."""
    out: Table = defaultdict(list)
    chars = sum(len(r.text) for r in rows)
    t0 = time.process_time()
    for r in rows:
        s = scorer(r.text)
        out[r.source, r.attack, "all"].append(s)
        out[r.source, r.attack, r.lang].append(s)
    cpu = time.process_time() - t0
    return out, 1e6 * cpu / max(chars, 1)


def rate(scores: list[float], threshold: float) -> float:
    return sum(s >= threshold for s in scores) / max(len(scores), 1)


def print_table(title: str, table: Table, thresholds: tuple[float, ...]) -> None:
    print(f"\n{title}: share flagged (attacks: recall; benign: false positives)")
    print(f"  {'source':40} {'kind':6} {'lang':5} {'n':>5} "
          + " ".join(f"{'>=' + str(t):>7}" for t in thresholds))
    for (source, attack, lang), ss in sorted(
            table.items(), key=lambda kv: (not kv[0][1], kv[0][0], kv[0][2] != "all", kv[0][2])):
        langs = {k[2] for k in table if k[0] == source and k[1] == attack} - {"all"}
        if lang != "all" and len(langs) < 2:
            continue
        kind = "attack" if attack else "benign"
        print(f"  {source:40} {kind:6} {lang:5} {len(ss):5} "
              + " ".join(f"{100 * rate(ss, t):6.1f}%" for t in thresholds))


def pooled(table: Table, attack: bool, threshold: float) -> tuple[float, int]:
    """The rate over the sources of a kind, each source weighing the same."""
    rates = [rate(ss, threshold) for (_, a, lang), ss in table.items()
             if a == attack and lang == "all"]
    return sum(rates) / max(len(rates), 1), len(rates)


Overlap = dict[str, tuple[int, dict[str, int]]]
"""Per evaluation source: its rows, and how many each training source holds."""


def training_fingerprints(data: Path | None, sample: bool) -> Fingerprints:
    """The training sources' texts as the check reads them: from `data` when it holds
    any (those absent are named), else, for the vendored `sample`, the vendored ones."""
    train, missing = load(data, "train") if data is not None else ([], [])
    if data is None or (sample and not train):
        return read_overlap(SAMPLE)
    if missing:
        print(f"training sources absent from {data}, not checked against: "
              f"{', '.join(missing)}")
    return fingerprints(train, [s.name for s in SOURCES
                                if s.role == "train" and s.name not in missing])


def overlap(rows: list[Row], seen: list[Seen | None]) -> Overlap:
    out: Overlap = {}
    for r, s in zip(rows, seen, strict=True):
        n, found = out.get(r.source, (0, {}))
        if s is not None:
            found[s.source] = found.get(s.source, 0) + 1
        out[r.source] = (n + 1, found)
    return out


def print_overlap(found: Overlap, train: Fingerprints) -> None:
    print(f"\nrows the training sources hold ({', '.join(train.sources)}): an exact copy, "
          "or at least half of the row's word 8-grams in one training text")
    for source, (n, by) in sorted(found.items()):
        held = sum(by.values())
        said = ", ".join(f"{k} {v}" for k, v in sorted(by.items()))
        print(f"  {source:40} {n:5} rows, {held:5} seen in training"
              + (f" ({said})" if said else ""))


class Bench(NamedTuple):
    held_out: dict[str, Table]
    """By scorer: the rows no training source holds (and their obfuscations)."""
    seen: dict[str, Table]
    """By scorer: the rows a training source holds (not held out)."""
    overlap: Overlap


def main(argv: list[str] | None = None) -> Bench:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the vendored sample only")
    ap.add_argument("--data", type=Path, default=None,
                    help="a directory training/fetch_sources.py wrote")
    args = ap.parse_args(argv)
    rows = vendored()
    data = args.data if not args.quick else None
    found: list[Row] = []
    if data is not None:
        found, missing = load(data, "eval")
        if found:
            rows = found  # the whole sources (the sample is a part of them)
        print(f"evaluation sources in {data}: {len({r.source for r in found})} "
              f"source groups; skipped (absent): {', '.join(missing) or 'none'}")
    else:
        print(f"vendored sample {SAMPLE.relative_to(ROOT)}: {len(rows)} rows "
              "(Tensor Trust is not vendored: no licence; pass --data for every source)")
    train = training_fingerprints(data, sample=not found)
    seen = check(rows, train)
    shared = overlap(rows, seen)
    print_overlap(shared, train)
    held = [r for r, s in zip(rows, seen, strict=True) if s is None]
    copied = [r for r, s in zip(rows, seen, strict=True) if s is not None]
    det = PromptInjectionDetector()
    held += obfuscated(held, 10 if args.quick else 40,
                       lambda t: det.local_score(t)[0] >= det.threshold)
    model_threshold = load_model().threshold
    det_threshold = PromptInjectionDetector().threshold
    tables: dict[str, Table] = {}
    seen_tables: dict[str, Table] = {}
    for name, scorer in scorers().items():
        table, ms = score_rows(held, scorer)
        tables[name] = table
        print_table(f"{name}, held out ({ms:.2f} ms CPU per 1,000 characters)", table,
                    THRESHOLDS)
        if copied:
            seen_tables[name] = score_rows(copied, scorer)[0]
            print_table(f"{name}, seen in training (not held out)", seen_tables[name],
                        THRESHOLDS)
    print("\nsummary, held-out rows only (each source weighs the same):")
    for name, t in (("classifier", model_threshold), ("heuristics", det_threshold),
                    ("detector", det_threshold)):
        r, na = pooled(tables[name], True, t)
        f, nb = pooled(tables[name], False, t)
        print(f"  {name:10} at {t}: attacks flagged {100 * r:.1f}% ({na} sources), "
              f"benign flagged {100 * f:.1f}% ({nb} sources)")
    return Bench(tables, seen_tables, shared)


if __name__ == "__main__":
    main()
