from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.providers.server import ReplayServer


@pytest.fixture(scope="session")
def _server() -> Iterator[ReplayServer]:
    srv = ReplayServer()
    yield srv
    srv.close()


@pytest.fixture
def server(_server: ReplayServer) -> ReplayServer:
    """The replay server on 127.0.0.1, with no queued replies and no recorded requests."""
    _server.reset()
    return _server


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)
