"""The built-in processors check every option when they are built: a misspelt strategy, a
misspelt kind, a value of the wrong type or out of range is a `ProcessorConfigError`
naming the option, the value and what is allowed, never a guard that lets text through."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline.processors import (
    ApproxTokenCounter,
    BatchPartsProcessor,
    LanguageDetector,
    ModerationProcessor,
    PIIDetector,
    ProcessorConfigError,
    PromptInjectionDetector,
    SystemPromptScrubber,
    TokenLimiterProcessor,
    ToolCallFilter,
    UnicodeNormalizer,
)


class English:
    def detect(self, text: str) -> tuple[str, float]:
        return "en", 1.0


def test_a_misspelt_pii_strategy_is_an_error_naming_it_and_the_allowed_ones() -> None:
    with pytest.raises(ProcessorConfigError) as err:
        PIIDetector(strategy="redcat", regex_only=True)  # type: ignore[arg-type]
    e = err.value
    assert (e.processor, e.option, e.value) == ("PIIDetector", "strategy", "'redcat'")
    for allowed in ("detect", "redact", "mask", "hash", "remove", "block"):
        assert repr(allowed) in e.allowed
    assert "strategy" in str(e) and "'redcat'" in str(e) and "'redact'" in str(e)


def test_a_misspelt_kind_in_pii_strategies_is_an_error() -> None:
    with pytest.raises(ProcessorConfigError) as err:
        PIIDetector(strategies={"emial": "block"}, regex_only=True)
    assert err.value.option == "strategies"
    assert "'emial'" in err.value.value
    assert "'email'" in err.value.allowed


def test_a_misspelt_strategy_in_pii_strategies_is_an_error() -> None:
    with pytest.raises(ProcessorConfigError) as err:
        PIIDetector(strategies={"email": "blok"}, regex_only=True)  # type: ignore[dict-item]
    assert err.value.option == "strategies['email']"
    assert err.value.value == "'blok'"
    assert "'block'" in err.value.allowed


def test_a_strategy_for_a_kind_the_detector_does_not_look_for_is_an_error() -> None:
    # The caller believes cards are blocked; they are not even looked for.
    with pytest.raises(ProcessorConfigError, match="strategies"):
        PIIDetector(types=("email",), strategies={"card": "block"}, regex_only=True)


def test_pii_strategies_may_name_custom_kinds_and_the_judge() -> None:
    p = PIIDetector(custom={"order": r"ORD-\d+"}, strategies={"order": "mask"},
                    regex_only=True)
    assert p.strategy_for("order") == "mask"
    PIIDetector(judge_model="m", strategies={"judged": "block"}, regex_only=True)


def test_unknown_moderation_strategy_and_output_check_are_errors() -> None:
    with pytest.raises(ProcessorConfigError) as err:
        ModerationProcessor("judge", strategy="blok")  # type: ignore[arg-type]
    assert err.value.option == "strategy" and "'retry'" in err.value.allowed
    with pytest.raises(ProcessorConfigError, match="output_check"):
        ModerationProcessor("judge", output_check="steps")  # type: ignore[arg-type]


def test_unknown_prompt_injection_strategy_and_judge_mode_are_errors() -> None:
    with pytest.raises(ProcessorConfigError) as err:
        PromptInjectionDetector(strategy="redact")  # type: ignore[arg-type]
    assert err.value.option == "strategy" and "'rewrite'" in err.value.allowed
    with pytest.raises(ProcessorConfigError, match="judge"):
        PromptInjectionDetector(judge="sometimes")  # type: ignore[arg-type]


def test_a_bool_is_not_a_number_and_a_number_is_not_a_bool() -> None:
    with pytest.raises(ProcessorConfigError, match="window"):
        PIIDetector(window=True, regex_only=True)
    with pytest.raises(ProcessorConfigError, match="threshold"):
        ModerationProcessor("judge", threshold=True)
    with pytest.raises(ProcessorConfigError, match="on_input"):
        PIIDetector(on_input=0, regex_only=True)  # type: ignore[arg-type]
    with pytest.raises(ProcessorConfigError, match="fail_open"):
        PromptInjectionDetector(fail_open="no")  # type: ignore[arg-type]


def test_a_bare_string_where_a_list_is_expected_is_an_error() -> None:
    # Iterated, "US" would be the regions "U" and "S"; "search" the tools "s", "e", ...
    with pytest.raises(ProcessorConfigError, match="phone_regions"):
        PIIDetector(phone_regions="US", regex_only=True)
    with pytest.raises(ProcessorConfigError, match="exclude"):
        ToolCallFilter(exclude="search")
    with pytest.raises(ProcessorConfigError, match="target_languages"):
        LanguageDetector("en", backend=English())
    with pytest.raises(ProcessorConfigError, match="roles"):
        ModerationProcessor("judge", roles="user")  # type: ignore[arg-type]


def test_unknown_roles_and_languages_are_errors() -> None:
    with pytest.raises(ProcessorConfigError) as err:
        UnicodeNormalizer(roles=("usr",))  # type: ignore[arg-type]
    assert err.value.option == "roles[0]" and "'assistant'" in err.value.allowed
    with pytest.raises(ProcessorConfigError, match="target_languages"):
        LanguageDetector(["englsh"], backend=English())
    assert LanguageDetector(["English", "fr"], backend=English()).targets == ("en", "fr")


def test_ranges_are_checked() -> None:
    with pytest.raises(ProcessorConfigError, match="max_hold"):
        PIIDetector(window=64, max_hold=100, regex_only=True)
    with pytest.raises(ProcessorConfigError, match="threshold"):
        PromptInjectionDetector(threshold=float("nan"))
    with pytest.raises(ProcessorConfigError, match="classifier_threshold"):
        PromptInjectionDetector(classifier_threshold=1.5)
    with pytest.raises(ProcessorConfigError, match="classifier_threshold"):
        PromptInjectionDetector(classifier_threshold="0.9")  # type: ignore[arg-type]
    with pytest.raises(ProcessorConfigError, match="limit"):
        TokenLimiterProcessor(0)
    with pytest.raises(ProcessorConfigError, match="max_chars"):
        BatchPartsProcessor(max_chars=0)
    with pytest.raises(ProcessorConfigError, match="bytes_per_token"):
        ApproxTokenCounter(float("inf"))
    with pytest.raises(ProcessorConfigError, match="min_text_length"):
        LanguageDetector(min_text_length=-1, backend=English())


def test_an_empty_prompt_to_protect_is_an_error() -> None:
    # "" protects nothing: every leak would pass.
    with pytest.raises(ProcessorConfigError, match="prompt"):
        SystemPromptScrubber(prompt="")


def test_other_misspelt_choices_are_errors() -> None:
    with pytest.raises(ProcessorConfigError, match="redaction_method"):
        SystemPromptScrubber(redaction_method="star")  # type: ignore[arg-type]
    with pytest.raises(ProcessorConfigError, match="count_mode"):
        TokenLimiterProcessor(10, count_mode="parts")  # type: ignore[arg-type]
    with pytest.raises(ProcessorConfigError, match="form"):
        UnicodeNormalizer(form="NFD")  # type: ignore[arg-type]
    with pytest.raises(ProcessorConfigError, match="fold_homoglyphs"):
        UnicodeNormalizer(fold_homoglyphs="on")  # type: ignore[arg-type]
    with pytest.raises(ProcessorConfigError, match="on_error"):
        PIIDetector(on_error="ignore", regex_only=True)  # type: ignore[arg-type]
    with pytest.raises(ProcessorConfigError, match="types"):
        PIIDetector(types=("email", "phon"), regex_only=True)  # type: ignore[arg-type]


def test_the_error_is_a_value_error_and_a_type_error() -> None:
    """Code that caught the ValueError (a bad value) or TypeError (a bad type) these
    constructors raised before still catches it."""
    assert issubclass(ProcessorConfigError, ValueError)
    assert issubclass(ProcessorConfigError, TypeError)
    with pytest.raises(TypeError, match="count"):
        TokenLimiterProcessor(10, counter=object())  # type: ignore[arg-type]


MYPY_CASES = {
    "PIIDetector(strategy='redcat')": "PIIDetector(strategy='redcat')",
    "PIIDetector(strategies={'email': 'blok'})": "PIIDetector(strategies={'email': 'blok'})",
    "PIIDetector(types=['phon'])": "PIIDetector(types=['phon'])",
    "PIIDetector(on_error='ignore')": "PIIDetector(on_error='ignore')",
    "ModerationProcessor strategy": "ModerationProcessor('m', strategy='blok')",
    "ModerationProcessor output_check": "ModerationProcessor('m', output_check='steps')",
    "PromptInjectionDetector strategy": "PromptInjectionDetector(strategy='redact')",
    "PromptInjectionDetector judge": "PromptInjectionDetector(judge='sometimes')",
    "LanguageDetector strategy": "LanguageDetector(strategy='translat')",
    "SystemPromptScrubber": "SystemPromptScrubber(redaction_method='star')",
    "TokenLimiterProcessor": "TokenLimiterProcessor(10, strategy='cut')",
    "UnicodeNormalizer": "UnicodeNormalizer(fold_homoglyphs='on')",
    "roles": "UnicodeNormalizer(roles=['usr'])",
}

MYPY_HEADER = """\
from pipeline.processors import (
    LanguageDetector, ModerationProcessor, PIIDetector, PromptInjectionDetector,
    SystemPromptScrubber, TokenLimiterProcessor, UnicodeNormalizer,
)
"""


@pytest.mark.slow  # runs mypy
def test_mypy_rejects_a_misspelt_option_value(tmp_path: Path) -> None:
    from mypy import api

    source = MYPY_HEADER + "PIIDetector(strategy='mask', strategies={'email': 'block'})\n"
    lines: dict[str, int] = {}
    for case, call in MYPY_CASES.items():
        source += f"{call}\n"
        lines[case] = source.count("\n")
    f = tmp_path / "case.py"
    f.write_text(source)
    out, err, status = api.run(
        ["--strict", "--no-incremental", "--cache-dir", str(tmp_path / ".c"), str(f)]
    )
    assert status == 1, out + err
    error_lines = {int(m.group(1)) for m in re.finditer(r"case\.py:(\d+): error", out)}
    assert MYPY_HEADER.count("\n") + 1 not in error_lines, out  # the legal call
    missed = [case for case, line in lines.items() if line not in error_lines]
    assert missed == [], out


def test_the_kind_literal_is_every_built_in_kind() -> None:
    from typing import get_args

    from pipeline.processors.guards import pii_detectors as d
    from pipeline.processors.guards.pii import DEFAULT_KINDS, Kind

    assert get_args(Kind) == d.BUILTIN_KINDS + d.OPTIONAL_KINDS
    assert DEFAULT_KINDS == d.BUILTIN_KINDS
