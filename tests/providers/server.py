"""A scripted HTTP/1.1 server on 127.0.0.1 for provider tests.

Real sockets and real framing: each queued `Reply` is written with chunked transfer
encoding (split where the test says) or a Content-Length, and can misbehave on purpose:
close mid-body, pause between chunks past the client's read timeout, close without a
response. Every request is recorded (method, path, headers, body) for assertions.
It runs in a daemon thread, so it serves sync, asyncio and trio clients alike.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
           429: "Too Many Requests", 500: "Internal Server Error", 529: "Overloaded"}


@dataclass(frozen=True)
class Reply:
    status: int = 200
    headers: Sequence[tuple[str, str]] = ()
    body: bytes = b""
    chunks: Sequence[int] | int | None = None
    """Body split into HTTP chunks: sizes in turn (cycled), one size, or None (one chunk)."""
    chunked: bool = True
    pause: float = 0.0
    """Seconds to sleep before each body chunk after the first."""
    cut_after: int | None = None
    """Close the connection after this many body bytes (a mid-stream disconnect)."""
    no_response: bool = False
    """Read the request, then close without answering."""
    reset: bool = False
    """Close with a TCP reset (RST) rather than an orderly close (with `cut_after` or
    `no_response`)."""
    hang: float = 0.0
    """Read the request, then answer nothing for this many seconds (or until the client
    hangs up), then close."""
    forever: bytes = b""
    """After the body, send this piece again and again (every `pause` seconds) until the
    client hangs up or `forever_max` pieces went out: an endless response."""
    forever_max: int = 1_000_000


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class ReplayServer:
    replies: deque[Reply] = field(default_factory=deque)
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._live = 0
        self._lock = threading.Lock()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        t = threading.Thread(target=self._accept, daemon=True, name="replay-server")
        t.start()
        self._threads.append(t)

    @property
    def url(self) -> str:
        host, port = self._sock.getsockname()[:2]
        return f"http://{host}:{port}"

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self.replies.clear()
            self.seen.clear()

    def close(self) -> None:
        self._stop.set()
        self._sock.close()

    # --- serving ---------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            t = threading.Thread(
                target=self._serve, args=(conn,), daemon=True, name="replay-server-conn"
            )
            t.start()

    @property
    def live(self) -> int:
        """Connections open right now (a client that keeps none open leaves 0)."""
        with self._lock:
            return self._live

    def wait_idle(self, limit: float = 5.0) -> bool:
        """Wait (up to `limit` seconds) until no connection is open; whether none is."""
        end = time.monotonic() + limit
        while self.live and time.monotonic() < end:
            time.sleep(0.01)
        return self.live == 0

    def _serve(self, conn: socket.socket) -> None:
        with self._lock:
            self._live += 1
        try:
            self._serve_one(conn)
        finally:
            with self._lock:
                self._live -= 1

    def _serve_one(self, conn: socket.socket) -> None:
        conn.settimeout(5.0)
        buf = b""
        with contextlib.closing(conn):
            while not self._stop.is_set():
                try:
                    req, buf = _read_request(conn, buf)
                except (OSError, ValueError):
                    return
                if req is None:
                    return
                with self._lock:
                    self.seen.append(req)
                    reply = self.replies.popleft() if self.replies else Reply(
                        500, (("content-type", "text/plain"),), b"no scripted reply"
                    )
                try:
                    if not _write(conn, reply):
                        return
                except OSError:
                    return


def _read_request(conn: socket.socket, buf: bytes) -> tuple[Seen | None, bytes]:
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None, b""
        buf += data
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0"))
    while len(buf) < n:
        data = conn.recv(65536)
        if not data:
            raise ValueError("body cut short")
        buf += data
    return Seen(method, path, headers, buf[:n]), buf[n:]


def _pieces(body: bytes, chunks: Sequence[int] | int | None) -> Iterator[bytes]:
    if chunks is None:
        yield body
        return
    sizes = [chunks] if isinstance(chunks, int) else list(chunks)
    i = pos = 0
    while pos < len(body):
        size = max(1, sizes[i % len(sizes)])
        yield body[pos : pos + size]
        pos += size
        i += 1


def _write(conn: socket.socket, r: Reply) -> bool:
    """Send one reply; False when the connection was closed on purpose."""
    if r.hang:
        _wait_for_hangup(conn, r.hang)
        return False
    if r.no_response:
        if r.reset:
            _rst(conn)
        return False
    head = [f"HTTP/1.1 {r.status} {REASONS.get(r.status, 'Status')}"]
    head += [f"{k}: {v}" for k, v in r.headers]
    head.append("transfer-encoding: chunked" if r.chunked else f"content-length: {len(r.body)}")
    conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
    sent = 0
    for n, piece in enumerate(_pieces(r.body, r.chunks)):
        if n and r.pause:
            time.sleep(r.pause)
        if r.cut_after is not None and sent + len(piece) > r.cut_after:
            piece = piece[: r.cut_after - sent]
            if piece:
                conn.sendall(_frame(piece) if r.chunked else piece)
            _rst(conn) if r.reset else conn.shutdown(socket.SHUT_RDWR)
            return False
        conn.sendall(_frame(piece) if r.chunked else piece)
        sent += len(piece)
    if r.cut_after is not None:
        _rst(conn) if r.reset else conn.shutdown(socket.SHUT_RDWR)
        return False
    if r.forever:
        for _ in range(r.forever_max):
            if r.pause:
                time.sleep(r.pause)
            conn.sendall(_frame(r.forever) if r.chunked else r.forever)  # EPIPE ends it
        return False
    if r.chunked:
        conn.sendall(b"0\r\n\r\n")
    return True


def _frame(piece: bytes) -> bytes:
    return f"{len(piece):x}\r\n".encode() + piece + b"\r\n"


def _rst(conn: socket.socket) -> None:
    """Close with RST: linger on, timeout 0."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _wait_for_hangup(conn: socket.socket, limit: float) -> None:
    end = time.monotonic() + limit
    conn.settimeout(0.02)
    while time.monotonic() < end:
        try:
            if conn.recv(1024) == b"":
                return  # the client gave up
        except TimeoutError:
            continue
        except OSError:
            return
