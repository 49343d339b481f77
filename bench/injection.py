"""PromptInjectionDetector measured on text its classifier was not trained on: attack
recall at 0.5%, 1% and 2% false positives and at the detector's defaults, per source, per
language and per length, for the classifier, the heuristics and the two together (the
detector), with the CPU each costs per 1,000 characters.

::

    python -m bench.injection --quick             # the vendored sample (bench/data)
    python -m bench.injection --data DIR          # every source found in DIR (needs the
                                                  # train extra: deepset ships as parquet)

Two kinds of held-out rows, pooled:
- the evaluation sources (JailbreakBench, Tensor Trust, NotInject, WildGuard's benign
  prompts, BIPIA, garak's and PromptInject's attacks as Giskard collected them, XQuAD's
  multilingual questions, BANKING77 and NLU++ customer requests: training/sources.py),
  which no fit ever sees;
- each training source, scored by the fit that held that whole source out (and every
  near copy of its rows in the other sources): `training/train_injection.py` writes
  those scores to DIR/heldout_scores.json.gz for the model it ships; the bench scores the
  heuristics on the same rows itself. Without that file (or with `--quick`) only the
  evaluation sources count.

Not trained on is not unseen: a benchmark may copy a text a training source holds
(JailbreakBench's JBC prompts are all the AIM jailbreak, which jailbreakhub has). Every
evaluation row is checked against the training sources first (bench/contamination.py: an
exact copy, or half of its word 8-grams in one training text): the rows found there are
reported apart, as seen in training, never as held out.

Operating points: the threshold at which a scorer flags at most 0.5%, 1% or 2% of the
held-out benign rows (pooled), and the recall it then has; and the detector's defaults
as shipped. Evasions: a fixed sample of held-out English attacks, plain and each evasion
applied (spaced letters, leetspeak, look-alikes, ROT13, hyphens inside words, URL and
HTML escapes, reversed, swapped letters, split in two tool results), scored alike.
"""

from __future__ import annotations

import argparse
import codecs
import functools
import gzip
import hashlib
import html
import json
import random
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote

import msgspec

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
    classifier_on_detector_scale,
    scan_injection,
)
from pipeline.processors.guards.injection_model import (  # noqa: E402
    MODEL_FILE,
    classify_injection,
    load_model,
)
from training.sources import SOURCES, Row, load  # noqa: E402

SAMPLE = ROOT / "bench/data/injection_heldout.jsonl"
SCORES = "heldout_scores.json.gz"
THRESHOLDS = (0.5, 0.7, 0.8, 0.9, 0.95, 0.96, 0.98)
FPRS = (0.005, 0.01, 0.02)
LENGTHS = ((0, 3, "<3 words"), (3, 20, "3-19 words"), (20, 100, "20-99 words"),
           (100, 500, "100-499 words"), (500, 10**9, "500+ words"))
ORDINARY = ("banking77", "nlupp-banking", "nlupp-hotels")
"""The customer-request sets: the defaults flag none of them."""
ENGLISH_GERMAN = ("en", "de")
"""The languages with goals of their own: the other languages' attacks are pooled."""
ADDED = ("xsafety",)
"""The newest attack sources: the other languages' figure without them is the one
earlier runs can be compared with."""


def vendored() -> list[Row]:
    """The vendored held-out sample."""
    rows = []
    with SAMPLE.open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            rows.append(Row(d["text"], d["attack"], d["source"], d["lang"]))
    return rows


# --- evasions --------------------------------------------------------------------------------

def spaced(t: str) -> str:
    return "  ".join(" ".join(w) for w in t.split(" "))  # words two spaces apart


def leet(t: str) -> str:
    return t.translate(str.maketrans("aeiostAEIOST", "4310574310$7"))


def cyrillic(t: str) -> str:
    return t.translate(str.maketrans("aeopcxi", "аеорсхі"))  # noqa: RUF001


def rot13(t: str) -> str:
    return codecs.encode(t, "rot13")


@functools.cache
def _detector() -> PromptInjectionDetector:
    return PromptInjectionDetector()


def split_join(t: str) -> str:
    """The text cut in two tool results of one step, as the detector reads them joined."""
    cut = len(t) // 2
    return _detector().joined((t[:cut], t[cut:]))


_LONG_WORD = re.compile(r"[^\W\d_]{5,}")


def hyphenated(t: str) -> str:
    """A hyphen inside every word of five letters or more ("instruc-tions")."""
    return _LONG_WORD.sub(lambda m: f"{m.group()[:len(m.group()) // 2]}-"
                                    f"{m.group()[len(m.group()) // 2:]}", t)


def url_encoded(t: str) -> str:
    return quote(t, safe="")


def html_escaped(t: str) -> str:
    """Every letter as an HTML character reference."""
    return "".join(f"&#{ord(ch)};" if ch.isalpha() else html.escape(ch) for ch in t)


def reversed_text(t: str) -> str:
    return t[::-1]


def swapped_letters(t: str) -> str:
    """Two letters inside each word of five letters or more swapped ("instrcutions")."""
    def swap(m: re.Match[str]) -> str:
        w = m.group()
        i = len(w) // 2
        return w[:i - 1] + w[i] + w[i - 1] + w[i + 1:]
    return _LONG_WORD.sub(swap, t)


EVASIONS: dict[str, Callable[[str], str]] = {
    "spaced letters": spaced, "leetspeak": leet, "look-alikes": cyrillic, "ROT13": rot13,
    "hyphens in words": hyphenated, "URL-encoded": url_encoded,
    "HTML character references": html_escaped, "reversed": reversed_text,
    "swapped letters": swapped_letters, "split in 2 results": split_join,
}
OBFUSCATIONS = EVASIONS


def evasions(rows: Iterable[Row], n: int) -> list[Row]:
    """`n` short English attacks of `rows` (a fixed random sample: flagged or not), plain
    (source "evasion: none") and with each evasion applied."""
    short = sorted((r for r in rows if r.attack and r.lang == "en" and 20 < len(r.text) < 600),
                   key=lambda r: (r.source, r.text))
    picked = random.Random("evasions").sample(short, min(n, len(short)))
    out = [Row(r.text, True, "evasion: none", "en") for r in picked]
    return out + [Row(f(r.text), True, f"evasion: {name}", "en")
                  for name, f in EVASIONS.items() for r in picked]


# --- scoring ---------------------------------------------------------------------------------

class Scored(NamedTuple):
    row: Row
    scores: dict[str, float]
    """By scorer: classifier, heuristics, detector."""


def length_band(text: str) -> str:
    n = len(text.split())
    return next(name for lo, hi, name in LENGTHS if lo <= n < hi)


def score_rows(rows: list[Row], classifier: list[float] | None = None,
               ) -> tuple[list[Scored], dict[str, float]]:
    """Each row's scores; `classifier`: its classifier scores when given (the held-out
    fits'), else the shipped classifier's. And CPU ms per 1,000 characters by scorer
    (timed on the shipped classifier only)."""
    det = PromptInjectionDetector()
    at, t = det.classifier_threshold, det.threshold
    assert at is not None
    chars = max(sum(len(r.text) for r in rows), 1)
    cpu: dict[str, float] = {}
    heur: list[float] = []
    t0 = time.process_time()
    for r in rows:
        heur.append(scan_injection(r.text).score)
    cpu["heuristics"] = time.process_time() - t0
    if classifier is None:
        classifier = []
        t0 = time.process_time()
        for r in rows:
            classifier.append(classify_injection(r.text))
        cpu["classifier"] = time.process_time() - t0
        t0 = time.process_time()
        for r in rows:
            det.local_score(r.text)
        cpu["detector"] = time.process_time() - t0
    out = [Scored(r, {"classifier": p, "heuristics": h,
                      "detector": max(h, classifier_on_detector_scale(p, at, t))})
           for r, p, h in zip(rows, classifier, heur, strict=True)]
    return out, {k: 1e6 * v / chars for k, v in cpu.items()}


Table = dict[tuple[str, bool, str], list[float]]


def table(scored: Iterable[Scored], scorer: str) -> Table:
    """Scores by (source, attack, language), "all" languages too."""
    out: Table = defaultdict(list)
    for s in scored:
        out[s.row.source, s.row.attack, "all"].append(s.scores[scorer])
        out[s.row.source, s.row.attack, s.row.lang].append(s.scores[scorer])
    return out


def rate(scores: list[float], threshold: float) -> float:
    return sum(s >= threshold for s in scores) / max(len(scores), 1)


def pooled(table: Table, attack: bool, threshold: float) -> tuple[float, int]:
    """The rate over the sources of a kind, each source weighing the same."""
    rates = [rate(ss, threshold) for (_, a, lang), ss in table.items()
             if a == attack and lang == "all"]
    return sum(rates) / max(len(rates), 1), len(rates)


def threshold_at(benign: list[float], fpr: float) -> float:
    """The lowest threshold that flags at most `fpr` of `benign` (a score above all of
    them when even the highest would be too many)."""
    ranked = sorted(benign, reverse=True)
    allowed = int(fpr * len(ranked))
    if allowed >= len(ranked):
        return min(ranked, default=0.0)
    # flag the `allowed` highest, and none tied with the first one left unflagged
    cut = ranked[allowed]
    return min((s for s in ranked[:allowed] if s > cut), default=cut + 1e-9)


class Point(NamedTuple):
    scorer: str
    name: str
    threshold: float
    fpr: float
    recall: float
    recall_macro: float


def operating_points(scored: list[Scored], scorer: str, default: float) -> list[Point]:
    benign = [s.scores[scorer] for s in scored if not s.row.attack]
    attacks = [s for s in scored if s.row.attack and not s.row.source.startswith("evasion")]
    out = []
    for name, t in [*((f"{100 * f:g}% FPR", threshold_at(benign, f)) for f in FPRS),
                    ("defaults", default)]:
        by_source: dict[str, list[float]] = defaultdict(list)
        for s in attacks:
            by_source[s.row.source].append(s.scores[scorer])
        macro = sum(rate(v, t) for v in by_source.values()) / max(len(by_source), 1)
        out.append(Point(scorer, name, t, rate(benign, t),
                         rate([s.scores[scorer] for s in attacks], t), macro))
    return out


# --- printing --------------------------------------------------------------------------------

def print_table(title: str, table: Table, thresholds: tuple[float, ...],
                names: tuple[str, ...] | None = None) -> None:
    print(f"\n{title}: share flagged (attacks: recall; benign: false positives)")
    heads = names or tuple(f">={t:.3g}" for t in thresholds)
    print(f"  {'source':40} {'kind':6} {'lang':5} {'n':>5} " + " ".join(f"{h:>9}" for h in heads))
    for (source, attack, lang), ss in sorted(
            table.items(), key=lambda kv: (not kv[0][1], kv[0][0], kv[0][2] != "all", kv[0][2])):
        langs = {k[2] for k in table if k[0] == source and k[1] == attack} - {"all"}
        if lang != "all" and len(langs) < 2:
            continue
        kind = "attack" if attack else "benign"
        print(f"  {source:40} {kind:6} {lang:5} {len(ss):5} "
              + " ".join(f"{100 * rate(ss, t):8.1f}%" for t in thresholds))


def print_other_languages(scored: list[Scored], scorer: str, points: list[Point]) -> None:
    """The attacks in languages other than English and German, pooled over the rows: all,
    by source, and without the newest sources (`ADDED`)."""
    print(f"\nlanguages other than English and German ({scorer}): attacks flagged at "
          + ", ".join(p.name for p in points))
    other = [s for s in scored if s.row.attack and s.row.lang not in ENGLISH_GERMAN
             and not s.row.source.startswith("evasion")]
    groups: dict[str, list[float]] = defaultdict(list)
    for s in other:
        groups["all sources"].append(s.scores[scorer])
        groups[s.row.source].append(s.scores[scorer])
        if s.row.source not in ADDED:
            groups[f"without {', '.join(ADDED)}"].append(s.scores[scorer])
    for name, ss in groups.items():
        print(f"  {name:24} {len(ss):6} "
              + " ".join(f"{100 * rate(ss, p.threshold):8.1f}%" for p in points))


def print_groups(title: str, scored: list[Scored], key: Callable[[Row], str], scorer: str,
                 points: list[Point]) -> None:
    print(f"\n{title} ({scorer}): share flagged at " + ", ".join(p.name for p in points))
    groups: dict[tuple[bool, str], list[float]] = defaultdict(list)
    for s in scored:
        if not s.row.source.startswith("evasion"):
            groups[s.row.attack, key(s.row)].append(s.scores[scorer])
    for (attack, name), ss in sorted(groups.items(), key=lambda kv: (not kv[0][0], kv[0][1])):
        kind = "attack" if attack else "benign"
        print(f"  {name:16} {kind:6} {len(ss):6} "
              + " ".join(f"{100 * rate(ss, p.threshold):8.1f}%" for p in points))


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


def heldout_training(data: Path) -> tuple[list[Row], list[float]]:
    """The training rows and their scores by the fits that held their source out
    (DIR/heldout_scores.json.gz), when that file is there and was written for the
    shipped weights; else nothing."""
    path = data / SCORES
    if not path.exists():
        print(f"no {SCORES} in {data}: the training sources are not scored "
              "(training/train_injection.py writes it)")
        return [], []
    d = msgspec.json.decode(gzip.decompress(path.read_bytes()))
    from importlib import resources

    shipped = resources.files("pipeline.processors.guards").joinpath(MODEL_FILE).read_bytes()
    if d["model_sha256"] != hashlib.sha256(shipped).hexdigest():
        print(f"{path} was written for other weights than the shipped ones: not used")
        return [], []
    rows: list[Row] = []
    scores: list[float] = []
    for s in SOURCES:
        if s.name in d["sources"]:
            got = s.rows(data)
            if len(got) != len(d["sources"][s.name]):
                sys.exit(f"{path}: {s.name} has {len(got)} rows, the file "
                         f"{len(d['sources'][s.name])}")
            rows += got
            scores += d["sources"][s.name]
    return rows, scores


class Bench(NamedTuple):
    held_out: dict[str, Table]
    """By scorer: the rows no fit that scored them saw (and their evasions)."""
    seen: dict[str, Table]
    """By scorer: the evaluation rows a training source holds (not held out)."""
    overlap: Overlap
    points: dict[str, list[Point]]
    """By scorer: recall at 0.5%, 1% and 2% false positives, and at the defaults."""
    scored: list[Scored]
    cpu: dict[str, float]


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
    loso_rows, loso_scores = heldout_training(data) if data is not None else ([], [])
    held += evasions(held + loso_rows, 10 if args.quick else 100)
    scored, cpu = score_rows(held)
    if loso_rows:
        scored += score_rows(loso_rows, loso_scores)[0]
        print(f"training sources, each scored by the fit that held it out: {len(loso_rows)} "
              "rows")
    seen_scored = score_rows(copied)[0] if copied else []
    det = PromptInjectionDetector()
    defaults = {"classifier": load_model().threshold, "heuristics": det.threshold,
                "detector": det.threshold}
    tables = {name: table(scored, name) for name in defaults}
    seen_tables = {name: table(seen_scored, name) for name in defaults} if copied else {}
    points = {name: operating_points(scored, name, t) for name, t in defaults.items()}
    names = tuple(p.name for p in points["detector"])
    for name in defaults:
        print_table(f"{name}, held out ({cpu.get(name, 0.0):.2f} ms CPU per 1,000 "
                    "characters)", tables[name], tuple(p.threshold for p in points[name]),
                    names)
        if copied:
            print_table(f"{name}, seen in training (not held out)", seen_tables[name],
                        tuple(p.threshold for p in points[name]), names)
    for name in ("classifier", "detector"):
        print_groups("by language", scored, lambda r: r.lang, name, points[name])
        print_groups("by length", scored, lambda r: length_band(r.text), name, points[name])
        print_other_languages(scored, name, points[name])
    n_attack = sum(s.row.attack and not s.row.source.startswith("evasion") for s in scored)
    n_benign = sum(not s.row.attack for s in scored)
    print(f"\nsummary, held-out rows only: {n_attack} attacks, {n_benign} benign texts "
          "(recall pooled over the rows; macro: each source weighing the same)")
    for name, ps in points.items():
        for p in ps:
            print(f"  {name:10} at {p.name:9} (threshold {p.threshold:.4f}): benign flagged "
                  f"{100 * p.fpr:.2f}%, attacks flagged {100 * p.recall:.1f}% "
                  f"(macro {100 * p.recall_macro:.1f}%)")
    earlier = [s for s in scored if s.row.source not in ADDED]
    if len(earlier) < len(scored):
        print(f"\nthe same without {', '.join(ADDED)} (its attacks and benign texts; the "
              "operating points found again): comparable with earlier runs")
        for p in operating_points(earlier, "detector", defaults["detector"]):
            print(f"  detector   at {p.name:9} (threshold {p.threshold:.4f}): benign flagged "
                  f"{100 * p.fpr:.2f}%, attacks flagged {100 * p.recall:.1f}% "
                  f"(macro {100 * p.recall_macro:.1f}%)")
    return Bench(tables, seen_tables, shared, points, scored, cpu)


if __name__ == "__main__":
    main()
