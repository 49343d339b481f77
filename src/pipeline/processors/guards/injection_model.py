"""The prompt-injection classifier: a logistic regression over character and word
n-grams of a normalized view of the text, in pure Python (no numpy at run time).

The normalized view (`normalize`) is what the model was trained on and what it reads:
- the reader's view (`text_view.view`: NFKC, invisible characters dropped, look-alike
  letters of other scripts folded to Latin), lower-cased;
- letters spaced out or dotted apart joined ("i g n o r e", "i.g.n.o.r.e" -> "ignore");
- leetspeak folded inside words that mix letters with digits or symbols
  ("1gn0r3" -> "ignore", "pr0mpt" -> "prompt"; plain numbers stay as they are);
- URL escapes (`%69gnore`) and HTML character references (`&#105;gnore`, `&amp;`)
  decoded;
- hyphens and other separators inside a word dropped ("ig-no-re", "in_struc*tions" ->
  "ignore", "instructions"), so a word cut apart reads whole;
- a word of the override vocabulary with two letters swapped or misplaced inside it
  ("ingore", "instrcutions": the same first and last letter and the same letters
  between) spelled as the word (`TYPO_WORDS`);
- runs of spacing collapsed to one space.
A text that reads as ROT13, or as written backwards (common English words appear once it
is rotated or reversed), is scored that way too, and its score is the higher.

Features: character 3- and 5-grams of the view (so any script, spaced or not), words and
word pairs, all read with the letters between each word's first and last put in order
(so a typo that swaps letters inside a word changes no feature); each present feature
counts once, the vector scaled to unit length (so a long text is not an attack for being
long). A long text is scored in overlapping
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
import html
import math
import re
from importlib import resources
from itertools import pairwise
from urllib.parse import unquote

import msgspec

from pipeline.processors.guards.injection_lexicon import RULE_ONLY, clause_concepts
from pipeline.processors.guards.text_view import view

__all__ = [
    "FEATURES_VERSION",
    "OVERLAP",
    "TYPO_WORDS",
    "WINDOW",
    "InjectionModel",
    "canonical",
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
_TOKEN = re.compile(r"(?<![\w@$!+])[\w@$!+]*[0134578@$!+][\w@$!+]*")
"""A word with a character leetspeak writes a letter with (the others stay as they are)."""
# ("|" is not read as "l": it marks roles, "<|im_start|>", and a ROT13 reading would turn
# that "l" into "y")
_LEET = str.maketrans("0134578@$!+", "oieastbasit")
_LEET_CHARS = frozenset("0134578@$!+")
_HINT_WORDS = ("the", "and", "you", "your", "all", "ignore", "previous", "instructions",
               "system", "prompt", "now", "are", "what", "tell", "with", "this", "that",
               "would", "how", "about", "for", "have", "can", "will", "from", "when",
               "where", "there", "they", "which", "should", "could", "please", "make")
_OTHER_HINT_WORDS = ("que", "todo", "para", "und", "nicht", "ich", "pour", "est", "che",
                     "dass", "les", "des", "los", "las", "der", "die", "das")
"""The commonest words of the other languages attackers write in."""
_ROT13_HINTS = frozenset(codecs.encode(w, "rot13") for w in (*_HINT_WORDS, *_OTHER_HINT_WORDS))
_REVERSED_ENDINGS = ("gni", "noit", "snoit", "tnem")
"""How common English endings start a word written backwards ("gnidulcni")."""
_REVERSED_HINTS = frozenset(w[::-1] for w in (*_HINT_WORDS, *_OTHER_HINT_WORDS)) - {
    "era", "ton", "red", "sad", "sol", "sed", "eid", "sal", "tse", "sel", "woh", "lla"}
"""(less those that are words forwards too: "era", "red", "sad"...)"""
_PAIR = re.compile(r"(?:(?<=\s\s)|^)([^\W_]) ([^\W_])(?=\s\s|$)")
"""Two letters one space apart between wider gaps: a two-letter word spaced out ("t o")."""
_DIGITS = re.compile(r"\b[0134578]{1,3}\b")
_GAPS = re.compile(r"\s{2,}")
_SPACE_AT_MARK = re.compile(r"\s*([,;:!?])\s*(?=[^\W\d_])|\s+([,;:!?.)\]])(?!\S)")
"""Spacing around a punctuation mark between words made one space after it
("commentary ,personality" and "commentary , personality" are "commentary, personality"),
and spacing before a mark that ends a word dropped ("instructions ." is
"instructions.")."""
_URL_ESCAPE = re.compile(r"%[0-9a-fA-F]{2}")
_INNER_SEPARATOR = re.compile(r"(?<=[^\W\d_])[-_*·~^+](?=[^\W\d_])")
_INNER_SEPARATORS = "-_*·~^+"
_WORD = re.compile(r"[^\W\d_]{4,}")

FEATURES_VERSION = 9
"""What `normalize` and `features` compute; a weights file made for another is refused."""

TYPO_WORDS = (
    "ignore", "ignoring", "disregard", "forget", "override", "bypass", "previous", "prior",
    "above", "earlier", "preceding", "instructions", "instruction", "prompt", "prompts",
    "system", "rules", "guidelines", "directives", "restrictions", "filters",
    "rule", "guideline", "directive", "restriction", "filter", "reveal",
    "print", "repeat", "secret", "password", "hidden", "initial", "original", "developer",
    "jailbreak", "unrestricted", "unfiltered", "uncensored", "pretend", "everything",
    "anything", "following", "respond", "answer", "response", "output", "message",
    "ignoriere", "vorherigen", "anweisungen", "vergiss", "alles", "instructions",
    "ignorez", "oubliez", "instrucciones", "anteriores", "istruzioni", "precedenti",
    "endoftext",
)
"""Words read through a typo: one whose first and last letters and the letters between
(in any order) are one of these is read as it."""


@functools.lru_cache(maxsize=1 << 16)
def _typo_key(w: str) -> str:
    return w[0] + "".join(sorted(w[1:-1])) + w[-1]


_TYPOS = {_typo_key(w): w for w in TYPO_WORDS}


_LEET_WORD = re.compile(r"(?<![\w@$!+])(?=[\w@$!+]*[^\W\d_])(?=[\w@$!+]*[0134578@$!+])"
                        r"[\w@$!+]+")
"""A word mixing letters with the symbols leetspeak writes them with ("pr0mpt")."""


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


def _typo(m: re.Match[str]) -> str:
    w = m.group()
    return _TYPOS.get(_typo_key(w), w)


def _unescape(t: str) -> str:
    if "%" in t and len(_URL_ESCAPE.findall(t, 0, 4000)) >= 3:
        t = unquote(t.replace("+", " ")) if t.count(" ") < 3 else unquote(t)
    if "&" in t and ";" in t:
        t = html.unescape(t)
    return t


def _mark(m: re.Match[str]) -> str:
    return f"{m.group(1)} " if m.group(1) else m.group(2)


def _spaced_out(t: str) -> bool:
    """Most of the first 200 words of `t` are one character and words are two spaces
    apart: every character spaced out ("i g n o r e  a l l")."""
    if "  " not in t:
        return False
    words = t.split(None, 200)[:200]
    return len(words) >= 8 and sum(len(w) == 1 for w in words) > 0.7 * len(words)


def normalize(text: str) -> str:
    """The view of `text` the model reads (see the module docstring)."""
    t = view(_unescape(text)).text.lower()
    if _spaced_out(t):
        t = " ".join(w.replace(" ", "") for w in _GAPS.split(t))
    t = _SPACED.sub(_join_spaced, t)
    if "  " in t:
        t = _PAIR.sub(r"\1\2", t)
    # (each pass below only where the characters it reads are in the text)
    if any(map(t.__contains__, _LEET_CHARS)):
        leet = len(_LEET_WORD.findall(t, 0, 4000)) >= 3
        t = _TOKEN.sub(_fold_leet, t)
        if leet:
            # a text in leetspeak: its short numbers are words too ("70" is "to")
            t = _DIGITS.sub(lambda m: m.group().translate(_LEET), t)
    if any(map(t.__contains__, _INNER_SEPARATORS)):
        t = _INNER_SEPARATOR.sub("", t)  # after leetspeak: "r0l3-pl4y" is "role-play" first
    t = _SPACE_AT_MARK.sub(_mark, t)
    typos = {w: _TYPOS[k] for w in set(_WORD.findall(t)) if (k := _typo_key(w)) in _TYPOS}
    if any(w != r for w, r in typos.items()):  # (most texts spell every word as it is)
        t = _WORD.sub(_typo, t)
    return " ".join(t.split())


def readings(t: str) -> list[str]:
    """Normalized text `t`, and its ROT13 or reversed reading when it reads as one:
    three common words (two in a text of under 40 words) appear in its first 200 words
    once they are rotated or reversed."""
    out = [t]
    words = t.split(None, 200)[:200]
    if len(words) < 2:
        return out
    seen = {w.strip(".,:;!?\"'") for w in words}
    enough = 2 if len(words) < 40 else 3
    if len(seen & _ROT13_HINTS) >= enough:
        out.append(codecs.encode(t, "rot13"))
    backwards = len(seen & _REVERSED_HINTS) + sum(
        len(w) > 5 and w.startswith(_REVERSED_ENDINGS) for w in seen)
    if backwards >= enough:
        out.append(normalize(t[::-1]))
    return out


_CANON_WORD = re.compile(r"[a-zß-ÿā-ɏα-ωа-я]{4,}")
"""Words of the scripts written with spaces (Latin, Greek, Cyrillic): the ones a typo
scrambles."""


def _canon(m: re.Match[str]) -> str:
    return _typo_key(m.group())


def canonical(t: str) -> str:
    """Normalized text `t` with the letters inside each word of four letters or more put
    in order ("instrcutions" and "instructions" both "icinnorsttus"): what the features
    are read from, so a typo that moves letters inside a word changes none of them."""
    return _CANON_WORD.sub(_canon, t)


def features(t: str) -> set[str]:
    """The features of a normalized text (see `normalize`), read from its `canonical`
    form: character 3- and 5-grams, words (prefixed "\\x01") and word pairs (prefixed
    "\\x02"); and, read from the text itself, the concepts of its words in any language
    (`injection_lexicon`: "ignore", "previous", "instructions", "secret"..., prefixed
    "\\x03") and the pairs of concepts met in one clause (prefixed "\\x04"), so what
    the model learns of English overrides holds for the same words in other languages."""
    out = _concept_features(t)
    t = canonical(t)
    s = f" {t} "
    out.update(s[i : i + 3] for i in range(len(s) - 2))
    out.update(s[i : i + 5] for i in range(len(s) - 4))
    words = t.split()
    out.update("\x01" + w for w in words)
    out.update(f"\x02{a} {b}" for a, b in pairwise(words))
    return out


def _concept_features(t: str) -> set[str]:
    out: set[str] = set()
    for clause in clause_concepts(t):
        ranked = sorted(clause.concepts - RULE_ONLY)
        out.update("\x03" + c for c in ranked)
        out.update(f"\x04{a} {b}" for i, a in enumerate(ranked) for b in ranked[i + 1:])
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
        # (the weights are integers: their sum is exact in any order; a feature without
        # one, or with weight 0, adds nothing)
        total = sum(filter(None, map(self.weights.get, feats)))
        return self.bias + self.scale * total / math.sqrt(len(feats))

    def score_normalized(self, t: str) -> float:
        """The probability that normalized text `t` is an injection (highest window)."""
        return self.score_readings(readings(t))

    def score_readings(self, views: list[str]) -> float:
        """The probability that a text whose `readings` are `views` is an injection (the
        highest window of any)."""
        z = max(self.logit(x) for r in views for x in windows(r))
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
    model = msgspec.json.decode(gzip.decompress(raw), type=InjectionModel)
    if model.version != FEATURES_VERSION:
        raise ValueError(f"{MODEL_FILE} holds weights for features version {model.version}, "
                         f"this code computes version {FEATURES_VERSION}: train it again "
                         "(training/train_injection.py)")
    return model


def classify_injection(text: str) -> float:
    """The shipped classifier's probability that `text` is a prompt injection."""
    return load_model().score(text)
