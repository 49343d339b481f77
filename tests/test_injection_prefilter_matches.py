"""Every text a word rule or a jailbreak cue matches holds the strings the prefilter
says it cannot match without (texts drawn from each rule's own pattern)."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.processors.guards import injection
from pipeline.processors.guards.injection_prefilter import may_match

_RULES = [(name, p, injection._NEEDS[p]) for _, name, _, p in injection.WORD_RULES] + [
    (name, rx, needs) for name, rx, needs in injection._CUES_LOWER]


@pytest.mark.parametrize(("name", "pattern", "needs"), _RULES, ids=[r[0] for r in _RULES])
def test_a_text_a_rule_matches_passes_its_prefilter(
    name: str, pattern: re.Pattern[str], needs: tuple[frozenset[str], ...]
) -> None:
    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.from_regex(pattern))
    def check(text: str) -> None:
        if pattern.search(text):
            assert may_match(needs, text), (name, text)

    check()
