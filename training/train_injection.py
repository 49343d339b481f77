"""Train the prompt-injection classifier PromptInjectionDetector ships
(src/pipeline/processors/guards/injection_model.json.gz) from the public sources of
training/sources.py, and measure it holding out one whole source at a time.

::

    pip install -e '.[train]'
    python training/fetch_sources.py --data /tmp/injection-data
    python training/train_injection.py --data /tmp/injection-data

It reads each source at its recorded commit, normalizes each text the way the package
does at run time (`injection_model.normalize`), cuts long ones in the same windows,
and fits a logistic regression (scikit-learn, liblinear, fixed seeds) on
character 3- and 5-grams, words and word pairs (`injection_model.features`). The
weights are pruned to the `--max-features` largest and quantized to 8 bits; every
figure below is measured with that quantized model through the package's own scoring
code, so it is the model that ships.

Held out: each training source in turn is left out of a fit, with every near copy of
its rows in the other sources (`near_copies`), and scored by it (attack recall or benign
false positives, per language); the scores go to DIR/heldout_scores.json.gz for
`bench/injection.py`. The default decision threshold is the lowest at which the
detector's defaults (the heuristics, or the classifier from that threshold) flag at most
`--target-fpr` (0.9%) of those held-out benign rows. The evaluation-only sources (the
benchmarks) are never trained on and play no part in the choice: `bench/injection.py`
scores them with the shipped model. The report goes to training/REPORT.md.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import math
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import msgspec
import numpy as np
from scipy.sparse import csr_matrix
from sklearn.linear_model import LogisticRegression

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from bench.contamination import NEAR, exact_key, grams  # noqa: E402
from pipeline.processors.guards.injection import (  # noqa: E402
    PromptInjectionDetector,
    classifier_on_detector_scale,
    scan_injection,
)
from pipeline.processors.guards.injection_model import (  # noqa: E402
    FEATURES_VERSION,
    InjectionModel,
    features,
    normalize,
    windows,
)
from training.sources import SOURCES, Row, load  # noqa: E402

THRESHOLDS = (0.5, 0.7, 0.8, 0.9, 0.93, 0.95, 0.97, 0.98)
MAX_WINDOWS = 3


def _windows(text: str) -> list[str]:
    w = windows(normalize(text))
    if len(w) <= MAX_WINDOWS:
        return w
    return [w[0], w[len(w) // 2], w[-1]]


def _indirect(rows: list[Row], rng: random.Random, n: int) -> list[tuple[Row, int, int]]:
    """Short attacks planted inside benign texts of the training set (an injection in a
    document, as a tool result brings it), each with the indexes of its attack and host."""
    attacks = [i for i, r in enumerate(rows) if r.attack and len(r.text) < 600]
    hosts = [i for i, r in enumerate(rows) if not r.attack and 300 < len(r.text) < 3000]
    out: list[tuple[Row, int, int]] = []
    for _ in range(n):
        ai, hi = rng.choice(attacks), rng.choice(hosts)
        a, h = rows[ai], rows[hi]
        cut = rng.randrange(len(h.text))
        out.append((Row(f"{h.text[:cut]}\n{a.text}\n{h.text[cut:]}", True, a.source, a.lang),
                    ai, hi))
    return out


def near_copies(rows: list[Row], source: str, row_grams: list[frozenset[str]],
                keys: list[str]) -> set[int]:
    """The indexes of the rows of other sources that are exact or near copies of a row
    of `source`, either way round (`bench.contamination`: the same words, or at least
    half of one text's word 8-grams in the other): a fit that holds `source` out
    leaves these out too, or the held-out figure measures a text the fit saw."""
    held = [i for i, r in enumerate(rows) if r.source == source]
    held_grams = {i: row_grams[i] for i in held}
    held_keys = {keys[i] for i in held}
    where: dict[str, list[int]] = defaultdict(list)
    for i, g in held_grams.items():
        for x in g:
            where[x].append(i)
    out: set[int] = set()
    for j, r in enumerate(rows):
        if r.source == source:
            continue
        if keys[j] in held_keys:
            out.add(j)
            continue
        g = row_grams[j]
        shared: Counter[int] = Counter()
        for x in g:
            shared.update(where.get(x, ()))
        if any(n >= NEAR * len(g) or n >= NEAR * len(held_grams[i])
               for i, n in shared.items()):
            out.add(j)
    return out


class Matrix:
    """Every training text's windows as rows of one sparse matrix (each present feature
    1/sqrt(its window's feature count)), built once and cut per fit."""

    def __init__(self, rows: list[Row], seed: int) -> None:
        planted = _indirect(rows, random.Random(seed), 1000)
        self.rows = rows
        self.grams = [grams(r.text) for r in rows]
        self.keys = [exact_key(r.text) for r in rows]
        # each text, with the training rows it is made of
        self.texts: list[tuple[Row, tuple[int, ...]]] = [(r, (i,)) for i, r in enumerate(rows)]
        self.texts += [(r, (a, h)) for r, a, h in planted]
        feats: list[set[str]] = []
        owner: list[int] = []
        share: list[float] = []
        for k, (r, _) in enumerate(self.texts):
            ws = _windows(r.text)
            for w in ws:
                feats.append(features(w))
                owner.append(k)
                share.append(1.0 / len(ws))
        df: Counter[str] = Counter()
        for fs in feats:
            df.update(fs)
        self.names = sorted(f for f, n in df.items() if n >= 2)
        vocab = {f: i for i, f in enumerate(self.names)}
        del df
        indptr, indices, data = [0], [], []
        for fs in feats:
            v = 1.0 / math.sqrt(len(fs)) if fs else 0.0
            cols = [vocab[f] for f in fs if f in vocab]
            indices.extend(cols)
            data.extend([v] * len(cols))
            indptr.append(len(indices))
        del feats, vocab
        self.x = csr_matrix((np.array(data), np.array(indices, dtype=np.int32),
                             np.array(indptr, dtype=np.int64)),
                            shape=(len(indptr) - 1, len(self.names)))
        self.owner = np.array(owner)
        self.share = np.array(share)

    def fit(self, *, without: str | None, c: float, max_features: int, seed: int,
            threshold: float = 0.5) -> InjectionModel:
        """A model fit on every text made of no row of source `without`, nor of a near
        copy of one (`near_copies`)."""
        dropped: set[int] = set()
        if without is not None:
            dropped = near_copies(self.rows, without, self.grams, self.keys)
            print(f"  {without}: {len(dropped)} near copies in other sources left out too",
                  flush=True)
            dropped |= {i for i, r in enumerate(self.rows) if r.source == without}
        keep_text = np.array([not dropped.intersection(made_of) for _, made_of in self.texts])
        attack = np.array([r.attack for r, _ in self.texts])
        # each text weighs the same whatever its windows; each source (its attacks, its
        # benign texts) weighs the same within its class, and the two classes the same:
        # a large source (12,000 help pages) does not drown a small one (400 overrides)
        groups = Counter((self.rows[made[0]].source, bool(a))
                         for (_, made), a, k in zip(self.texts, attack, keep_text, strict=True)
                         if k)
        per_class = Counter(a for _, a in groups)
        per_text = np.array([
            1.0 / (groups[self.rows[made[0]].source, bool(a)] * per_class[bool(a)]) if k else 0.0
            for (_, made), a, k in zip(self.texts, attack, keep_text, strict=True)])
        per_text *= keep_text.sum() / per_text.sum()
        mask = keep_text[self.owner]
        y = attack[self.owner][mask].astype(int)
        w = (per_text[self.owner] * self.share)[mask]
        lr = LogisticRegression(C=c, solver="liblinear", max_iter=200, random_state=seed)
        lr.fit(self.x[mask], y, sample_weight=w)
        coef = lr.coef_[0]
        top = np.argsort(-np.abs(coef), kind="stable")[:max_features]
        scale = float(np.abs(coef[top]).max()) / 127.0
        q = {self.names[i]: round(float(coef[i]) / scale) for i in top}
        q = {f: v for f, v in q.items() if v}
        return InjectionModel(FEATURES_VERSION, float(lr.intercept_[0]), scale,
                              dict(sorted(q.items())), threshold)


def _rates(scores: list[float], attack: bool) -> list[float]:
    n = max(len(scores), 1)
    return [sum(s >= t for s in scores) / n for t in THRESHOLDS]


def hold_out(rows: list[Row], m: Matrix,
             args: argparse.Namespace) -> dict[str, list[tuple[Row, float]]]:
    """Each training source's rows scored by a model fit without that source."""
    out: dict[str, list[tuple[Row, float]]] = {}
    for name in sorted({r.source for r in rows}):
        t0 = time.process_time()
        model = m.fit(without=name, c=args.c, max_features=args.max_features, seed=args.seed)
        held = [r for r in rows if r.source == name]
        out[name] = [(r, model.score(r.text)) for r in held]
        print(f"  held out {name}: {len(held)} rows, {time.process_time() - t0:.0f} s CPU",
              flush=True)
    return out


def write_scores(path: Path, scored: dict[str, list[tuple[Row, float]]], model_digest: str,
                 ) -> None:
    """Each training row's score by the fit that held its source out, in the order
    `training.sources` reads them, for `bench/injection.py --data` (which scores the
    heuristics itself and pools these with the evaluation sources)."""
    data = {"model_sha256": model_digest,
            "sources": {name: [round(s, 5) for _, s in pairs] for name, pairs in scored.items()}}
    path.write_bytes(gzip.compress(msgspec.json.encode(data), mtime=0))


def choose_threshold(scored: dict[str, list[tuple[Row, float]]], target: float) -> float:
    """The lowest classifier threshold (a step of 0.01) at which the detector's defaults
    (the heuristics, or the classifier from that threshold) flag at most `target` of the
    benign rows of the training sources, each scored by the fit that held its source
    out (pooled over the rows). The evaluation sources play no part in the choice."""
    det = PromptInjectionDetector(classifier_threshold=None)  # (loads no weights)
    benign = [(scan_injection(r.text).score, p) for pairs in scored.values()
              for r, p in pairs if not r.attack]
    for step in range(50, 100):
        at = step / 100
        flagged = sum(max(h, classifier_on_detector_scale(p, at, det.threshold)) >= det.threshold
                      for h, p in benign)
        if flagged <= target * len(benign):
            return at
    return 0.99


def report(scored: dict[str, list[tuple[Row, float]]], threshold: float) -> str:
    head = " | ".join(f"≥{t}" for t in THRESHOLDS)
    lines = [
        "# Prompt-injection classifier: held-out figures",
        "",
        "Written by `training/train_injection.py`. Each row: one training source left out "
        "of the fit and scored by the rest (whole sources held out, never random rows). "
        "Attacks: share flagged (recall); benign: share flagged (false positives). "
        f"The shipped threshold: {threshold}.",
        "",
        f"| held-out source | kind | language | n | {head} |",
        "|---|---|---|---|" + "---|" * len(THRESHOLDS),
    ]
    for name, pairs in scored.items():
        groups: dict[tuple[bool, str], list[float]] = defaultdict(list)
        for r, s in pairs:
            groups[(r.attack, "all")].append(s)
            groups[(r.attack, r.lang)].append(s)
        for (attack, lang), ss in sorted(groups.items(), key=lambda kv: (not kv[0][0],
                                                                          kv[0][1] != "all",
                                                                          kv[0][1])):
            if lang != "all" and len({r.lang for r, _ in pairs if r.attack == attack}) < 2:
                continue
            rates = " | ".join(f"{100 * v:.1f}%" for v in _rates(ss, attack))
            kind = "attack" if attack else "benign"
            lines.append(f"| {name} | {kind} | {lang} | {len(ss)} | {rates} |")
    for attack in (True, False):
        per_source = [[s for r, s in pairs if r.attack == attack] for pairs in scored.values()]
        per_source = [ss for ss in per_source if ss]
        means = [sum(sum(x >= t for x in ss) / len(ss) for ss in per_source) / len(per_source)
                 for t in THRESHOLDS]
        rates = " | ".join(f"{100 * m:.1f}%" for m in means)
        kind = "attack" if attack else "benign"
        lines.append(f"| **mean of the sources** | {kind} | all | {len(per_source)} sources "
                     f"| {rates} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--out", type=Path,
                    default=ROOT / "src/pipeline/processors/guards/injection_model.json.gz")
    ap.add_argument("--report", type=Path, default=ROOT / "training/REPORT.md")
    ap.add_argument("--c", type=float, default=0.5, help="inverse regularisation")
    ap.add_argument("--max-features", type=int, default=200_000)
    ap.add_argument("--target-fpr", type=float, default=0.009,
                    help="the detector's held-out false positives over the training "
                         "sources' benign rows")
    ap.add_argument("--scores", type=Path, default=None,
                    help="where the held-out scores go (default DATA/heldout_scores.json.gz)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-hold-out", action="store_true",
                    help="fit the shipped model only (keep the threshold given)")
    ap.add_argument("--threshold", type=float, default=None)
    args = ap.parse_args()
    rows, missing = load(args.data, "train")
    if missing:
        sys.exit(f"missing training sources: {', '.join(missing)} (fetch_sources.py)")
    print(f"{len(rows)} training rows from "
          f"{', '.join(s.name for s in SOURCES if s.role == 'train')}", flush=True)
    threshold = args.threshold if args.threshold is not None else 0.9
    t0 = time.process_time()
    m = Matrix(rows, args.seed)
    print(f"matrix {m.x.shape}, {m.x.nnz} entries, {time.process_time() - t0:.0f} s CPU",
          flush=True)
    scored: dict[str, list[tuple[Row, float]]] = {}
    if not args.no_hold_out:
        scored = hold_out(rows, m, args)
        if args.threshold is None:
            threshold = choose_threshold(scored, args.target_fpr)
        args.report.write_text(report(scored, threshold), encoding="utf-8")
        print(f"threshold {threshold}; report: {args.report}")
    model = m.fit(without=None, c=args.c, max_features=args.max_features, seed=args.seed,
                  threshold=threshold)
    raw = gzip.compress(msgspec.json.encode(model), compresslevel=9, mtime=0)
    args.out.write_bytes(raw)
    print(f"{len(model.weights)} features, {len(raw) / 1e6:.2f} MB: {args.out}")
    if scored:
        path = args.scores or args.data / "heldout_scores.json.gz"
        write_scores(path, scored, hashlib.sha256(raw).hexdigest())
        print(f"held-out scores: {path}")


if __name__ == "__main__":
    main()
