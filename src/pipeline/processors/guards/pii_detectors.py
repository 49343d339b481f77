"""Where PII is in a text: the detectors of `PIIDetector`, each a pure function from a
text to the spans of the values it found.

Validation uses well-kept libraries where a checksum or a numbering plan decides:
`phonenumbers` (phone numbers), `python-stdnum` (Luhn for payment cards, IBAN, national
ids). They are the optional extra `pipeline-agents[guards]`, imported only when a
detector that needs them is built; `detectors(..., regex_only=True)` uses none (see
`PIIDetector`). Email, IP addresses, API keys and secrets, and custom patterns are
regular expressions (IP addresses checked by the standard `ipaddress`).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import ModuleType

import msgspec

from pipeline.processors.guards.common import GuardsExtraMissing, require_extra

Span = tuple[int, int]
Detector = Callable[[str], Iterable[Span]]
"""A text -> the (start, end) spans of the values found in it."""

BUILTIN_KINDS: tuple[str, ...] = (
    "email", "card", "iban", "national-id", "ip", "secret", "phone",
)
"""In the order a tie is decided: a span two detectors find gets the first one's kind."""

OPTIONAL_KINDS: tuple[str, ...] = ("url", "uuid", "crypto-wallet")
"""Kinds found only when asked for (`types=`): common in answers, rarely personal."""


class Finding(msgspec.Struct, frozen=True, order=True):
    """One value found: where it is and what kind it is (never the value itself)."""

    start: int
    end: int
    kind: str


class MissingDependency(GuardsExtraMissing):
    """A detector needs a library of the `guards` extra that is not installed."""


def _require(module: str, kind: str) -> ModuleType:
    return require_extra(
        module, f"PIIDetector's {kind!r} detector",
        package="phonenumbers" if module.startswith("phonenumbers") else "python-stdnum",
        hint="or pass regex_only=True for the documented regex-only fallback, or leave "
        "the kind out",
        error=MissingDependency,
    )


# --- regular expressions -----------------------------------------------------------

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?!\.?\d)")
IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")
IBAN = re.compile(r"\b[A-Za-z]{2}\d{2}(?: ?[A-Za-z0-9]){11,30}\b")
PHONE_CANDIDATE = re.compile(r"\d[\d\s().+/-]{5,}\d")
"""A cheap pre-check: `phonenumbers` only runs on text that has something like one."""
PHONE_REGEX = re.compile(
    r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]?\d{2,4}){2,4}(?!\d)"
)
"""The regex-only fallback for phone numbers (no numbering plan: more false positives)."""

SECRETS: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (hints, re.compile(p)) for hints, p in (
        (("sk-",), r"\bsk-(?:proj-|ant-[a-z0-9]+-)?[A-Za-z0-9_-]{20,}"),  # OpenAI, Anthropic
        (("akia",), r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key id
        (("secret_access_key", "secretaccesskey", "secret-access-key"),  # and its secret
         r"(?i)secret[_-]?access[_-]?key[\"']?\s*[:=]\s*[\"']?(?P<v>[A-Za-z0-9/+]{40})"
         r"(?![A-Za-z0-9/+])"),
        (("_",), r"\bgh[pousr]_[A-Za-z0-9]{36,}"),  # GitHub tokens
        (("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
        (("xox",), r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),  # Slack
        (("aiza",), r"\bAIza[0-9A-Za-z_-]{35}"),  # Google API key
        (("_live_", "_test_"), r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),  # Stripe
        (("eyj",), r"\beyJ[A-Za-z0-9_-]{10,}(?:\.[A-Za-z0-9_-]*){0,2}"),  # JWT
        (("-----begin",),
         r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"),
        (("private_key_id",),  # a GCP service account's key id (its key is the PEM above)
         r"\"private_key_id\"\s*:\s*\"(?P<v>[0-9a-f]{40})\""),
        (("accountkey=", "sharedaccesskey="),  # Azure storage / service bus connection strings
         r"(?i)\b(?:AccountKey|SharedAccessKey)=(?P<v>[A-Za-z0-9+/]{40,}={0,2})"),
        (("sig=",), r"[?&;]sig=(?P<v>[A-Za-z0-9%+/=]{30,})"),  # Azure SAS signature
        (("q~",), r"(?<![\w~.-])[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}"),  # Entra secret
        (("://",),  # a URL's user:password (databases, brokers, git remotes)
         r"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://(?P<v>[^\s:/@]+:[^\s@/]+)@"),
        (("=", ":"),
         r"(?i)\b(?:api[_-]?key|secret|token|passw(?:or)?d|pwd)\b[\"']?\s*[:=]\s*[\"']?"
         r"[^\s\"']{6,}"),
    )
)
"""Each pattern with (lower-case) literals one of which any match contains: a text with
none of them is not searched (the regex engine costs far more than `in`). A pattern with
a group `v` reports that group (the secret, not the name before it)."""
_HAS_DIGIT = re.compile(r"\d")


def _with_digits(detect: Detector) -> Detector:
    """`detect` on a text with a digit in it, no spans on one without: what the card,
    IBAN and national-id detectors look for always has digits (the cheap test first)."""

    def on_digits(text: str) -> Iterable[Span]:
        return detect(text) if _HAS_DIGIT.search(text) is not None else []

    return on_digits

NATIONAL_IDS: Mapping[str, tuple[str, str]] = {
    # name: (regex, stdnum module whose is_valid decides)
    "us.ssn": (r"(?<!\d)\d{3}-\d{2}-\d{4}(?!\d)", "stdnum.us.ssn"),
    "es.dni": (r"(?<!\w)\d{8}-?[A-Za-z](?!\w)", "stdnum.es.dni"),
    "br.cpf": (r"(?<!\d)\d{3}\.\d{3}\.\d{3}-\d{2}(?!\d)", "stdnum.br.cpf"),
    "in.aadhaar": (r"(?<!\d)\d{4} ?\d{4} ?\d{4}(?!\d)", "stdnum.in_.aadhaar"),
    "nl.bsn": (r"(?<!\d)\d{9}(?!\d)", "stdnum.nl.bsn"),
}
DEFAULT_NATIONAL_IDS: tuple[str, ...] = ("us.ssn", "es.dni", "br.cpf", "in.aadhaar")


# --- detectors ---------------------------------------------------------------------


def _spans(pattern: re.Pattern[str], text: str) -> Iterable[Span]:
    return (m.span() for m in pattern.finditer(text))


def email(text: str) -> Iterable[Span]:
    if "@" not in text:
        return ()
    return _spans(EMAIL, text)


_VERSION_BEFORE = re.compile(
    r"(?i)\b(?:version|ver|v|build|release|firmware|fw|rev|revision|patch|update|driver|"
    r"sdk|kernel|os)\.?[\s:#=]*$"
)
"""A dotted quad right after these words is a version number, not an address."""


def ip(text: str) -> list[Span]:
    out: list[Span] = []
    if "." in text:
        for m in IPV4.finditer(text):
            try:
                ipaddress.IPv4Address(m.group())
            except ValueError:
                continue
            if _VERSION_BEFORE.search(text, max(0, m.start() - 24), m.start()):
                continue
            out.append(m.span())
    if "::" in text or text.count(":") >= 7:
        for m in IPV6.finditer(text):
            v = m.group()
            # "2001:db8::1: that one": the pattern also takes the colon after it.
            for cand in (v, v.rstrip(":"), v[:-1]):
                try:
                    ipaddress.IPv6Address(cand)
                except ValueError:
                    continue
                out.append((m.start(), m.start() + len(cand)))
                break
    return out


def secret(text: str) -> list[Span]:
    low = text.lower()
    return [
        m.span("v") if "v" in p.groupindex else m.span()
        for hints, p in SECRETS if any(h in low for h in hints) for m in p.finditer(text)
    ]


def card(*, regex_only: bool = False) -> Detector:
    """12 to 19 digits (spaces or dashes between), Luhn-checked (`stdnum.luhn`), in an
    issuer's range (`card_issuer_ok`: its IIN prefix and lengths).

    A run of digit groups may hold a card and other numbers around it ("ref 12 4111 1111
    1111 1111"): each run of whole groups is tried, the longest valid one wins. Context
    decides the doubtful ones: a 12- or 13-digit number written without separators
    (the length of EAN-13 barcodes and millisecond timestamps) needs a card word before it
    ("card", "visa", "maestro", ...), and so does one after a reference word ("order",
    "invoice", "tracking", "barcode", ...). A number written in groups is taken as is.
    """
    if regex_only:
        luhn_ok: Callable[[str], bool] = _luhn
    else:
        luhn_ok = _require("stdnum.luhn", "card").is_valid

    def valid(digits: str) -> bool:
        return card_issuer_ok(digits) and luhn_ok(digits)

    def detect(text: str) -> list[Span]:
        out: list[Span] = []
        for m in _DIGIT_RUN.finditer(text):
            run = m.group()
            groups = [g.span() for g in _DIGITS.finditer(run)]
            i = 0
            while i < len(groups):  # left to right, the longest valid card from each group
                found, count = -1, 0
                for j in range(i, len(groups)):
                    count += groups[j][1] - groups[j][0]
                    if count > 19:
                        break
                    if count >= 12 and valid(re.sub(r"\D", "", run[groups[i][0]:groups[j][1]])):
                        found = j
                if found < 0:
                    i += 1
                    continue
                start, end = m.start() + groups[i][0], m.start() + groups[found][1]
                if _card_context_ok(text, start, end):
                    out.append((start, end))
                i = found + 1
        return out

    return _with_digits(detect)


CARD_RANGES: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    # (first IIN prefix, last, lengths): the issuer ranges of the payment card numbers
    # in use or still valid (ISO/IEC 7812 issuers' published ranges)
    ("1", "1", (15,)),  # UATP (the legacy 15-digit JCB numbers 1800, 2131 are below)
    ("1946", "1946", (16, 18, 19)),  # GPN
    ("2131", "2131", (15,)),  # JCB, legacy 15 digits
    ("2200", "2204", (16, 17, 18, 19)),  # Mir
    ("2205", "2205", (16,)),  # BORICA
    ("2221", "2720", (16,)),  # Mastercard
    ("31", "31", (19,)),  # China T-Union
    ("300", "305", (14, 15, 16, 17, 18, 19)),  # Diners Club
    ("3095", "3095", (14, 15, 16, 17, 18, 19)),
    ("36", "36", (14, 15, 16, 17, 18, 19)),
    ("38", "39", (14, 15, 16, 17, 18, 19)),
    ("34", "34", (15,)),  # American Express
    ("37", "37", (15,)),
    ("3528", "3589", (16, 17, 18, 19)),  # JCB (RuPay's 353, 356 and LankaPay inside)
    ("4", "4", (13, 16, 19)),  # Visa
    ("4903", "4903", (16, 18, 19)),  # Switch
    ("4905", "4905", (16, 18, 19)),
    ("4911", "4911", (16, 18, 19)),
    ("4936", "4936", (16, 18, 19)),
    ("50", "50", tuple(range(12, 20))),  # Maestro, Verve, RuPay (508), GPN, Dankort
    ("51", "55", (16,)),  # Mastercard, Diners Club US
    ("56", "69", tuple(range(12, 20))),  # Maestro, Discover, UnionPay, RuPay, Troy...
    ("57", "59", tuple(range(12, 20))),
    ("81", "82", (16,)),  # RuPay
    ("8600", "8600", (16,)),  # UzCard
    ("9792", "9792", (16,)),  # Troy
    ("9860", "9860", (16,)),  # Humo
)
"""Every issuer range a payment card number is looked for in: (first prefix, last
prefix, lengths). A prefix is compared with as many leading digits as it has."""


def card_issuer_ok(digits: str) -> bool:
    """Whether a number of this length is in an issuer's IIN range (`CARD_RANGES`):
    Visa, Mastercard, American Express, Diners, JCB (the legacy 15-digit 1800 and 2131
    numbers too), Discover, UnionPay, Maestro, Mir, RuPay, Troy, UATP, Verve and
    the others listed there."""
    n = len(digits)
    return any(n in lengths and lo <= digits[:len(lo)] <= hi for lo, hi, lengths in CARD_RANGES)


_CARD_WORDS = re.compile(
    r"(?i)card|visa|master|maestro|amex|american express|diners|discover|jcb|unionpay|"
    r"credit|debit|\bcc\b|\bpan\b|karte|carte|tarjeta|cart[aã]o|carta|kaart|kort"
)
_REFERENCE_WORDS = re.compile(
    r"(?i)order|\bref\b|reference|invoice|tracking|shipment|parcel|barcode|\bean\b|"
    r"\bupc\b|\bgtin\b|\bsku\b|isbn|timestamp|epoch|account number|ticket|booking"
)


CONTEXT_REACH = 40
"""How far before a value the phone and card words are looked for (characters)."""


def context_start(text: str, cut: int) -> int:
    """Where a stream's scanner must hold from instead of `cut`, so a phone or card word
    within `CONTEXT_REACH` before it stays with the number that may follow it (a bare
    number is taken on the strength of that word): the word's start, or `cut`."""
    lo = max(0, cut - CONTEXT_REACH)
    for pattern in (_PHONE_WORDS, _CARD_WORDS):
        m = pattern.search(text, lo, cut)
        if m is not None:
            cut = min(cut, m.start())
    return cut


def _card_context_ok(text: str, start: int, end: int) -> bool:
    before = text[max(0, start - CONTEXT_REACH):start]
    if _CARD_WORDS.search(before):
        return True
    if not text[start:end].isdigit():  # written in groups, the way cards are
        return True
    return end - start > 13 and _REFERENCE_WORDS.search(before) is None


_DIGIT_RUN = re.compile(r"(?<!\d)\d+(?:[ -]\d+)+(?!\d)|(?<!\d)\d{12,19}(?!\d)")
_DIGITS = re.compile(r"\d+")


def _luhn(digits: str) -> bool:
    """The Luhn check, for the regex-only fallback (stdnum's is used when installed)."""
    total = 0
    for i, d in enumerate(reversed(digits)):
        n = int(d) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return total % 10 == 0


def iban(*, regex_only: bool = False) -> Detector:
    """IBANs, checked by `stdnum.iban` (country format and mod-97 check digits)."""
    check = None if regex_only else _require("stdnum.iban", "iban")

    def detect(text: str) -> list[Span]:
        out: list[Span] = []
        for m in IBAN.finditer(text):
            value = m.group()
            # The pattern may run on into a following capitalised word: try shorter ends.
            groups = value.split(" ")
            while groups:
                v = " ".join(groups)
                if _iban_ok(v, check):
                    out.append((m.start(), m.start() + len(v)))
                    break
                groups.pop()
        return out

    return _with_digits(detect)


IBAN_LENGTHS: Mapping[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
    "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
    "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HN": 28, "HR": 21, "HU": 28,
    "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28,
    "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22,
    "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23,
    "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24,
    "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}
"""Each country's IBAN length (the SWIFT registry, as python-stdnum has it): the regex-only
fallback's check beside the mod-97 digits (a value running on into the next words can
pass mod 97 by chance, one time in 97, but seldom at its country's length)."""


def _iban_ok(v: str, check: ModuleType | None) -> bool:
    compact = v.replace(" ", "")
    if len(compact) < 15:
        return False
    if check is not None:
        return bool(check.is_valid(compact))
    if IBAN_LENGTHS.get(compact[:2].upper(), len(compact)) != len(compact):
        return False
    moved = compact[4:] + compact[:4]  # the regex-only fallback: mod 97 and the length
    try:
        return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1
    except ValueError:
        return False


def national_ids(names: Sequence[str]) -> Detector:
    """National ids, each by its format and `stdnum`'s checksum or validity rules."""
    checks: list[tuple[re.Pattern[str], Callable[[str], bool]]] = []
    for name in names:
        if name not in NATIONAL_IDS:
            raise ValueError(f"unknown national id {name!r}; known: {sorted(NATIONAL_IDS)}")
        pattern, module = NATIONAL_IDS[name]
        checks.append((re.compile(pattern), _require(module, "national-id").is_valid))

    def detect(text: str) -> list[Span]:
        return [
            m.span() for p, valid in checks for m in p.finditer(text) if valid(m.group())
        ]

    return _with_digits(detect)


PHONE_OTHER_REGIONS: tuple[str, ...] = (
    "GB", "IE", "DE", "AT", "CH", "FR", "BE", "NL", "ES", "PT", "IT", "SE", "NO", "DK",
    "FI", "PL", "CZ", "RU", "UA", "TR", "IL", "AE", "SA", "EG", "ZA", "NG", "KE", "IN",
    "PK", "CN", "JP", "KR", "TW", "HK", "SG", "ID", "PH", "VN", "TH", "AU", "NZ", "BR",
    "MX", "AR", "CO", "CL", "CA",
)
"""Regions whose national numbers are also found besides `regions`, on stronger evidence
(`phone`): written in the region's own grouping, or after a phone word."""

_PHONE_NATIONAL = re.compile(
    r"(?<![\w+.])(?:\(\d{1,5}\)[ .-]?)?\d{1,5}(?:[ .-]?\d{1,5}){0,5}(?![\w.]\d)"
)
_PHONE_WORDS = re.compile(
    r"(?i)phone|\btel\b|mobile|\bmob\b|mobil|cell|\bcall|\bring|whatsapp|\bsms\b|\bfax\b|"
    r"contact|reach|\bdial|nummer|numéro|número|tel[eé]fono|telefon|t[eé]l[eé]phone|handy|"
    r"m[oó]vil|celular|portable|cellulare|携帯|電話|电话|手机|फ़ोन|फोन|मोबाइल"
)
_NOT_PHONE_BEFORE = re.compile(
    r"(?i)(?:isbn|issn|order|\bref|invoice|tracking|\bid|serial|barcode|\bean|\bsku|"
    r"timestamp|epoch|version|build|account)[^\n]{0,12}$"
)
_NOT_PHONE_AFTER = re.compile(
    r"(?i)\s*(?:ms|milliseconds?|seconds?|secs?|bytes?|[kmgt]i?b|rows?|records?|items?|"
    r"times|users?|views?|downloads?|entries|lines|tokens|hits|requests|units|points|"
    r"words|characters|chars|people|copies|votes|steps|dollars|euros|usd|eur)\b"
)
_DATE = re.compile(r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{4}")


def _not_a_phone(text: str, start: int, end: int, value: str) -> bool:
    """A date, an ISBN, a count ("8835402787 rows") or a reference ("order 0141 ...")."""
    if _DATE.search(value):
        return True
    if _NOT_PHONE_AFTER.match(text, end):
        return True
    return _NOT_PHONE_BEFORE.search(text, max(0, start - 24), start) is not None


def phone(
    regions: Sequence[str], *, regex_only: bool = False,
    other_regions: Sequence[str] = PHONE_OTHER_REGIONS,
) -> Detector:
    """Phone numbers valid in their numbering plan (`phonenumbers`): national formats of
    `regions` and any number written with its +country code; and the national numbers
    of `other_regions` written in that region's own grouping ("(0141) 496 0124",
    "090-1354-7704") or, as a bare run of digits, after a phone word ("mobile: 8835402787").
    Dates, ISBNs, counts ("... rows") and references ("order ...") are not phones."""
    if regex_only:
        return lambda text: [
            m.span() for m in PHONE_REGEX.finditer(text)
            if not _not_a_phone(text, m.start(), m.end(), m.group())
        ]
    pn = _require("phonenumbers", "phone")
    # Many regions' patterns overflow the `re` module's cache (512), which then recompiles
    # them on every call; phonenumbers can keep its own (bounded by its metadata).
    enable_cache = getattr(_require("phonenumbers.re_util", "phone"),
                           "enable_pattern_cache", None)
    if enable_cache is not None:
        enable_cache()
    leniency = pn.Leniency.VALID
    primary = tuple(regions)
    others = tuple(r for r in other_regions if r not in primary)
    national = pn.PhoneNumberFormat.NATIONAL

    def grouped_as(value: str, region: str, num: object) -> bool:
        groups = _DIGITS.findall(value)
        if len(groups) < 2:
            return False
        written = _DIGITS.findall(pn.format_number(num, national))
        if "".join(groups) != "".join(written):  # the trunk prefix as the region writes it
            return False
        cuts, at = set(), 0
        for g in written:
            at += len(g)
            cuts.add(at)
        at = 0
        for g in groups[:-1]:  # each break the writer made is one the region makes
            at += len(g)
            if at not in cuts:
                return False
        return True

    # Each region's fixed-line and mobile number patterns, compiled here: a candidate is
    # tested against them directly (phonenumbers' own validation compiles its patterns
    # through the `re` module's cache, which this many regions overflow).
    plans: list[tuple[str, str, tuple[re.Pattern[str], ...]]] = []
    for region in others:
        meta = pn.PhoneMetadata.metadata_for_region(region)
        if meta is None:
            continue
        descs = (meta.fixed_line, meta.mobile)
        pats = tuple(re.compile(x.national_number_pattern) for x in descs
                     if x is not None and x.national_number_pattern)
        plans.append((region, meta.national_prefix or "", pats))

    def other(text: str, m: re.Match[str]) -> bool:
        value = m.group()
        digits = sum(c.isdigit() for c in value)
        if digits < 6 or digits > 15:
            return False
        worded = _PHONE_WORDS.search(
            text, max(0, m.start() - CONTEXT_REACH), m.start()) is not None
        if not worded and (len(_DIGITS.findall(value)) < 2
                           or _not_a_phone(text, m.start(), m.end(), value)):
            return False  # no evidence a lookup could add to: skip it
        number = "".join(_DIGITS.findall(value))
        for region, trunk, pats in plans:
            nsn = number[len(trunk):] if trunk and number.startswith(trunk) else number
            if not any(p.fullmatch(nsn) for p in pats):
                continue
            if worded:
                return True
            try:
                num = pn.parse(value, region)
            except pn.NumberParseException:
                continue
            if grouped_as(value, region, num):
                return True
        return False

    def detect(text: str) -> list[Span]:
        if PHONE_CANDIDATE.search(text) is None:
            return []
        out = [
            (m.start, m.end)
            for region in primary
            for m in pn.PhoneNumberMatcher(text, region, leniency=leniency)
        ]
        if others:
            taken = sorted(out)
            for m in _PHONE_NATIONAL.finditer(text):
                if any(s < m.end() and m.start() < e for s, e in taken):
                    continue
                if other(text, m):
                    out.append(m.span())
        return [(s, e) for s, e in out if not _not_a_phone(text, s, e, text[s:e])]

    return detect


def custom(pattern: str | re.Pattern[str] | Detector) -> Detector:
    if isinstance(pattern, str):
        pattern = re.compile(pattern)
    if isinstance(pattern, re.Pattern):
        compiled = pattern
        return lambda text: _spans(compiled, text)
    return pattern


URL = re.compile(r"\b(?:https?://|www\.)[^\s<>\"'`]+", re.I)
_URL_TRAILER = ".,;:!?)]}'\""
UUID = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
ETH_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{40}\b")
# (either case: BIP 173 allows an address in capitals)
BECH32_ADDRESS = re.compile(r"\b(?:bc|tb)1[ac-hj-np-z02-9]{11,71}\b", re.I)
BASE58_ADDRESS = re.compile(r"\b[13mn2][1-9A-HJ-NP-Za-km-z]{25,34}\b")
_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def url(text: str) -> list[Span]:
    """http(s):// and www. addresses; trailing punctuation is left out."""
    out: list[Span] = []
    for m in URL.finditer(text):
        v = m.group().rstrip(_URL_TRAILER)
        if len(v) > 4:
            out.append((m.start(), m.start() + len(v)))
    return out


def uuid(text: str) -> Iterable[Span]:
    return _spans(UUID, text) if "-" in text else ()


def _base58check(v: str) -> bool:
    """A Base58Check string (bitcoin's legacy addresses): its last four bytes are the
    double SHA-256 of the rest."""
    import hashlib

    n = 0
    for c in v:
        n = n * 58 + _B58.index(c)
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    raw = b"\0" * (len(v) - len(v.lstrip("1"))) + raw
    if len(raw) < 5:
        return False
    body, check = raw[:-4], raw[-4:]
    return hashlib.sha256(hashlib.sha256(body).digest()).digest()[:4] == check


def crypto_wallet(text: str) -> list[Span]:
    """Bitcoin addresses (legacy ones checked by their Base58Check checksum; bech32 by
    their character set) and Ethereum addresses (0x and 40 hex digits)."""
    out = [m.span() for m in BASE58_ADDRESS.finditer(text) if _base58check(m.group())]
    out.extend(_spans(BECH32_ADDRESS, text))
    if "0x" in text:
        out.extend(_spans(ETH_ADDRESS, text))
    return out


def resolve(found: Iterable[Finding]) -> list[Finding]:
    """Overlapping findings -> disjoint ones: the earliest first, the longest at a tie."""
    out: list[Finding] = []
    for f in sorted(found, key=lambda f: (f.start, -f.end)):
        if f.end <= f.start:
            continue
        if out and f.start < out[-1].end:
            last = out[-1]
            if f.end > last.end:  # overlapping values: cover both
                out[-1] = Finding(last.start, f.end, last.kind)
            continue
        out.append(f)
    return out


__all__ = [
    "BUILTIN_KINDS", "DEFAULT_NATIONAL_IDS", "NATIONAL_IDS", "OPTIONAL_KINDS", "Detector",
    "CONTEXT_REACH", "Finding", "MissingDependency", "PHONE_OTHER_REGIONS", "Span", "card",
    "card_issuer_ok", "context_start", "crypto_wallet", "custom", "email", "iban",
    "ip", "national_ids", "phone", "resolve", "secret", "url", "uuid",
]
