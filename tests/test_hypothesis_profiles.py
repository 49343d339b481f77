"""The hypothesis profiles are registered for both suites: `--hypothesis-profile=NAME`
works with `pytest tests` as with `pytest properties`, and the profile named is loaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from tests.hypothesis_profiles import PROFILES

ROOT = Path(__file__).resolve().parent.parent
EXPECT = "EXPECT_HYPOTHESIS_PROFILE"


def test_the_profile_named_on_the_command_line_is_loaded() -> None:
    """Run by `test_each_suite_accepts_each_profile` in a child pytest."""
    want = os.environ.get(EXPECT)
    if want is None:
        pytest.skip("checked in a child pytest run with --hypothesis-profile")
    loaded, named = settings.default, PROFILES[want]
    assert loaded is not None
    assert (loaded.max_examples, loaded.derandomize, loaded.database) == (
        named.max_examples, named.derandomize, named.database)


def _pytest(*args: str, profile: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, EXPECT: profile}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args,
         f"--hypothesis-profile={profile}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["dev", "ci", "long"])
def test_each_suite_accepts_each_profile(profile: str) -> None:
    here = f"tests/{Path(__file__).name}::test_the_profile_named_on_the_command_line_is_loaded"
    done = _pytest(here, "-rA", profile=profile)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout, done.stdout
    # the property suite alone: the option is understood at start-up (collection only)
    done = _pytest("properties/test_messages_properties.py", "--collect-only", profile=profile)
    assert done.returncode == 0, done.stdout + done.stderr


def test_profiles_differ_so_the_check_can_tell_them_apart() -> None:
    shown = {(p.max_examples, p.derandomize) for p in PROFILES.values()}
    assert len(shown) == len(PROFILES) == 3
    for name, profile in PROFILES.items():  # registered: the names load these settings
        assert settings.get_profile(name).max_examples == profile.max_examples
