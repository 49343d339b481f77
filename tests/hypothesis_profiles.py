"""The hypothesis profiles of both suites (tests/ and properties/), registered on import.

- ``ci`` (the default): derandomized, so every run tries the same examples and a CI
  failure reproduces locally; no example database, no deadline (shared runners stall).
- ``long``: many more examples, random, for local bug hunting:
  ``pytest properties --hypothesis-profile=long``.
- ``dev``: fewer examples, random, for quick edits.

The env var ``HYPOTHESIS_PROFILE`` picks the default when no option is given. Each
suite's conftest imports this module, so ``--hypothesis-profile`` works with either.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

PROFILES: dict[str, settings] = {
    "ci": settings(
        max_examples=300,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=(HealthCheck.too_slow,),
    ),
    "long": settings(
        max_examples=5000,
        deadline=None,
        print_blob=True,
        suppress_health_check=(HealthCheck.too_slow,),
    ),
    "dev": settings(max_examples=50, deadline=None),
}

for _name, _profile in PROFILES.items():
    settings.register_profile(_name, _profile)


def load_default(config: pytest.Config) -> None:
    """In `pytest_configure`: the default profile, unless `--hypothesis-profile` (applied
    by hypothesis' own plugin) named one."""
    if not config.getoption("--hypothesis-profile", default=None):
        settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
