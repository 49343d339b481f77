"""Fixtures and settings for the property suite: the hypothesis profiles are those of
`tests/hypothesis_profiles.py` (`ci` by default; `--hypothesis-profile=dev|long`)."""

from __future__ import annotations

import pytest

from tests.hypothesis_profiles import load_default


def pytest_configure(config: pytest.Config) -> None:
    load_default(config)
