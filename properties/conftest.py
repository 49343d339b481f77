"""Hypothesis profiles for the property suite.

- ``ci`` (the default): derandomized, so every run tries the same examples and a CI
  failure reproduces locally; no example database, no deadline (shared runners stall).
- ``long``: many more examples, random, for local bug hunting:
  ``pytest properties --hypothesis-profile=long``.
- ``dev``: fewer examples, random, for quick edits.

The env var ``HYPOTHESIS_PROFILE`` picks the default when no option is given.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=300,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=(HealthCheck.too_slow,),
)
settings.register_profile(
    "long",
    max_examples=5000,
    deadline=None,
    print_blob=True,
    suppress_health_check=(HealthCheck.too_slow,),
)
settings.register_profile("dev", max_examples=50, deadline=None)


def pytest_configure(config: pytest.Config) -> None:
    # `--hypothesis-profile` (applied by hypothesis' own plugin) wins over the default
    if not config.getoption("--hypothesis-profile", default=None):
        settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
