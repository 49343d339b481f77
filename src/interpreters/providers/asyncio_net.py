"""httpcore's network backend on asyncio's own primitives, for the clients the async
providers make for themselves.

Under asyncio httpcore reads through its anyio backend by default, which takes a cancel
scope (`anyio.fail_after`) and a checkpoint on every network read: when a model streams
at its own pace, every event is a read of its own, and those cost over a third of an
async agent run's CPU per chunk. This backend reads from a `Protocol` that buffers what
the transport delivers; a read with bytes already there returns them without waiting,
and a read that waits is bounded by one timer (`loop.call_at`), not a cancel scope.
Under trio every call goes to httpcore's trio backend, as before.

Kept as httpcore's anyio backend behaves: its timeouts raise httpcore's `ConnectTimeout`,
`ReadTimeout` and `WriteTimeout`, its failures `ConnectError`, `ReadError` and
`WriteError`; a read cancelled while it waits takes nothing from the buffer (httpcore
then closes the connection, as it does on any cancelled read); TLS is asyncio's
(`loop.start_tls`, with the server's host name). What the protocol buffers is capped: past
`HIGH_WATER` bytes not yet read it pauses the transport's reading until they are.

`client(timeout)` makes the `httpx.AsyncClient` the providers make when none is given:
httpx's own client, with the same TLS settings, limits and retries, over
`AsyncioTransport`, unless the environment names a proxy (then httpx's default
transports, which honour it).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import socket
import ssl
import typing
import urllib.request
from collections.abc import Coroutine, Iterable

import httpcore
import httpx
from httpcore._utils import is_socket_readable  # (httpcore's own check, as its backends do)

HIGH_WATER = 256 * 1024
"""The most bytes the protocol buffers unread before it stops reading the socket."""

WRITE_SLICE = 64 * 1024
"""The most bytes handed to the transport before checking whether writing is paused."""

_Option = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]


class _Reader(asyncio.Protocol):
    """What the transport delivers, buffered until read; wakes the one waiting read."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.chunks: collections.deque[bytes] = collections.deque()
        self.buffered = 0
        self.eof = False
        self.error: BaseException | None = None  # the connection's, once lost
        self.paused = False  # reading paused (the buffer is full)
        self.waiter: asyncio.Future[bool] | None = None
        self.writable: asyncio.Future[bool] | None = None  # set while writing is paused

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.buffered += len(data)
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)
        if self.buffered > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def eof_received(self) -> None:
        self.eof = True
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        self._wake()
        self.resume_writing()  # (a write waiting while writing is paused sees the loss)

    def pause_writing(self) -> None:
        if self.writable is None or self.writable.done():
            self.writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        writable = self.writable
        if writable is not None and not writable.done():
            writable.set_result(True)

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    def take(self, max_bytes: int) -> bytes:
        """Up to `max_bytes` of what is buffered (some is)."""
        data = self.chunks.popleft()
        if len(data) > max_bytes:
            self.chunks.appendleft(data[max_bytes:])
            data = data[:max_bytes]
        self.buffered -= len(data)
        if self.paused and self.buffered <= HIGH_WATER // 4 and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return data


def _expire(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)


async def _wait(
    loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[bool], timeout: float | None
) -> bool:
    """Whether `waiter` was set before `timeout` seconds (None: no limit) passed."""
    if timeout is None:
        return await waiter
    timer = loop.call_at(loop.time() + timeout, _expire, waiter)
    try:
        return await waiter
    finally:
        timer.cancel()


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One connection, read through a `_Reader`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, reader: _Reader) -> None:
        self._loop = loop
        self._reader = reader
        self._closed = False

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        reader = self._reader
        if not reader.chunks:
            if self._closed:
                raise httpcore.ReadError("the connection is closed")
            if not reader.eof:
                waiter = self._loop.create_future()
                reader.waiter = waiter
                try:
                    if not await _wait(self._loop, waiter, timeout):
                        raise httpcore.ReadTimeout("timed out while reading")
                finally:
                    reader.waiter = None
            if not reader.chunks:  # (the end, or the connection lost)
                if reader.error is not None:
                    raise httpcore.ReadError(str(reader.error)) from reader.error
                return b""
        return reader.take(max_bytes)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        reader = self._reader
        transport = reader.transport
        if self._closed or transport is None:
            raise httpcore.WriteError("the connection is closed")
        if reader.error is not None or transport.is_closing():
            raise httpcore.WriteError(str(reader.error or "the connection is closed"))
        view = memoryview(buffer)
        for start in range(0, len(view), WRITE_SLICE):
            # In slices, each waiting while writing is paused: asyncio's TLS transport
            # hands one write, however large, to the socket's transport without pausing
            # the protocol, so a server that reads nothing would never time the write out.
            if start and transport.is_closing():
                raise httpcore.WriteError(str(reader.error or "the connection is closed"))
            transport.write(view[start:start + WRITE_SLICE])
            writable = reader.writable
            if writable is not None and not writable.done():
                if not await _wait(self._loop, writable, timeout):
                    raise httpcore.WriteTimeout("timed out while writing")
                if reader.error is not None:
                    raise httpcore.WriteError(str(reader.error)) from reader.error

    async def aclose(self) -> None:
        self._close()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        transport = self._reader.transport
        if transport is None:
            return
        if self._loop.is_closed():
            # (a client used by a later event loop: its transport cannot close now; its
            # socket is told so, and closed when the transport is collected)
            with contextlib.suppress(OSError):
                transport.get_extra_info("socket").shutdown(socket.SHUT_RDWR)
        elif _running_loop() is self._loop:
            # Bytes not yet written (a write that timed out) are dropped, and a TLS
            # connection sends no close_notify to wait on, as httpcore's anyio backend
            # does: a graceful close would wait on the server (asyncio's TLS shutdown
            # waits up to 30 s, longer than any of the call's timeouts).
            if transport.get_write_buffer_size() or transport.get_extra_info("ssl_object"):
                transport.abort()
            else:
                transport.close()
        else:
            self._loop.call_soon_threadsafe(transport.close)

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        reader = self._reader
        transport = reader.transport
        if transport is None or self._closed:
            raise httpcore.ConnectError("the connection is closed")
        if reader.chunks or reader.eof:
            # Bytes the peer sent in the clear would be read as the TLS stream's first.
            self._close()
            raise httpcore.ConnectError("the peer sent bytes before the TLS handshake")
        try:
            async with asyncio.timeout(timeout):
                tls = await self._loop.start_tls(
                    transport, reader, ssl_context, server_hostname=server_hostname
                )
        except TimeoutError as e:
            self._close()
            raise httpcore.ConnectTimeout("timed out during the TLS handshake") from e
        except (ssl.SSLError, OSError) as e:
            self._close()
            raise httpcore.ConnectError(str(e)) from e
        except BaseException:
            self._close()
            raise
        if tls is None:  # (only for a transport closed meanwhile)
            self._close()
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        reader.transport = tls
        self._closed = True  # this object is done with; the new one owns the transport
        return AsyncioStream(self._loop, reader)

    def get_extra_info(self, info: str) -> typing.Any:
        transport = self._reader.transport
        if info == "is_readable":
            # Bytes or an end already received make an idle connection unfit for
            # another request, as a readable socket does; so does its event loop being
            # another than the one running (a client used by two loops in turn).
            if self._reader.chunks or self._reader.eof or _running_loop() is not self._loop:
                return True
            if transport is None:
                return True
            sock = transport.get_extra_info("socket")
            return is_socket_readable(sock)
        if transport is None:
            return None
        if info == "ssl_object":
            return transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return transport.get_extra_info("sockname")
        if info == "server_addr":
            return transport.get_extra_info("peername")
        if info == "socket":
            return transport.get_extra_info("socket")
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """Connections on asyncio's transports under asyncio; httpcore's trio backend, as
    httpcore's default backend picks it, under trio."""

    def __init__(self) -> None:
        self._other: httpcore.AsyncNetworkBackend | None = None

    def _fallback(self) -> httpcore.AsyncNetworkBackend | None:
        """httpcore's backend when the running event loop is not asyncio's (trio)."""
        if _running_loop() is not None:
            return None
        if self._other is None:
            # What httpcore's default backend picks under trio (anyio runs on asyncio
            # or trio only, so a loop not asyncio's is trio's).
            self._other = httpcore.TrioBackend()
        return self._other

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[_Option] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        other = self._fallback()
        if other is not None:
            return await other.connect_tcp(
                host, port, timeout=timeout, local_address=local_address,
                socket_options=socket_options,
            )
        loop = asyncio.get_running_loop()
        local = (local_address, 0) if local_address else None
        opening = loop.create_connection(
            _Reader, host, port, local_addr=local, happy_eyeballs_delay=0.25
        )
        return await _opened(loop, opening, timeout, f"{host}:{port}", socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[_Option] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        other = self._fallback()
        if other is not None:
            return await other.connect_unix_socket(
                path, timeout=timeout, socket_options=socket_options
            )
        loop = asyncio.get_running_loop()
        opening = loop.create_unix_connection(_Reader, path)
        return await _opened(loop, opening, timeout, path, socket_options)

    async def sleep(self, seconds: float) -> None:
        other = self._fallback()
        if other is not None:
            await other.sleep(seconds)
        else:
            await asyncio.sleep(seconds)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # (trio's, or none)
        return None


async def _opened(
    loop: asyncio.AbstractEventLoop,
    opening: Coroutine[None, None, tuple[asyncio.BaseTransport, _Reader]],
    timeout: float | None,
    where: str,
    socket_options: Iterable[_Option] | None,
) -> AsyncioStream:
    """The stream of the connection `opening` makes, within `timeout`, its socket's
    options set; failures as httpcore's `ConnectTimeout` and `ConnectError`."""
    try:
        async with asyncio.timeout(timeout):
            transport, reader = await opening
    except TimeoutError as e:
        raise httpcore.ConnectTimeout(f"timed out connecting to {where}") from e
    except OSError as e:
        raise httpcore.ConnectError(str(e)) from e
    stream = AsyncioStream(loop, reader)
    try:
        sock = transport.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
    except OSError as e:
        stream._close()
        raise httpcore.ConnectError(str(e)) from e
    return stream


LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)
"""httpx's default limits (its `DEFAULT_LIMITS`)."""


class AsyncioTransport(httpx.AsyncHTTPTransport):
    """httpx's transport (its TLS settings, limits, HTTP/2 and retries) over a connection
    pool on `AsyncioBackend`."""

    def __init__(
        self,
        *,
        verify: ssl.SSLContext | str | bool = True,
        trust_env: bool = True,
        http2: bool = False,
        limits: httpx.Limits = LIMITS,
        retries: int = 0,
    ) -> None:
        ssl_context = httpx.create_ssl_context(verify=verify, trust_env=trust_env)
        super().__init__(
            verify=ssl_context, trust_env=trust_env, http2=http2, limits=limits,
            retries=retries,
        )
        # httpx's transport keeps its connection pool in `_pool` and reads nothing else
        # per request: the same pool, on this backend. (A later httpx that kept it
        # otherwise keeps its own pool: the transport then reads as httpx's does.)
        if type(getattr(self, "_pool", None)) is httpcore.AsyncConnectionPool:
            self._pool = httpcore.AsyncConnectionPool(
                ssl_context=ssl_context,
                max_connections=limits.max_connections,
                max_keepalive_connections=limits.max_keepalive_connections,
                keepalive_expiry=limits.keepalive_expiry,
                http1=True,
                http2=http2,
                retries=retries,
                network_backend=AsyncioBackend(),
            )


def _env_proxy() -> bool:
    """Whether the environment names a proxy httpx would use."""
    proxies = urllib.request.getproxies()
    return any(proxies.get(scheme) for scheme in ("http", "https", "all"))


def client(timeout: httpx.Timeout) -> httpx.AsyncClient:
    """The client an async provider or resolver makes for itself."""
    if _env_proxy():
        return httpx.AsyncClient(timeout=timeout)
    return httpx.AsyncClient(timeout=timeout, transport=AsyncioTransport())
