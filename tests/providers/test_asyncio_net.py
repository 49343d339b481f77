"""The asyncio network backend of the async providers' own clients: TLS, timeouts,
cancellation and its buffer's cap, against real loopback servers."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import gc
import socket
import ssl
import threading
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpcore
import httpx
import pytest

from interpreters.providers import asyncio_net
from tests.providers.server import ReplayServer, Reply

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
RESPONSE = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello"
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """These tests drive asyncio servers (the backend's trio side is httpcore's own)."""
    return "asyncio"


@asynccontextmanager
async def serving(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        try:
            await handler(reader, writer)
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for w in writers:
            w.close()
        await asyncio.sleep(0.01)  # (the transports close on the loop's next pass)


async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Each request on the connection answered, until the client hangs up."""
    while True:
        try:
            await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        writer.write(RESPONSE)
        await writer.drain()


def self_signed(tmp: Path, host: str) -> tuple[Path, Path]:
    """A certificate for `host` and its key, made here (PEM files)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp / "cert.pem", tmp / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ))
    return cert_file, key_file


def timeouts(seconds: float) -> httpx.Timeout:
    """`seconds` for each read and write; connecting (and the TLS handshake) at least 5 s,
    so that a loaded machine's slow connect is not what a test sees."""
    return httpx.Timeout(seconds, connect=max(seconds, 5.0))


def client(verify: ssl.SSLContext | bool = True, timeout: float = 5.0) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        timeout=timeouts(timeout), transport=asyncio_net.AsyncioTransport(verify=verify)
    )


async def test_a_provider_made_client_reads_over_the_asyncio_backend() -> None:
    made = asyncio_net.client(httpx.Timeout(5.0))
    async with made, serving(answer) as port:
        r = await made.get(f"http://127.0.0.1:{port}/")
        assert r.status_code == 200 and r.content == b"hello"
        streams = [c._connection._network_stream
                   for c in made._transport._pool.connections  # type: ignore[attr-defined]
                   if c._connection is not None]
        assert streams and all(isinstance(s, asyncio_net.AsyncioStream) for s in streams)


async def test_tls_verifies_the_servers_name_and_certificate(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path, "localhost")
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    trusting = ssl.create_default_context(cafile=str(cert))
    async with serving(answer, server_tls) as port:
        async with client(trusting) as c:
            r = await c.get(f"https://localhost:{port}/")
            assert r.status_code == 200 and r.content == b"hello"
        async with client(True) as c:  # the system's CAs: a self-signed certificate fails
            with pytest.raises(httpx.ConnectError):
                await c.get(f"https://localhost:{port}/")
        async with client(trusting) as c:  # a name the certificate is not for
            with pytest.raises(httpx.ConnectError):
                await c.get(f"https://127.0.0.1:{port}/")


async def test_a_silent_server_is_a_read_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n")
        await asyncio.sleep(5)
        writer.close()

    async with (
        serving(silent) as port, client(timeout=0.2) as c,
        c.stream("GET", f"http://127.0.0.1:{port}/") as r,
    ):
        with pytest.raises(httpx.ReadTimeout):
            async for _ in r.aiter_raw():
                pass


async def test_a_server_that_reads_nothing_is_a_write_timeout() -> None:
    async def deaf(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)

    big = b"x" * (64 * 1024 * 1024)  # more than the sockets' buffers hold
    async with serving(deaf) as port, client(timeout=0.2) as c:
        with pytest.raises(httpx.WriteTimeout):
            await c.post(f"http://127.0.0.1:{port}/", content=big)


async def test_a_refused_connection_is_a_connect_error() -> None:
    async with serving(answer) as port:
        pass  # closed: nothing listens there now
    async with client() as c:
        with pytest.raises(httpx.ConnectError):
            await c.get(f"http://127.0.0.1:{port}/")


async def test_a_read_cancelled_midway_leaves_no_connection_in_the_pool() -> None:
    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc")
            await writer.drain()
            await asyncio.sleep(0.3)
            writer.write(b"defghij")

    async with serving(slow) as port, client() as c:
        async def read() -> None:
            async with c.stream("GET", f"http://127.0.0.1:{port}/") as r:
                async for _ in r.aiter_raw():
                    pass

        task = asyncio.create_task(read())
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert c._transport._pool.connections == []  # type: ignore[attr-defined]
        r = await c.get(f"http://127.0.0.1:{port}/")  # a fresh connection, read whole
        assert r.content == b"abcdefghij"


def test_the_buffer_stops_reading_past_its_cap() -> None:
    class Transport(asyncio.Transport):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[str] = []

        def pause_reading(self) -> None:
            self.calls.append("pause")

        def resume_reading(self) -> None:
            self.calls.append("resume")

    t = Transport()
    reader = asyncio_net._Reader()
    reader.connection_made(t)
    piece = b"x" * 65536
    while reader.buffered <= asyncio_net.HIGH_WATER:
        reader.data_received(piece)
    assert t.calls == ["pause"]
    while reader.chunks:
        reader.take(65536)
    assert t.calls == ["pause", "resume"] and reader.buffered == 0


def test_a_proxy_named_by_the_environment_keeps_httpx_own_transports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    made = asyncio_net.client(httpx.Timeout(1.0))
    assert not isinstance(made._transport, asyncio_net.AsyncioTransport)
    monkeypatch.delenv("HTTPS_PROXY")
    for name in ("HTTP_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert isinstance(asyncio_net.client(httpx.Timeout(1.0))._transport,
                      asyncio_net.AsyncioTransport)


def test_a_client_serves_one_event_loop_after_another(server: ReplayServer) -> None:
    # (httpx's own backend fails here with "Event loop is closed": the pooled connection
    # of the first loop is reused from the second)
    made = asyncio_net.client(httpx.Timeout(5.0))

    async def get() -> bytes:
        return (await made.get(server.url + "/")).content

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)  # the first loop's socket, collected
        for _ in range(2):
            server.queue(Reply(body=b"hello", chunked=False))
            assert asyncio.run(get()) == b"hello"
        asyncio.run(made.aclose())
        gc.collect()


def test_under_trio_a_client_reads_through_httpcores_trio_backend(server: ReplayServer) -> None:
    trio = pytest.importorskip("trio")
    made = asyncio_net.client(httpx.Timeout(5.0))
    server.queue(Reply(body=b"hello", chunked=False))

    async def get() -> tuple[bytes, list[str]]:
        async with made:
            body = (await made.get(server.url + "/")).content
            streams = [type(c._connection._network_stream).__name__
                       for c in made._transport._pool.connections  # type: ignore[attr-defined]
                       if c._connection is not None]
        return body, streams

    assert trio.run(get) == (b"hello", ["TrioStream"])


def test_the_transport_keeps_httpx_pool_on_the_asyncio_backend() -> None:
    # (httpx keeps its pool in a private attribute: a later httpx that moved it would
    # leave the transport on httpx's own reads, and this test says so)
    made = asyncio_net.AsyncioTransport(limits=httpx.Limits(max_connections=7))
    pool = made._pool
    assert type(pool) is httpcore.AsyncConnectionPool
    assert isinstance(pool._network_backend, asyncio_net.AsyncioBackend)
    assert pool._max_connections == 7


def tls_contexts(tmp: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a self-signed certificate for localhost, and a client one
    trusting it."""
    cert, key = self_signed(tmp, "localhost")
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    return server, ssl.create_default_context(cafile=str(cert))


BACKENDS = pytest.mark.parametrize(
    "backend", [asyncio_net.AsyncioBackend, httpcore.AnyIOBackend], ids=["asyncio", "anyio"]
)


def httpx_client(backend: type[httpcore.AsyncNetworkBackend], verify: ssl.SSLContext,
                 timeout: float) -> httpx.AsyncClient:
    """A client over this backend (httpx's own transport for httpcore's anyio one)."""
    if backend is asyncio_net.AsyncioBackend:
        return client(verify, timeout)
    return httpx.AsyncClient(
        timeout=timeouts(timeout), transport=httpx.AsyncHTTPTransport(verify=verify)
    )


@contextlib.contextmanager
def thread_server(serve: Callable[[socket.socket, threading.Event], None]) -> Iterator[int]:
    """A blocking server in a thread for one connection (`serve(conn, done)`); `done` is
    set when the test is over."""
    done = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))

    def run() -> None:
        conn, _ = listener.accept()
        with conn, contextlib.suppress(ssl.SSLError, OSError):
            serve(conn, done)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        done.set()
        thread.join(5)
        listener.close()


@BACKENDS
def test_bytes_sent_in_the_clear_before_tls_are_never_read_as_tls(
    backend: type[httpcore.AsyncNetworkBackend], tmp_path: Path
) -> None:
    server_tls, client_tls = tls_contexts(tmp_path)
    injected = b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nINJECTED"

    def serve(conn: socket.socket, done: threading.Event) -> None:
        # in the clear first (as a hostile proxy or one on the path would), then a
        # genuine handshake and answer
        conn.sendall(injected)
        tls = server_tls.wrap_socket(conn, server_side=True)
        tls.recv(65536)
        tls.sendall(RESPONSE)

    async def exchange(port: int) -> bytes:
        stream = await backend().connect_tcp("127.0.0.1", port, timeout=2.0)
        await asyncio.sleep(0.1)  # (the clear bytes arrive before the handshake starts)
        got = b""
        try:
            with pytest.raises(httpcore.ConnectError):
                tls = await stream.start_tls(client_tls, server_hostname="localhost", timeout=2.0)
                await tls.write(b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n", timeout=2.0)
                got = await tls.read(65536, timeout=2.0)
                await tls.aclose()
        finally:
            await stream.aclose()
        return got

    with thread_server(serve) as port:
        assert injected not in asyncio.run(exchange(port))


@BACKENDS
def test_a_tls_server_that_reads_nothing_is_a_write_timeout(
    backend: type[httpcore.AsyncNetworkBackend], tmp_path: Path
) -> None:
    server_tls, client_tls = tls_contexts(tmp_path)
    big = b"x" * (16 * 1024 * 1024)  # more than the sockets' buffers hold

    def serve(conn: socket.socket, done: threading.Event) -> None:
        with server_tls.wrap_socket(conn, server_side=True):  # (then reads nothing)
            done.wait(5)

    async def post(port: int) -> None:
        async with httpx_client(backend, client_tls, 0.3) as c:
            await c.post(f"https://localhost:{port}/", content=big)

    with thread_server(serve) as port, pytest.raises(httpx.WriteTimeout):
        asyncio.run(post(port))


@BACKENDS
def test_a_tls_connection_closed_is_closed_though_the_server_stays_silent(
    backend: type[httpcore.AsyncNetworkBackend], tmp_path: Path
) -> None:
    server_tls, client_tls = tls_contexts(tmp_path)
    sockets: list[socket.socket] = []

    def serve(conn: socket.socket, done: threading.Event) -> None:
        tls = server_tls.wrap_socket(conn, server_side=True)
        head = b""
        while b"\r\n\r\n" not in head:
            head += tls.recv(65536)
        tls.sendall(RESPONSE)
        done.wait(5)  # (no close_notify sent back)

    async def get(port: int) -> None:
        c = httpx_client(backend, client_tls, 2.0)
        r = await c.get(f"https://localhost:{port}/")
        assert r.content == b"hello"
        sockets.append(r.extensions["network_stream"].get_extra_info("socket"))
        await c.aclose()
        for _ in range(3):
            await asyncio.sleep(0)  # (anyio's stream aborts its transport after one pass)

    with thread_server(serve) as port:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            asyncio.run(get(port))
            gc.collect()
        assert sockets[0].fileno() == -1
        assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
