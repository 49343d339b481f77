"""The SSE parser is linear in its input and bounded: the work it does per byte does not
grow with the length of a line or of an event, and one line or event past the cap is a
typed error. No wall-clock assertion: the parser counts the characters it examines and
copies (`work`), which a parser that re-scans or re-copies its buffer would blow up."""

from __future__ import annotations

import pytest

from interpreters.providers.sse import SseEvent, SseLimitError, SseParser


def feed_all(p: SseParser, data: bytes, size: int) -> list[SseEvent]:
    out: list[SseEvent] = []
    for i in range(0, len(data), size):
        out += p.feed(data[i : i + size])
    return out


@pytest.mark.parametrize("size", [1, 7, 4096])
def test_one_long_line_fed_in_small_chunks_costs_linear_work(size: int) -> None:
    n = 200_000
    data = b"data: " + b"x" * n + b"\n\n"
    p = SseParser()
    events = feed_all(p, data, size)
    assert events == [SseEvent("x" * n)]
    # Each character is examined once and copied a bounded number of times.
    assert p.work <= 4 * len(data)


def test_many_short_lines_in_one_chunk_cost_linear_work() -> None:
    # Many lines in one chunk, with no CR: a parser that searches for "\r" from each line
    # start to the end of the chunk again and again would be quadratic here.
    data = b"".join(b"data: %d\n\n" % i for i in range(20_000))
    p = SseParser()
    events = p.feed(data)
    assert len(events) == 20_000 and events[-1] == SseEvent("19999")
    assert p.work <= 4 * len(data)


def test_work_per_byte_does_not_grow_with_line_length() -> None:
    def work(n: int) -> float:
        p = SseParser()
        data = b"data: " + b"y" * n + b"\n\n"
        feed_all(p, data, 3)
        return p.work / len(data)

    assert work(400_000) <= work(4_000) * 1.1


def test_a_line_past_the_cap_is_a_typed_error() -> None:
    p = SseParser(max_event=1000)
    assert p.feed(b"data: ok\n\n") == [SseEvent("ok")]
    with pytest.raises(SseLimitError) as info:
        feed_all(p, b"data: " + b"z" * 5000, 10)  # never terminated: an endless line
    assert "1000" in str(info.value)


def test_an_event_of_many_lines_past_the_cap_is_a_typed_error() -> None:
    p = SseParser(max_event=1000)
    with pytest.raises(SseLimitError):
        p.feed(b"data: " + b"a" * 100 + b"\n" + b"".join(b"data: %03d\n" % i for i in range(400)))


def test_comments_do_not_accumulate() -> None:
    # A keep-alive comment every so often is not part of any event: no growth, no error.
    p = SseParser(max_event=100)
    for _ in range(1000):
        assert p.feed(b": keep-alive\n\n") == []
    assert p.feed(b"data: after\n\n") == [SseEvent("after")]


def test_events_before_the_over_long_line_are_kept() -> None:
    p = SseParser(max_event=50)
    assert p.feed(b"data: one\n\ndata: two\n\ndata: " + b"w" * 100) == [
        SseEvent("one"), SseEvent("two")]
    with pytest.raises(SseLimitError):
        p.feed(b"more")
    with pytest.raises(SseLimitError):
        p.close()
