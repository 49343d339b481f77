"""PIIDetector finds every value its validators accept, whatever the case or issuer.

- A payment card number in any issuer range the detector knows (`CARD_RANGES`: every
  prefix, every length), Luhn-valid, written in groups of four or in one run, after a
  card word, is found whole.
- An IBAN with valid check digits (any country format python-stdnum accepts, here those
  of DE, GB and NL), its letters in any mix of upper and lower case, written compact or
  in groups of four, is found whole, with the libraries and regex-only alike.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pipeline.processors import PIIDetector
from pipeline.processors.guards.pii_detectors import CARD_RANGES

DETECTOR = PIIDetector(types=("card", "iban"))
REGEX_ONLY = PIIDetector(types=("card", "iban"), regex_only=True)


def _luhn_complete(body: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(body + "0")):
        n = int(ch) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return body + str((10 - total % 10) % 10)


@st.composite
def cards(draw: st.DrawFn) -> str:
    lo, hi, lengths = draw(st.sampled_from(CARD_RANGES))
    prefix = str(draw(st.integers(int(lo), int(hi)))).zfill(len(lo))
    n = draw(st.sampled_from(lengths))
    rest = draw(st.text("0123456789", min_size=n - len(prefix) - 1,
                        max_size=n - len(prefix) - 1))
    return _luhn_complete(prefix + rest)


def _grouped(digits: str) -> str:
    return " ".join(digits[i:i + 4] for i in range(0, len(digits), 4))


def _found(detector: PIIDetector, text: str, kind: str) -> list[str]:
    return [text[f.start:f.end] for f in detector.find(text) if f.kind == kind]


@given(cards(), st.booleans())
def test_a_card_in_any_known_issuer_range_is_found(number: str, grouped: bool) -> None:
    value = _grouped(number) if grouped else number
    text = f"Pay with my card {value} today."
    assert _found(DETECTOR, text, "card") == [value]
    assert _found(REGEX_ONLY, text, "card") == [value]


FORMATS = {"DE": "9" * 18, "GB": "AAAA" + "9" * 14, "NL": "AAAA" + "9" * 10}
"""Each country's BBAN shape: 9 a digit, A a letter."""


@st.composite
def ibans(draw: st.DrawFn) -> str:
    country = draw(st.sampled_from(sorted(FORMATS)))
    bban = "".join(
        draw(st.sampled_from("0123456789" if c == "9" else "ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
        for c in FORMATS[country]
    )
    moved = bban + country + "00"
    check = 98 - int("".join(str(int(c, 36)) for c in moved)) % 97
    compact = f"{country}{check:02d}{bban}"
    cased = "".join(c.lower() if draw(st.booleans()) else c for c in compact)
    return _grouped(cased) if draw(st.booleans()) else cased


@given(ibans())
def test_an_iban_in_any_case_is_found(value: str) -> None:
    text = f"Please wire it to {value} by Friday."
    assert _found(DETECTOR, text, "iban") == [value]
    assert _found(REGEX_ONLY, text, "iban") == [value]
