"""Turning what went wrong on the wire into a typed `ApiError`.

Pure functions over a status, headers and body, so the classification is tested without
a server. Retryable: 408, 409, 429, 5xx (529 included) and connection failures before
anything was delivered; `x-should-retry` overrides the status either way. `retry_after`
comes from `retry-after-ms`, else `retry-after` (seconds or an HTTP date), else a
google.rpc error's `RetryInfo`. The bodies read are OpenAI's, Anthropic's and google.rpc's.
"""

from __future__ import annotations

import email.utils
import math
from collections.abc import Mapping

import msgspec

from pipeline.values.model import ApiError, is_retryable_status

MAX_BODY_CHARS = 8192
"""An error body is kept for diagnosis, but never unbounded (an HTML page from a proxy)."""


class _ErrorDetail(msgspec.Struct, frozen=True):
    message: str | None = None
    type: str | None = None
    code: str | int | None = None
    param: str | None = None
    metadata: dict[str, object] | None = None
    status: str | int | None = None
    """google.rpc (Gemini): the canonical code's name (`RESOURCE_EXHAUSTED`), as the type."""
    details: list[dict[str, object]] | None = None
    """google.rpc: typed details, a `RetryInfo` among them."""


class _ErrorEnvelope(msgspec.Struct, frozen=True):
    # OpenAI and compatible servers: {"error": {...}}; Anthropic adds "type": "error" and,
    # in newer responses, a top-level "request_id".
    error: _ErrorDetail | str | None = None
    type: str | None = None
    request_id: str | None = None
    message: str | None = None


_envelope = msgspec.json.Decoder(_ErrorEnvelope)

# Anthropic error types that mean "try again later" even inside a 200 stream.
TRANSIENT_ERROR_TYPES = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "server_error", "timeout_error"}
)


def header(headers: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive header lookup over any mapping (httpx.Headers already is one)."""
    value = headers.get(name)
    if value is not None:
        return value
    lower = name.lower()
    for k, v in headers.items():
        if k.lower() == lower:
            return v
    return None


def retry_after_seconds(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds the server asks us to wait, or None. `now` is a Unix time (for HTTP dates)."""
    ms = header(headers, "retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
        except ValueError:
            value = -1.0
        if value >= 0:
            return value
    raw = header(headers, "retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        return max(0.0, when.timestamp() - now)
    return seconds if seconds >= 0 else None


def should_retry_override(headers: Mapping[str, str]) -> bool | None:
    raw = header(headers, "x-should-retry")
    if raw is None:
        return None
    raw = raw.strip().lower()
    return True if raw == "true" else False if raw == "false" else None


def request_id_of(headers: Mapping[str, str]) -> str | None:
    return (
        header(headers, "x-request-id") or header(headers, "request-id")
        or header(headers, "x-amzn-requestid")
    )


def amzn_error_type(headers: Mapping[str, str]) -> str | None:
    """AWS names an error in a header (`ThrottlingException:http://...`), not its body."""
    raw = header(headers, "x-amzn-errortype")
    return raw.partition(":")[0].strip() or None if raw else None


def _body_text(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace")
    return text if len(text) <= MAX_BODY_CHARS else text[:MAX_BODY_CHARS] + "..."


def _detail_message(detail: _ErrorDetail) -> str:
    message = detail.message or ""
    # OpenRouter puts the upstream provider's own words under metadata.raw.
    raw = (detail.metadata or {}).get("raw")
    if isinstance(raw, str) and raw and raw not in message:
        provider = (detail.metadata or {}).get("provider_name")
        prefix = f"{provider}: " if isinstance(provider, str) else ""
        message = f"{message} ({prefix}{raw})" if message else f"{prefix}{raw}"
    return message


def parse_error_body(
    body: bytes,
) -> tuple[str | None, str | None, str | None, str | None]:
    """(message, error_type, code, request_id) from an OpenAI or Anthropic error body."""
    try:
        env = _envelope.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None, None, None, None
    if isinstance(env.error, _ErrorDetail):
        d = env.error
        code = None if d.code is None else str(d.code)
        kind = d.type or (d.status if isinstance(d.status, str) else None)
        return _detail_message(d) or None, kind, code, env.request_id
    if isinstance(env.error, str):
        return env.error, None, None, env.request_id
    return env.message, None, None, env.request_id


_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


def retry_info_seconds(body: bytes) -> float | None:
    """The wait a google.rpc error's `RetryInfo` asks for (`"retryDelay": "34.4s"`)."""
    try:
        env = _envelope.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if not isinstance(env.error, _ErrorDetail):
        return None
    for d in env.error.details or ():
        delay = d.get("retryDelay")
        if d.get("@type") == _RETRY_INFO and isinstance(delay, str) and delay.endswith("s"):
            try:
                seconds = float(delay[:-1])
            except ValueError:
                return None
            return seconds if seconds >= 0 and math.isfinite(seconds) else None
    return None


def classify_response(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: float,
    reason: str = "",
) -> ApiError:
    """An HTTP error response (status >= 400) as an ApiError."""
    message, error_type, code, body_request_id = parse_error_body(body)
    error_type = error_type or amzn_error_type(headers)
    if not message:
        text = body.decode("utf-8", errors="replace").strip()
        message = text[:300] if text else (reason or f"HTTP {status}")
    retryable = is_retryable_status(status)
    override = should_retry_override(headers)
    if override is not None:
        retryable = override
    wait = retry_after_seconds(headers, now) if retryable else None
    if wait is None and retryable:
        wait = retry_info_seconds(body)
    return ApiError(
        status=status,
        message=message,
        error_type=error_type,
        code=code,
        request_id=request_id_of(headers) or body_request_id,
        retryable=retryable,
        retry_after=wait,
        body=_body_text(body) if body else None,
    )


def stream_error(
    status: int,
    body: bytes,
    *,
    started: bool,
    request_id: str | None,
    default_type: str = "stream_error",
) -> ApiError:
    """An error frame inside a 200 stream; before any event, with the status the frame
    stands for (see `_frame_status`; the response's own when it says none). Retryable
    only when nothing was delivered yet and the error says it is transient: a stream
    that already gave events never is. Before any event the loop treats it as any
    rejected call (retry policy, then `process_api_error`); after, as a broken stream."""
    message, error_type, code, body_request_id = parse_error_body(body)
    if message is None:
        message = body.decode("utf-8", errors="replace").strip()[:300] or "error in stream"
    frame_status = _frame_status(body, error_type, code)
    transient = error_type in TRANSIENT_ERROR_TYPES or (
        frame_status is not None and is_retryable_status(frame_status)
    )
    return ApiError(
        # Before any event it is the call's answer; after, the response's status stays.
        status=frame_status if frame_status is not None and not started else status,
        message=message,
        error_type=error_type or default_type,
        code=code,
        request_id=request_id or body_request_id,
        retryable=transient and not started,
        body=_body_text(body),
    )


class _StatusDetail(msgspec.Struct, frozen=True):
    status: int | None = None
    status_code: int | None = None


class _StatusEnvelope(msgspec.Struct, frozen=True):
    error: _StatusDetail | str | None = None
    status: int | None = None
    status_code: int | None = None


_status_envelope = msgspec.json.Decoder(_StatusEnvelope)

# The HTTP status each documented error type comes with (Anthropic's list; OpenAI-format
# servers use the same `invalid_request_error`...), for frames that carry only a type.
_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "server_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def _frame_status(body: bytes, error_type: str | None, code: str | None) -> int | None:
    """The HTTP status an error frame in a 200 stream stands for: its own `status` /
    `status_code`, a numeric `code` (OpenRouter), else what its type is sent with."""
    try:
        env = _status_envelope.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        env = _StatusEnvelope()
    d = env.error if isinstance(env.error, _StatusDetail) else _StatusDetail()
    for status in (d.status, d.status_code, env.status, env.status_code):
        if status is not None and 400 <= status <= 599:
            return status
    if code is not None and code.isdigit() and 400 <= int(code) <= 599:
        return int(code)
    return _TYPE_STATUS.get(error_type or "")


def broken_stream(
    status: int | None,
    message: str,
    *,
    started: bool,
    error_type: str,
    request_id: str | None = None,
    body: str | None = None,
) -> ApiError:
    """The stream broke (dropped, timed out, garbage): retryable only if nothing was
    delivered, since a retry after delivery would duplicate what the caller has seen."""
    return ApiError(
        status=status,
        message=message,
        error_type=error_type,
        request_id=request_id,
        retryable=not started,
        body=body,
    )
