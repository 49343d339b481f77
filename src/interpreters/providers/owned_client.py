"""The closing of an httpx client an object may own: the embedders' `close` and `with`."""

from __future__ import annotations

from typing import Self

import httpx


class OwnedClient:
    """`close()` closes the client the object made (a client given is left to its owner);
    `with` closes it at the end of the block."""

    _own: bool
    _client: httpx.Client

    def close(self) -> None:
        if self._own:
            self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
