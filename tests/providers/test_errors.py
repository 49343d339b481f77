"""Classifying HTTP failures: status, provider type/code, request id, retryable, retry_after."""

from __future__ import annotations

import email.utils

import pytest

from interpreters.providers.errors import classify_response, retry_after_seconds, stream_error

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(400, False), (401, False), (403, False), (404, False), (422, False),
     (408, True), (409, True), (429, True), (500, True), (502, True), (503, True),
     (504, True), (529, True), (599, True)],
)
def test_retryable_by_status(status: int, retryable: bool) -> None:
    e = classify_response(status, {}, b"", now=NOW, reason="Reason")
    assert (e.status, e.retryable) == (status, retryable)
    assert e.message == "Reason" and e.body is None


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"Retry-After": "0.5"}, 0.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "bogus", "retry-after": "9"}, 9.0),
        ({"retry-after": email.utils.formatdate(NOW + 12, usegmt=True)}, 12.0),
        ({"retry-after": email.utils.formatdate(NOW - 60, usegmt=True)}, 0.0),
        ({"retry-after": "-3"}, None),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after(headers: dict[str, str], expected: float | None) -> None:
    got = retry_after_seconds(headers, NOW)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_retry_after_only_for_retryable_errors() -> None:
    e = classify_response(400, {"retry-after": "5"}, b"{}", now=NOW)
    assert e.retry_after is None
    e = classify_response(429, {"retry-after": "5"}, b"{}", now=NOW)
    assert e.retry_after == 5.0


def test_x_should_retry_overrides_both_ways() -> None:
    assert classify_response(400, {"x-should-retry": "true"}, b"", now=NOW).retryable
    assert not classify_response(500, {"X-Should-Retry": "False"}, b"", now=NOW).retryable
    assert classify_response(500, {"x-should-retry": "maybe"}, b"", now=NOW).retryable


def test_openai_error_body() -> None:
    body = (b'{"error": {"message": "You exceeded your current quota", '
            b'"type": "insufficient_quota", "param": null, "code": "insufficient_quota"}}')
    e = classify_response(429, {"x-request-id": "req_1"}, body, now=NOW)
    assert (e.message, e.error_type, e.code, e.request_id) == (
        "You exceeded your current quota", "insufficient_quota", "insufficient_quota", "req_1")
    assert e.body == body.decode()


def test_anthropic_error_body_and_request_id_sources() -> None:
    body = (b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"},'
            b'"request_id":"req_body"}')
    e = classify_response(429, {}, body, now=NOW)
    assert (e.error_type, e.message, e.request_id) == ("rate_limit_error", "slow down", "req_body")
    assert classify_response(429, {"request-id": "req_hdr"}, body, now=NOW).request_id == "req_hdr"


def test_integer_code_and_openrouter_metadata() -> None:
    body = (b'{"error":{"code":429,"message":"Provider returned error","metadata":'
            b'{"provider_name":"Google","raw":"upstream limit"}}}')
    e = classify_response(429, {}, body, now=NOW)
    assert e.code == "429"
    assert e.message == "Provider returned error (Google: upstream limit)"


def test_non_json_body_gives_its_text() -> None:
    e = classify_response(502, {}, b"<html>Bad gateway</html>", now=NOW)
    assert e.message == "<html>Bad gateway</html>" and e.retryable and e.error_type is None


def test_long_bodies_are_capped() -> None:
    e = classify_response(500, {}, b"x" * 100_000, now=NOW)
    assert e.body is not None and len(e.body) < 10_000 and len(e.message) <= 300


def test_stream_error_retryable_only_if_transient_and_nothing_delivered() -> None:
    over = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    bad = b'{"type":"error","error":{"type":"invalid_request_error","message":"no"}}'
    assert stream_error(200, over, started=False, request_id=None).retryable
    assert not stream_error(200, over, started=True, request_id=None).retryable
    assert not stream_error(200, bad, started=False, request_id=None).retryable
    e = stream_error(200, b'{"error":{"code":502,"message":"upstream"}}', started=False,
                     request_id="r")
    assert e.retryable and (e.error_type, e.code, e.request_id) == ("stream_error", "502", "r")
