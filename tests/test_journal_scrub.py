"""The journal's scrubbers on their own: a held delta's cap, and pieces put back."""

from __future__ import annotations

from interpreters.record.scrub import (
    MAX_HELD_ENTRIES,
    REDACTED,
    DeltaScrubber,
    LineScrubber,
    SecretRedactor,
    redistribute,
)

SECRET = "sk-abcdefgh12345678"


def test_a_delta_that_could_start_a_secret_waits_for_the_next() -> None:
    s: DeltaScrubber[str] = DeltaScrubber([SecretRedactor([SECRET])])
    assert s.push("a", ("t", "key sk-abc"), ends_streams=False) == []
    assert s.push("cmd", None, ends_streams=False) == []  # behind the held delta: waits
    out = s.push("b", ("t", "defgh12345678 done"), ends_streams=False)
    assert out == [("a", "key " + REDACTED), ("cmd", None), ("b", " done")]


def test_the_entries_behind_a_held_delta_have_a_cap() -> None:
    s: DeltaScrubber[int] = DeltaScrubber([SecretRedactor([SECRET])])
    assert s.push(-1, ("t", "sk-ab"), ends_streams=False) == []
    written: list[tuple[int, str | None]] = []
    for n in range(MAX_HELD_ENTRIES + 1):
        written += s.push(n, None, ends_streams=False)
    assert written[0] == (-1, "sk-ab") and len(written) == MAX_HELD_ENTRIES + 2
    assert s.flush() == []


def test_a_replacement_goes_where_its_value_started() -> None:
    assert redistribute(["ab", "cd", "ef"], [(1, 5, "X")]) == ["aX", "", "f"]
    assert redistribute(["ab", "", "cd"], []) == ["ab", "", "cd"]


def test_a_line_stays_valid_json_whatever_the_secret_looks_like() -> None:
    import msgspec

    scrub = LineScrubber(["12345678"], msgspec.json.encode)
    line = msgspec.json.encode({"at": 12345678, "text": "x12345678y"})
    assert msgspec.json.decode(scrub(line)) == {"at": 12345678, "text": f"x{REDACTED}y"}
