"""PIIDetector's default detectors on the shapes they are known to get wrong: national
phone numbers of other countries, short Maestro cards, Luhn-valid numbers that are not
cards, credentials in configuration shapes, and version strings that look like IPs."""

from __future__ import annotations

import pytest

from interpreters.testing import Say
from pipeline.processors import PIIDetector
from tests.helpers import chunked, make_agent, simulate, streamed_text

DEFAULT = PIIDetector()


def kinds(text: str) -> list[tuple[str, str]]:
    return [(f.kind, text[f.start:f.end]) for f in DEFAULT.find(text)]


@pytest.mark.parametrize(("text", "value"), [
    ("Call our Glasgow office on (0141)4960124 before noon.", "(0141)4960124"),
    ("Ring me on 0141 496 0124 tomorrow.", "0141 496 0124"),
    ("My Tokyo number is 090-1354-7704, any time.", "090-1354-7704"),
    ("Mobile: 8835402787 (after six).", "8835402787"),
    ("Ruf mich an: 030 901820 oder per Mail.", "030 901820"),
    ("Still a US number: (415) 555-2671.", "(415) 555-2671"),
    ("International: +44 20 7946 0958.", "+44 20 7946 0958"),
])
def test_national_phone_numbers_of_other_countries_are_found(text: str, value: str) -> None:
    assert ("phone", value) in kinds(text)


@pytest.mark.parametrize("text", [
    "The job ran at 2023-12-01 10:15:30 and took 4155550123 ms.",
    "The table holds 8835402787 rows after the import.",
    "See ISBN 978-3-16-148410-0 for the details.",
    "Uploaded 1701388800122 bytes in total.",
])
def test_numbers_that_are_not_phones_are_left_alone(text: str) -> None:
    assert [k for k, _ in kinds(text) if k == "phone"] == []


@pytest.mark.parametrize(("text", "value"), [
    ("Pay with Maestro card 6759 6498 2648 please.", "6759 6498 2648"),
    ("My maestro: 675964982648.", "675964982648"),
    ("Card number 4111 1111 1111 1111.", "4111 1111 1111 1111"),
    ("Amex 3782 822463 10005 on file.", "3782 822463 10005"),
])
def test_cards_in_their_issuer_ranges_are_found(text: str, value: str) -> None:
    assert ("card", value) in kinds(text)


@pytest.mark.parametrize("text", [
    "Order reference: 4539578763621403, shipped today.",
    "Barcode (EAN-13) 4006381334013 on the box.",
    "The event timestamp was 1701388800122 in the log.",
    "Tracking number 7999999999999995 is on its way.",
])
def test_luhn_valid_numbers_that_are_not_cards_are_left_alone(text: str) -> None:
    assert [k for k, _ in kinds(text) if k == "card"] == []


@pytest.mark.parametrize(("text", "value"), [
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ('AWS_SECRET_ACCESS_KEY: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("DefaultEndpointsProtocol=https;AccountName=acme;AccountKey="
     + "a" * 43 + "Z" * 43 + "==;EndpointSuffix=core.windows.net",
     "a" * 43 + "Z" * 43 + "=="),
    ('"private_key_id": "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",',
     "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"),
    ("DATABASE_URL=postgres://admin:s3cretPass@db.example.com:5432/app", "s3cretPass"),
    ("mongodb+srv://app:Pa55w0rd!x@cluster0.example.net/test", "Pa55w0rd!x"),
])
def test_common_credential_shapes_are_secrets(text: str, value: str) -> None:
    found = kinds(text)
    assert any(k == "secret" and value in v for k, v in found), found
    assert all(k == "secret" for k, _ in found), found


def test_a_gcp_service_account_private_key_is_a_secret() -> None:
    text = ('{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\n'
            'MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n", '
            '"client_email": "x@p.iam.gserviceaccount.com"}')
    assert any(k == "secret" and "MIIEvQIB" in v for k, v in kinds(text))


@pytest.mark.parametrize("text", [
    "Upgrade to version 1.2.3.4 tonight.",
    "Running build 10.0.19041.1 on the host.",
    "firmware v2.1.0.7 is out",
])
def test_version_strings_are_not_ip_addresses(text: str) -> None:
    assert [k for k, _ in kinds(text) if k == "ip"] == []


def test_an_address_after_other_words_is_still_an_ip() -> None:
    assert ("ip", "10.1.2.3") in kinds("The server at 10.1.2.3 has version 2 installed.")


@pytest.mark.parametrize("size", [1, 5, 17])
def test_local_phones_maestro_cards_and_aws_secrets_are_redacted_on_the_stream(size: int) -> None:
    values = ("(0141)4960124", "8835402787", "675964982648",
              "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    text = ("Call our Glasgow office on (0141)4960124 before noon. Mobile: 8835402787 "
            "(after six). My maestro: 675964982648. And the config line "
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY, keep it.")
    ran = simulate(make_agent(output_processors=[PIIDetector()]),
                   [Say(chunked(text, size))])
    out = streamed_text(ran.chunks)
    assert ran.result.status == "finished" and out == ran.result.text
    assert all(v not in out for v in values), out
    assert "Upgrade" not in out and "keep it." in out


@pytest.mark.parametrize("value", [
    "de89 3704 0044 0532 0130 00",
    "De89 3704 0044 0532 0130 00",
    "gb82west12345698765432",
    "GB82West12345698765432",
])
def test_an_iban_in_lower_or_mixed_case_is_found(value: str) -> None:
    text = f"Please wire it to {value} by Friday."
    assert ("iban", value) in kinds(text)
    regex_only = PIIDetector(regex_only=True)
    assert [text[f.start:f.end] for f in regex_only.find(text) if f.kind == "iban"] == [value]


@pytest.mark.parametrize("value", ["180000000000002", "213100000000001", "3530111333300000"])
def test_jcb_numbers_old_and_new_are_cards(value: str) -> None:
    assert ("card", value) in kinds(f"My JCB card: {value}.")


def test_a_bech32_address_in_upper_case_is_a_crypto_wallet() -> None:
    p = PIIDetector(types=("crypto-wallet",))
    value = "BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4"
    assert [f.kind for f in p.find(f"send it to {value} now")] == ["crypto-wallet"]


def test_the_regex_only_iban_lengths_are_the_registrys() -> None:
    import re
    from pathlib import Path

    import stdnum.iban

    from pipeline.processors.guards.pii_detectors import IBAN_LENGTHS

    registry = {}
    for line in (Path(stdnum.iban.__file__).parent / "iban.dat").read_text().splitlines():
        m = re.match(r'([A-Z]{2}) .*bban="([^"]+)"', line)
        if m:
            registry[m.group(1)] = 4 + sum(int(n) for n in re.findall(r"(\d+)!", m.group(2)))
    assert dict(IBAN_LENGTHS) == registry


def test_regex_only_an_iban_does_not_run_on_into_the_words_after_it() -> None:
    text = "Please wire it to DE94180975220111593557 by Friday."
    p = PIIDetector(types=("iban",), regex_only=True)
    assert [text[f.start:f.end] for f in p.find(text)] == ["DE94180975220111593557"]
