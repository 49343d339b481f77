"""PIIDetector options matching Mastra's: the `remove` method, the opt-in kinds url,
uuid and crypto-wallet (off by default), and custom judge instructions."""

from __future__ import annotations

import pytest

from interpreters.testing import Say
from pipeline.processors import PIIDetector
from pipeline.processors.guards import pii_detectors as d
from pipeline.processors.guards.pii import Kind
from tests.helpers import make_agent, simulate, streamed_text

BTC = "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2"
BECH32 = "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"
ETH = "0x52908400098527886E0F7030069857D2E4169EE7"
UUID = "123e4567-e89b-12d3-a456-426614174000"


def test_remove_drops_the_value() -> None:
    p = PIIDetector(strategy="remove", types=("email",))
    assert p.redact_text("mail me at ada@example.com now") == "mail me at  now"


def test_remove_on_the_stream_across_chunks() -> None:
    p = PIIDetector(strategy="remove", types=("email",))
    ran = simulate(make_agent(output_processors=[p]),
                   [Say(["write to ada@exa", "mple.com today"])])
    assert streamed_text(ran.chunks) == ran.result.text == "write to  today"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("see https://example.com/a?b=c.", "url"),
        ("or www.example.org/path, ok", "url"),
        (f"order {UUID} shipped", "uuid"),
        (f"send to {BTC} please", "crypto-wallet"),
        (f"send to {BECH32} please", "crypto-wallet"),
        (f"send to {ETH} please", "crypto-wallet"),
    ],
)
def test_opt_in_kinds_are_found(text: str, kind: Kind) -> None:
    p = PIIDetector(types=(kind,))
    out = p.redact_text(text)
    assert f"[REDACTED:{kind}]" in out
    assert out.endswith((".", ", ok", " shipped", " please"))


def test_a_base58_address_with_a_wrong_checksum_is_not_a_wallet() -> None:
    wrong = BTC[:-1] + ("3" if BTC[-1] != "3" else "4")
    p = PIIDetector(types=("crypto-wallet",))
    assert p.redact_text(f"send to {wrong} please") == f"send to {wrong} please"


def test_opt_in_kinds_are_off_by_default() -> None:
    p = PIIDetector()
    assert not {kind for kind, _ in p.detectors} & set(d.OPTIONAL_KINDS)
    text = f"see https://example.com/about and {BTC}"
    assert p.redact_text(text) == text
    assert set(d.OPTIONAL_KINDS) == {"url", "uuid", "crypto-wallet"}
    assert not set(d.OPTIONAL_KINDS) & set(d.BUILTIN_KINDS)


def test_judge_instructions_replace_the_judge_prompt() -> None:
    p = PIIDetector(judge_model="judge", judge_instructions="Find names only. JSON.",
                    on_result=False)
    ran = simulate(make_agent(input_processors=[p]), [Say("ok")],
                   models={"judge": [Say('{"values": []}')]})
    assert ran.result.status == "finished"
    assert ran.models["judge"].requests[0].system[0].content == "Find names only. JSON."
