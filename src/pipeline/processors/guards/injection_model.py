"""The prompt-injection classifier: a logistic regression over character and word
n-grams of a normalized view of the text, in pure Python (no numpy at run time).

The normalized view (`normalize`) is what the model was trained on and what it reads:
- the reader's view (`text_view.view`: NFKC, invisible characters dropped, look-alike
  letters of other scripts folded to Latin), lower-cased;
- letters spaced out or dotted apart joined ("i g n o r e", "i.g.n.o.r.e" -> "ignore");
- leetspeak folded inside words that mix letters with digits or symbols
  ("1gn0r3" -> "ignore", "pr0mpt" -> "prompt"; plain numbers stay as they are);
- runs of spacing collapsed to one space.
A text that reads as ROT13 (common English words appear once it is rotated) is scored
rotated too, and its score is the higher of the two.

Features: character 3- to 5-grams of the view (so any script, spaced or not), words and
word pairs; each present feature counts once, the vector scaled to unit length (so a
long text is not an attack for being long). A long text is scored in overlapping
windows of `WINDOW` characters and its score is the highest window's (an injection in
the middle of a long page is not diluted by the page).

The weights (`injection_model.json.gz`, next to this module) are written by
`training/train_injection.py` from the public sources `training/SOURCES.md` lists; they
are read once, on first use. Nothing is downloaded.
"""

from __future__ import annotations

import codecs
import functools
import gzip
import math
import re
from importlib import resources
from itertools import pairwise

import msgspec

from pipeline.processors.guards.text_view import view

__all__ = [
    "OVERLAP",
    "WINDOW",
    "InjectionModel",
    "classify_injection",
    "features",
    "load_model",
    "normalize",
]

WINDOW = 2000
"""Characters of the normalized view scored at once; longer texts are scored in
windows of this size, `OVERLAP` characters overlapping."""
OVERLAP = 250
_STEP = WINDOW - OVERLAP

_SPACED = re.compile(r"(?<![^\W_])(?:[^\W_][ .\-_*·,/|]){2,}[^\W_](?![^\W_])")
_SEPARATORS = re.compile(r"[ .\-_*·,/|]")
_TOKEN = re.compile(r"[\w@$!|+]+")
_LEET = str.maketrans("0134578@$!|+", "oieastbasilt")
_LEET_CHARS = frozenset("0134578@$!|+")
_ROT13_HINTS = frozenset(
    codecs.encode(w, "rot13")
    for w in ("the", "and", "you", "your", "all", "ignore", "previous", "instructions",
              "system", "prompt", "now", "are", "what", "tell", "with", "this", "that")
)


def _fold_leet(m: re.Match[str]) -> str:
    tok = m.group()
    if tok.isalnum() and (tok.isalpha() or tok.isdigit()):
        return tok
    letters = sum(ch.isalpha() for ch in tok)
    if letters == 0 or not any(ch in _LEET_CHARS for ch in tok):
        return tok
    return tok.translate(_LEET)


def _join_spaced(m: re.Match[str]) -> str:
    return _SEPARATORS.sub("", m.group())


def normalize(text: str) -> str:
    """The view of `text` the model reads (see the module docstring)."""
    t = view(text).text.lower()
    t = _SPACED.sub(_join_spaced, t)
    t = _TOKEN.sub(_fold_leet, t)
    return " ".join(t.split())


def _looks_rot13(t: str) -> bool:
    hits = 0
    for w in t.split(None, 200)[:200]:
        if w.strip(".,:;!?\"'") in _ROT13_HINTS:
            hits += 1
            if hits >= 3:
                return True
    return False


def features(t: str) -> set[str]:
    """The features of a normalized text (see `normalize`): character 3- to 5-grams,
    words (prefixed "\\x01") and word pairs (prefixed "\\x02")."""
    s = f" {t} "
    out = {s[i : i + 3] for i in range(len(s) - 2)}
    out.update(s[i : i + 4] for i in range(len(s) - 3))
    out.update(s[i : i + 5] for i in range(len(s) - 4))
    words = t.split()
    out.update("\x01" + w for w in words)
    out.update(f"\x02{a} {b}" for a, b in pairwise(words))
    return out


def windows(t: str) -> list[str]:
    """`t` cut in overlapping windows of `WINDOW` characters (itself if shorter)."""
    if len(t) <= WINDOW:
        return [t]
    return [t[i : i + WINDOW] for i in range(0, len(t) - OVERLAP, _STEP)]


class InjectionModel(msgspec.Struct, frozen=True):
    """Weights as stored: `weights[f] * scale` is feature f's weight."""

    version: int
    bias: float
    scale: float
    weights: dict[str, int]
    threshold: float
    """The default decision threshold the training chose (see training/REPORT.md)."""

    def logit(self, t: str) -> float:
        feats = features(t)
        if not feats:
            return self.bias
        w = self.weights
        total = sum(map(w.__getitem__, filter(w.__contains__, feats)))
        return self.bias + self.scale * total / math.sqrt(len(feats))

    def score_normalized(self, t: str) -> float:
        """The probability that normalized text `t` is an injection (highest window)."""
        z = max(self.logit(x) for x in windows(t))
        if _looks_rot13(t):
            z = max(z, *(self.logit(x) for x in windows(codecs.encode(t, "rot13"))))
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def score(self, text: str) -> float:
        """The probability that `text` is an injection."""
        return self.score_normalized(normalize(text))


MODEL_FILE = "injection_model.json.gz"


@functools.cache
def load_model() -> InjectionModel:
    """The shipped model, read on first use and kept (`functools.cache`: two threads that
    ask at once may both read it; either copy is the same model)."""
    raw = resources.files(__package__ or __name__).joinpath(MODEL_FILE).read_bytes()
    return msgspec.json.decode(gzip.decompress(raw), type=InjectionModel)


def classify_injection(text: str) -> float:
    """The shipped classifier's probability that `text` is a prompt injection."""
    return load_model().score(text)
