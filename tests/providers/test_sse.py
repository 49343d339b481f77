"""SSE framing (WHATWG event-stream rules) on hand-made byte streams."""

from __future__ import annotations

from interpreters.providers.sse import SseEvent, SseParser


def parse(*chunks: bytes, close: bool = True) -> list[SseEvent]:
    p = SseParser()
    out = [e for c in chunks for e in p.feed(c)]
    return out + (p.close() if close else [])


def test_data_event_id_retry_and_comments() -> None:
    raw = b": hello\nevent: add\nid: 42\nretry: 1500\ndata: one\ndata:two\n\n"
    assert parse(raw) == [SseEvent("one\ntwo", "add", "42", 1500)]


def test_all_three_line_endings_and_crlf_split_across_chunks() -> None:
    expected = [SseEvent("a"), SseEvent("b"), SseEvent("c")]
    assert parse(b"data: a\r\n\r\ndata: b\r\rdata: c\n\n") == expected
    # CR at the end of one chunk, LF at the start of the next: one line break, not two.
    assert parse(b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\ndata: c\n\n") == expected


def test_utf8_split_inside_a_character() -> None:
    raw = "data: pélican 🦅\n\n".encode()
    cut = raw.index("🦅".encode()) + 2
    assert parse(raw[:cut], raw[cut:]) == [SseEvent("pélican 🦅")]


def test_split_characters_and_invalid_bytes_between_whole_chunks() -> None:
    # Whole chunks take a fast path; a split character or an invalid byte goes through
    # the incremental decoder, and whole chunks after it are decoded the same way again.
    e = "é".encode()
    chunks = (b"data: a\n\n", b"data: b" + e[:1], e[1:] + b"\n\n", b"data: \xff c\n\n",
              b"data: d" + e[:1], e[1:], b"\n\ndata: e\n\n")
    expected = [SseEvent("a"), SseEvent("bé"), SseEvent("\ufffd c"), SseEvent("dé"),
                SseEvent("e")]
    assert parse(*chunks) == expected
    assert parse(b"".join(chunks)) == expected


def test_blank_lines_without_data_dispatch_nothing_and_clear_the_event_name() -> None:
    assert parse(b"event: ping\n\n\n\ndata: x\n\n") == [SseEvent("x")]


def test_only_one_leading_space_is_dropped_and_no_colon_means_empty_value() -> None:
    assert parse(b"data:  two spaces\n\ndata\n\n") == [SseEvent(" two spaces"), SseEvent("")]


def test_unknown_fields_bad_retry_and_nul_ids_are_ignored() -> None:
    assert parse(b"foo: bar\nretry: soon\nid: a\x00b\ndata: x\n\n") == [SseEvent("x")]


def test_a_retry_of_other_digits_than_ascii_ones_or_too_many_is_ignored() -> None:
    # Only ASCII digits make a retry (WHATWG); "²" and "٣" are digits to str.isdigit but
    # not to int(), and int() refuses more than sys.get_int_max_str_digits() digits: a
    # server's odd retry line must not break the stream with a ValueError.
    assert parse("retry: \u00b2\nretry: \u0663\ndata: x\n\n".encode()) == [SseEvent("x")]
    many = b"retry: " + b"9" * 5000 + b"\ndata: y\n\n"
    assert [e.data for e in parse(many)] == ["y"]


def test_bom_at_start_is_ignored() -> None:
    assert parse(b"\xef\xbb\xbfdata: x\n\n") == [SseEvent("x")]


def test_end_of_stream_flushes_complete_lines_but_not_a_cut_line() -> None:
    # The last frame's lines ended but its blank line never came: still an event.
    assert parse(b"data: [DONE]\n") == [SseEvent("[DONE]")]
    # A line cut mid-way is a truncated frame: dropped.
    assert parse(b"data: x\n\ndata: {\"trunc") == [SseEvent("x")]
    p = SseParser()
    p.feed(b"data: {\"trunc")
    assert p.has_partial


def test_events_come_out_as_soon_as_their_blank_line_arrives() -> None:
    p = SseParser()
    assert p.feed(b"data: a\n") == []
    assert p.feed(b"\n") == [SseEvent("a")]
