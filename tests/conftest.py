"""Fixtures for every test under tests/ (helpers live in tests/helpers.py).

`anyio_backend` runs every `@pytest.mark.anyio` test on asyncio and on trio (a module
may narrow it with its own fixture). `server` is a replay HTTP server on 127.0.0.1 for the
provider and fault tests. When two msgspec values differ, an assertion shows
the fields that differ, one by one (`pytest_assertrepr_compare`). The hypothesis
profiles are `tests/hypothesis_profiles.py`'s, as for properties/.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.hypothesis_profiles import load_default
from tests.providers.server import ReplayServer
from tests.struct_diff import struct_diff


def pytest_configure(config: pytest.Config) -> None:
    load_default(config)  # the profiles of both suites (`--hypothesis-profile=dev|ci|long`)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def replay_server() -> Iterator[ReplayServer]:
    """One replay server on 127.0.0.1 for the session (see `server`)."""
    srv = ReplayServer()
    yield srv
    srv.close()


@pytest.fixture
def server(replay_server: ReplayServer) -> ReplayServer:
    """The replay server on 127.0.0.1, with no queued replies and no recorded requests."""
    replay_server.reset()
    return replay_server


def pytest_assertrepr_compare(op: str, left: object, right: object) -> list[str] | None:
    if op == "==":
        return struct_diff(left, right)
    return None
