from tests.providers.conftest import _server, anyio_backend, server

__all__ = ["_server", "anyio_backend", "server"]
