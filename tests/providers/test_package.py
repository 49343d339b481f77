"""`interpreters.providers`: every public name resolves, and the provider contract
(`interpreters.providers.provider`, which every interpreter imports) loads neither httpx
nor the wire formats."""

from __future__ import annotations

import subprocess
import sys

import pytest

import interpreters.providers as providers
from interpreters.providers import http, router


def test_every_public_name_resolves_to_its_home() -> None:
    assert set(providers._HOME) == set(providers.__all__)
    for name in providers.__all__:
        assert getattr(providers, name) is not None, name
    assert providers.HttpProvider is http.HttpProvider
    assert providers.Resolver is router.Resolver


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="Nope"):
        getattr(providers, "Nope")  # noqa: B009


def test_importing_the_interpreters_does_not_load_httpx() -> None:
    code = "import sys, interpreters; print(sorted(m for m in sys.modules if m == 'httpx' " \
           "or m.startswith('interpreters.providers.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "['interpreters.providers.provider']"
