"""Precision and recall of PIIDetector's default detectors and LanguageDetector, on a
small generated corpus, with the CPU each costs per 1,000 characters.

::

    python -m bench.detectors            # the whole corpus, timing repeated 5 times
    python -m bench.detectors --quick    # a smaller corpus, timing once (a smoke test)

Positives: phonenumbers' example numbers (mobile and fixed line) of every region, in
national and international format, with and without a phone word before them; payment
cards generated Luhn-valid in each issuer's IIN range and length; credentials in their
configuration shapes; IPv4 and IPv6 addresses; IBANs and national ids from
python-stdnum. Negatives: timestamps (seconds and milliseconds), dates, ISBN-13s,
EAN-13s, order references and counts (Luhn-valid ones among them), version strings,
configuration lines without a secret. A finding counts as a true positive when it
overlaps the value planted for its kind; any other finding of that kind is a false one.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Iterable

import phonenumbers as pn
from stdnum import ean, luhn

from pipeline.processors import LanguageDetector, PIIDetector, Py3LangidBackend
from pipeline.processors.guards import pii_detectors as d

Sample = tuple[str, str | None, str | None]
"""A text, the kind of the value planted in it (None: a negative) and that value."""

PHONE_WORDS = ("Call me on {}.", "My mobile: {}", "Tel. {} (office)", "Phone {} anytime.")
PLAIN = ("See you at {} tomorrow.", "It is {}, as agreed.", "Write down {} please.")


def _luhn_number(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + "".join(rng.choice("0123456789") for _ in range(length - 1 - len(prefix)))
    return body + luhn.calc_check_digit(body)


def _grouped(digits: str) -> str:
    if len(digits) == 15:
        return f"{digits[:4]} {digits[4:10]} {digits[10:]}"
    return " ".join(digits[i:i + 4] for i in range(0, len(digits), 4))


CARD_RANGES = (
    ("4", 16), ("4", 13), ("51", 16), ("55", 16), ("2221", 16), ("2720", 16), ("34", 15),
    ("37", 15), ("6011", 16), ("65", 16), ("3528", 16), ("36", 14), ("6759", 12),
    ("50", 16), ("6304", 19), ("62", 16), ("2200", 16),
)


def phones(quick: bool, rng: random.Random) -> list[Sample]:
    out: list[Sample] = []
    regions = sorted(pn.SUPPORTED_REGIONS)
    if quick:
        regions = regions[::6]
    for region in regions:
        for kind in (pn.PhoneNumberType.MOBILE, pn.PhoneNumberType.FIXED_LINE):
            num = pn.example_number_for_type(region, kind)
            if num is None:
                continue
            national = pn.format_number(num, pn.PhoneNumberFormat.NATIONAL)
            intl = pn.format_number(num, pn.PhoneNumberFormat.INTERNATIONAL)
            bare = pn.national_significant_number(num)
            for value, templates in ((national, PHONE_WORDS), (national, PLAIN),
                                     (intl, PLAIN), (bare, PHONE_WORDS)):
                out.append((rng.choice(templates).format(value), "phone", value))
    return out


def cards(quick: bool, rng: random.Random) -> list[Sample]:
    out: list[Sample] = []
    for prefix, length in CARD_RANGES:
        for _ in range(2 if quick else 6):
            n = _luhn_number(prefix, length, rng)
            out.append((f"Card number {_grouped(n)}, expires 04/29.", "card", _grouped(n)))
            out.append((f"Pay with card {n} please.", "card", n))
            out.append((f"The number is {_grouped(n)} thanks.", "card", _grouped(n)))
    return out


def secrets(rng: random.Random) -> list[Sample]:
    def s(n: int, chars: str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
          ) -> str:
        return "".join(rng.choice(chars) for _ in range(n))

    aws = s(40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+")
    account_key = s(86) + "=="
    key_id = s(40, "0123456789abcdef")
    pw = s(12)
    return [
        (f"aws_secret_access_key = {aws}", "secret", aws),
        (f'AWS_SECRET_ACCESS_KEY: "{aws}"', "secret", aws),
        (f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={account_key};"
         "EndpointSuffix=core.windows.net", "secret", account_key),
        (f'{{"type": "service_account", "private_key_id": "{key_id}"}}', "secret", key_id),
        (f"DATABASE_URL=postgres://app:{pw}@db.internal:5432/main", "secret", pw),
        (f"redis://default:{pw}@cache.example.com:6379/0", "secret", pw),
        (f"export OPENAI_API_KEY=sk-proj-{s(40)}", "secret", "sk-proj-"),
        (f"token: ghp_{s(36)}", "secret", "ghp_"),
        ("timeout = 30 # seconds", None, None),
        ("url = https://example.com/docs/page", None, None),
        ("postgres://db.internal:5432/main", None, None),
        ("max_tokens: 4096", None, None),
    ]


def addresses(rng: random.Random) -> list[Sample]:
    out: list[Sample] = []
    for _ in range(10):
        a = ".".join(str(rng.randint(1, 254)) for _ in range(4))
        out.append((f"The server at {a} answers.", "ip", a))
        v = ".".join(str(rng.randint(0, 20)) for _ in range(4))
        out.append((f"Upgrade to version {v} tonight.", None, None))
        out.append((f"Running build {v} now.", None, None))
    v6 = "2001:db8::8a2e:370:7334"
    out.append((f"Reach the host on {v6} today.", "ip", v6))
    for iban in ("DE89 3704 0044 0532 0130 00", "GB82 WEST 1234 5698 7654 32",
                 "FR14 2004 1010 0505 0001 3M02 606"):
        out.append((f"Transfer to {iban} by Friday.", "iban", iban))
    for ssn in ("536-90-4399", "078-05-1121"):
        out.append((f"SSN {ssn} on the form.", "national-id", ssn))
    return out


def negatives(quick: bool, rng: random.Random) -> list[Sample]:
    out: list[Sample] = []
    for _ in range(10 if quick else 40):
        ts = rng.randint(1_500_000_000, 1_800_000_000)
        out.append((f"The event timestamp was {ts} in the log.", None, None))
        out.append((f"Logged at {ts * 1000 + rng.randint(0, 999)} ms since epoch.", None, None))
        out.append((f"It ran at 2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
                    f"{rng.randint(0, 23):02d}:15:30.", None, None))
        body = "978" + "".join(rng.choice("0123456789") for _ in range(9))
        code = body + ean.calc_check_digit(body)  # an ISBN-13 is an EAN-13
        out.append((f"See ISBN {code[:3]}-{code[3]}-{code[4:6]}-{code[6:12]}-{code[12]}.",
                    None, None))
        out.append((f"ISBN {code} in the catalogue.", None, None))
        e = "".join(rng.choice("0123456789") for _ in range(12))
        out.append((f"Barcode {e + ean.calc_check_digit(e)} on the box.", None, None))
        out.append((f"Order reference: {_luhn_number(rng.choice('456'), 16, rng)}.", None, None))
        out.append((f"Tracking {_luhn_number(str(rng.randint(1, 9)), 13, rng)} is out.",
                    None, None))
        out.append((f"The table holds {rng.randint(10**9, 10**10 - 1)} rows.", None, None))
        out.append((f"We counted {rng.randint(10**6, 10**9)} views.", None, None))
    return out


def corpus(quick: bool) -> list[Sample]:
    rng = random.Random(7)
    return (phones(quick, rng) + cards(quick, rng) + secrets(rng) + addresses(rng)
            + negatives(quick, rng))


PROSE = ("The committee met on Tuesday to review the budget, and agreed that the new "
         "library wing would open in the spring, once the contractors had finished the "
         "roof and the shelves were in place. ") * 4


def score(find: Callable[[str], Iterable[tuple[int, int, str]]], samples: list[Sample],
          kinds: Iterable[str]) -> dict[str, tuple[int, int, int]]:
    """kind -> (true positives, false positives, planted values)."""
    tally = {k: [0, 0, 0] for k in kinds}
    for text, kind, value in samples:
        at = text.index(value) if kind is not None and value is not None else -1
        end = at + len(value) if value is not None else -1
        if kind in tally:
            tally[kind][2] += 1
        hit = False
        for s, e, k in find(text):
            if k not in tally:
                continue
            if k == kind and s < end and at < e:
                hit = True
            else:
                tally[k][1] += 1
        if hit and kind is not None:
            tally[kind][0] += 1
    return {k: (v[0], v[1], v[2]) for k, v in tally.items()}


def _matcher(regions: tuple[str, ...]) -> Callable[[str], list[tuple[int, int, str]]]:
    """phonenumbers' matcher at VALID leniency over `regions`, nothing else (the phone
    detector before other regions, context and the not-a-phone filters)."""
    def find(text: str) -> list[tuple[int, int, str]]:
        return [(m.start, m.end, "phone") for r in regions
                for m in pn.PhoneNumberMatcher(text, r, leniency=pn.Leniency.VALID)]
    return find


def _kind(det: d.Detector, kind: str) -> Callable[[str], list[tuple[int, int, str]]]:
    return lambda text: [(s, e, kind) for s, e in det(text)]


def cpu_per_1000(find: Callable[[str], object], texts: list[str], repeat: int) -> float:
    chars = sum(len(t) for t in texts) * repeat
    for t in texts:  # warm: the libraries compile their patterns on first use
        find(t)
    start = time.process_time()
    for _ in range(repeat):
        for t in texts:
            find(t)
    return (time.process_time() - start) * 1e6 / chars * 1000  # µs per 1,000 characters


def print_scores(title: str, scores: dict[str, tuple[int, int, int]]) -> None:
    print(f"\n{title}")
    print(f"  {'kind':<12} {'precision':>9} {'recall':>7} {'planted':>8} {'false':>6}")
    for kind, (tp, fp, n) in scores.items():
        prec = tp / (tp + fp) if tp + fp else 1.0
        rec = tp / n if n else float("nan")
        print(f"  {kind:<12} {prec:>9.3f} {rec:>7.3f} {n:>8} {fp:>6}")


LANGUAGE_SENTENCES = {
    "en": ("What time does the train to the airport leave tomorrow morning?",
           "I would like to change my booking to next Friday, if possible."),
    "de": ("Um wie viel Uhr fährt morgen früh der Zug zum Flughafen?",
           "Ich möchte meine Buchung bitte auf nächsten Freitag verschieben."),
    "fr": ("À quelle heure part le train pour l'aéroport demain matin ?",
           "Je voudrais déplacer ma réservation à vendredi prochain, si possible."),
    "es": ("¿A qué hora sale mañana por la mañana el tren al aeropuerto?",
           "Me gustaría cambiar mi reserva al próximo viernes, si es posible."),
    "it": ("A che ora parte domani mattina il treno per l'aeroporto?",
           "Vorrei spostare la mia prenotazione a venerdì prossimo, se possibile."),
    "pt": ("A que horas sai amanhã de manhã o comboio para o aeroporto?",
           "Gostaria de mudar a minha reserva para a próxima sexta-feira."),
    "nl": ("Hoe laat vertrekt morgenochtend de trein naar het vliegveld?",
           "Ik wil mijn boeking graag verplaatsen naar volgende week vrijdag."),
}
LANGUAGE_SHORT = {
    "en": ("Good morning", "Thank you", "Hello there", "See you"),
    "de": ("Guten Morgen", "Danke schön", "Bis morgen", "Wie geht's"),
    "fr": ("Merci beaucoup", "Bonne nuit", "Bonjour madame", "À demain"),
    "es": ("Buenos días", "Muchas gracias", "Hasta luego", "Buenas noches"),
    "it": ("Buongiorno signora", "Grazie mille", "A domani", "Buona notte"),
    "pt": ("Bom dia amigo", "Muito obrigado", "Até amanhã", "Boa noite"),
    "nl": ("Goedemorgen allemaal", "Dank je wel", "Tot morgen", "Goede nacht"),
}


def languages() -> None:
    """Accuracy and abstentions of the old default (all 97 languages, threshold 0.8) and
    the new one (targets plus COMMON_LANGUAGES, the length-aware threshold)."""
    from pipeline.processors.guards import language as ld

    wide = Py3LangidBackend()
    narrow = LanguageDetector(["en"]).backend
    print("\nlanguage (py3langid)")
    print(f"  {'texts':<10} {'setting':<28} {'correct':>8} {'wrong':>6} {'undecided':>10}")
    for name, texts in (("sentences", LANGUAGE_SENTENCES), ("two words", LANGUAGE_SHORT)):
        for setting, backend, length_aware in (("all languages, 0.8", wide, False),
                                               ("targets+common, by length", narrow, True)):
            right = wrong = unsure = 0
            for lang, items in texts.items():
                for t in items:
                    got, p = backend.detect(t)
                    bar = ld._length_threshold(0.8, len(t)) if length_aware else 0.8
                    if p < bar:
                        unsure += 1
                    elif got == lang:
                        right += 1
                    else:
                        wrong += 1
            print(f"  {name:<10} {setting:<28} {right:>8} {wrong:>6} {unsure:>10}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smaller corpus, timing once")
    args = ap.parse_args()
    samples = corpus(args.quick)
    kinds = ("phone", "card", "secret", "ip", "iban", "national-id")
    repeat = 1 if args.quick else 5

    detector = PIIDetector()
    find = lambda t: [(f.start, f.end, f.kind) for f in detector.find(t)]  # noqa: E731
    print(f"corpus: {len(samples)} texts, {sum(len(t) for t, _, _ in samples)} characters")
    print_scores("PIIDetector() defaults", score(find, samples, kinds))

    phone_samples = [s for s in samples if s[1] in ("phone", None)]
    for title, regions in (("phone, phonenumbers' matcher, US only", ("US",)),
                           ("phone, phonenumbers' matcher, all regions",
                            tuple(sorted(pn.SUPPORTED_REGIONS)))):
        print_scores(title, score(_matcher(regions), phone_samples, ("phone",)))
    print_scores("phone, PIIDetector's phone(('US',)) without the other regions",
                 score(_kind(d.phone(("US",), other_regions=()), "phone"), phone_samples,
                       ("phone",)))

    texts = [t for t, _, _ in samples]
    print("\nCPU per 1,000 characters (µs)")
    on_corpus = cpu_per_1000(detector.find, texts, repeat)
    on_prose = cpu_per_1000(detector.find, [PROSE], 20 * repeat)
    print(f"  PIIDetector() on the corpus: {on_corpus:8.0f}")
    print(f"  PIIDetector() on prose:      {on_prose:8.0f}")
    languages()


if __name__ == "__main__":
    main()
