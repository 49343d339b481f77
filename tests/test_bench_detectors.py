"""The detectors' benchmark corpus, scored: its code runs, and the defaults keep the
precision and recall docs/builtins.md reports (figures, never timings)."""

from __future__ import annotations

from bench import detectors as b
from pipeline.processors import PIIDetector


def test_the_defaults_score_on_the_quick_corpus() -> None:
    detector = PIIDetector()
    scores = b.score(lambda t: [(f.start, f.end, f.kind) for f in detector.find(t)],
                     b.corpus(quick=True), ("phone", "card", "secret", "ip"))
    for kind, (_, fp, planted) in scores.items():
        assert planted > 0 and fp == 0, (kind, scores[kind])
    assert scores["phone"][0] / scores["phone"][2] > 0.8
    assert scores["card"][0] == scores["card"][2]
    assert scores["secret"][0] == scores["secret"][2]

