"""The recorded traffic vendored in tests/traffic as exchanges a replay server can serve.

Formats (see INDEX.md there): vcrpy YAML (request `body:` as a JSON string or
`parsed_body:`; response `body: {string: ...}`, `content:` + `status_code:`, or
`parsed_body:`; `!!binary` gzip bodies), raw SSE `.bin` files, `.chunks.txt` (one event
payload per line) and body-only `.json` files.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

KEEP_HEADERS = frozenset(
    {
        "content-type",
        "content-encoding",
        "request-id",
        "x-request-id",
        "x-should-retry",
        "retry-after",
        "retry-after-ms",
    }
)
"""Response headers replayed; the rest (lengths, cookies, rate-limit counters) are not
the decoder's business, and the server computes its own framing."""


def traffic_dir() -> Path:
    env = os.environ.get("PIPELINE_TRAFFIC_DIR")
    if env:
        return Path(env)
    # Vendored in the repository (tests/traffic/NOTICE.md names each source and licence).
    return Path(__file__).resolve().parents[1] / "traffic"


@dataclass(frozen=True)
class Recorded:
    """One recorded request/response pair, ready to serve."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    """Bytes as on the wire: gzip-compressed where the response says Content-Encoding gzip."""
    request: dict[str, object] | None = None
    uri: str | None = None

    @property
    def decoded_body(self) -> bytes:
        if dict(self.headers).get("content-encoding") == "gzip":
            return gzip.decompress(self.body)
        return self.body


@dataclass(frozen=True)
class Cassette:
    path: str
    exchanges: tuple[Recorded, ...] = field(default_factory=tuple)


def index_files(root: Path) -> list[str]:
    """Every traffic file the INDEX.md tables name, in order, without duplicates."""
    text = (root / "INDEX.md").read_text()
    seen: dict[str, None] = {}
    for m in re.finditer(r"^\|\s*`([^`]+)`", text, flags=re.M):
        name = m.group(1)
        if "/" in name and not name.endswith("/"):
            seen[name] = None
    return list(seen)


def resolve_index_name(root: Path, name: str) -> Path:
    """INDEX.md abbreviates long hashes (`e2aad469…cbfd.bin`): find the one file."""
    if "…" not in name:
        return root / name
    head, tail = name.split("…")
    parent = (root / head).parent
    prefix = Path(head).name
    hits = [p for p in parent.iterdir() if p.name.startswith(prefix) and p.name.endswith(tail)]
    assert len(hits) == 1, f"{name}: {hits}"
    return hits[0]


def _headers(raw: dict[str, object] | None) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for k, v in (raw or {}).items():
        if k.lower() not in KEEP_HEADERS:
            continue
        values = v if isinstance(v, list) else [v]
        out.extend((k.lower(), str(x)) for x in values)
    return out


def _wire_body(body: bytes, headers: list[tuple[str, str]]) -> bytes:
    if dict(headers).get("content-encoding") == "gzip" and not body.startswith(b"\x1f\x8b"):
        # Recorded decompressed under a gzip header: compress again, as it was sent.
        return gzip.compress(body)
    return body


def _request_body(req: dict[str, object]) -> dict[str, object] | None:
    if "parsed_body" in req:
        body = req["parsed_body"]
        return body if isinstance(body, dict) else None
    raw = req.get("body")
    if isinstance(raw, str) and raw.strip():
        parsed = json.loads(raw)
        return parsed if isinstance(parsed, dict) else None
    return None


def _yaml_exchange(it: dict[str, object]) -> Recorded:
    req = it["request"]
    resp = it["response"]
    assert isinstance(req, dict) and isinstance(resp, dict)
    headers = _headers(resp.get("headers"))
    status_obj = resp.get("status")
    status = status_obj["code"] if isinstance(status_obj, dict) else resp.get("status_code", 200)
    body: bytes
    if "parsed_body" in resp:
        body = json.dumps(resp["parsed_body"]).encode()
    elif isinstance(resp.get("body"), dict):
        s = resp["body"]["string"]
        body = s if isinstance(s, bytes) else s.encode()
    else:
        c = resp.get("content", "")
        body = c if isinstance(c, bytes) else str(c).encode()
    return Recorded(
        status=int(status),
        headers=tuple(headers),
        body=_wire_body(body, headers),
        request=_request_body(req),
        uri=str(req.get("uri")) if req.get("uri") else None,
    )


def load(root: Path, name: str) -> Cassette:
    path = resolve_index_name(root, name)
    if path.suffix == ".yaml":
        data = yaml.safe_load(path.read_text())
        return Cassette(name, tuple(_yaml_exchange(it) for it in data["interactions"]))
    raw = path.read_bytes()
    sse = (("content-type", "text/event-stream"),)
    if name.endswith(".chunks.txt"):
        # Rebuild the frames the fixture's author stripped: `event:` from the payload type
        # (Gemini's payloads have none, and its stream names no events).
        frames = []
        for line in raw.decode().splitlines():
            if line.strip():
                kind = json.loads(line).get("type")
                head = f"event: {kind}\n" if kind else ""
                frames.append(f"{head}data: {line}\n\n")
        return Cassette(name, (Recorded(200, sse, "".join(frames).encode()),))
    if path.suffix == ".bin":
        return Cassette(name, (Recorded(200, sse, raw),))
    if path.suffix == ".json":
        # Body only: INDEX.md says which is an error (400, or the status a google.rpc
        # error names) and which a success (a response says "error": null).
        error = json.loads(raw).get("error")
        code = error.get("code") if isinstance(error, dict) else None
        status = 200 if not error else code if isinstance(code, int) else 400
        return Cassette(name, (Recorded(status, (("content-type", "application/json"),), raw),))
    raise AssertionError(f"unknown traffic format: {name}")
