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
character 3- to 5-grams, words and word pairs (`injection_model.features`). The
weights are pruned to the `--max-features` largest and quantized to 8 bits; every
figure below is measured with that quantized model through the package's own scoring
code, so it is the model that ships.

Held out: each training source in turn is left out of a fit and scored by it (attack
recall or benign false positives, per language). The default decision threshold is the
lowest at which those held-out false positives, averaged over the benign sources, stay
within `--target-fpr` (2%: at 1% the held-out jailbreak recall falls below 20%).
The evaluation-only sources (the benchmarks) are never trained on:
`bench/injection.py` scores them with the shipped model. The report goes to
training/REPORT.md.
"""

from __future__ import annotations

import argparse
import gzip
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

from pipeline.processors.guards.injection_model import (  # noqa: E402
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


def _indirect(rows: list[Row], rng: random.Random, n: int) -> list[tuple[Row, str]]:
    """Short attacks planted inside benign texts of the training set (an injection in a
    document, as a tool result brings it), each with its host's source."""
    attacks = [r for r in rows if r.attack and len(r.text) < 600]
    hosts = [r for r in rows if not r.attack and 300 < len(r.text) < 3000]
    out: list[tuple[Row, str]] = []
    for _ in range(n):
        a, h = rng.choice(attacks), rng.choice(hosts)
        cut = rng.randrange(len(h.text))
        out.append((Row(f"{h.text[:cut]}\n{a.text}\n{h.text[cut:]}", True, a.source, a.lang),
                    h.source))
    return out


class Matrix:
    """Every training text's windows as rows of one sparse matrix (each present feature
    1/sqrt(its window's feature count)), built once and cut per fit."""

    def __init__(self, rows: list[Row], seed: int) -> None:
        planted = _indirect(rows, random.Random(seed), 1000)
        self.texts: list[tuple[Row, frozenset[str]]] = [(r, frozenset({r.source}))
                                                         for r in rows]
        self.texts += [(r, frozenset({r.source, host})) for r, host in planted]
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
        """A model fit on every text none of whose sources is `without`."""
        keep_text = np.array([without not in srcs for _, srcs in self.texts])
        attack = np.array([r.attack for r, _ in self.texts])
        n_attack = int((keep_text & attack).sum())
        n_benign = int((keep_text & ~attack).sum())
        # each text weighs 1 whatever its windows; the two classes weigh the same
        per_text = np.where(attack, (n_attack + n_benign) / (2 * n_attack),
                            (n_attack + n_benign) / (2 * n_benign))
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
        return InjectionModel(1, float(lr.intercept_[0]), scale, dict(sorted(q.items())),
                              threshold)


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


def _macro_fpr(benign: dict[str, list[float]], t: float) -> float:
    return sum(sum(x >= t for x in ss) / len(ss) for ss in benign.values()) / len(benign)


def choose_threshold(scored: dict[str, list[tuple[Row, float]]], target: float) -> float:
    """The lowest threshold (a step of 0.01) at which the held-out false-positive rate,
    averaged over the benign sources (each weighing the same), is at most `target`."""
    benign: dict[str, list[float]] = defaultdict(list)
    for name, pairs in scored.items():
        for r, s in pairs:
            if not r.attack:
                benign[name].append(s)
    for step in range(50, 100):
        if _macro_fpr(benign, step / 100) <= target:
            return step / 100
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
    ap.add_argument("--c", type=float, default=4.0, help="inverse regularisation")
    ap.add_argument("--max-features", type=int, default=200_000)
    ap.add_argument("--target-fpr", type=float, default=0.02,
                    help="held-out false positives, averaged over the benign sources")
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


if __name__ == "__main__":
    main()
