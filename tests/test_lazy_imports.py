"""Names loaded when first used: importing the test writer's face loads no HTTP client,
no built-in guard and no `returns` (each costs every test process its import time, and
every full collection of a long-running one its objects), and every such name resolves
to the object of the module it comes from."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

LAZY_PACKAGES = ("pipeline.processors", "interpreters.memory.embed")


def _printed(code: str) -> str:
    """What a fresh interpreter prints running `code` (its imports start from nothing)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_importing_the_test_face_loads_no_http_client_no_guard_and_no_returns() -> None:
    # (`returns` is loaded by a run only to unwrap a tool's container, which cannot exist
    # before it is imported, and by `to_result`)
    assert _printed(
        "import sys, interpreters.testing; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('httpx', 'httpcore', "
        "'returns') "
        "or m.startswith(('pipeline.processors.guards.', 'interpreters.memory.embed.'))))"
    ) == "['interpreters.memory.embed.scripted']"


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_exported_name_resolves_to_its_home_modules_object(package: str) -> None:
    assert _printed(
        f"import {package} as p, sys; "
        "print(all(getattr(p, n) is getattr(sys.modules[getattr(p, n).__module__], n) "
        "for n in p.__all__))"
    ) == "True"


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_a_name_a_package_does_not_export_is_an_attribute_error(package: str) -> None:
    with pytest.raises(AttributeError, match="NoSuchName"):
        getattr(importlib.import_module(package), "NoSuchName")  # noqa: B009
