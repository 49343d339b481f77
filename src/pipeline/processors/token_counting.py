"""Counting tokens: a protocol, an approximate counter, and an adapter for a real tokenizer.

No tokenizer ships with the library. Real ones either bring large files or download
them on first use (tiktoken fetches its encodings from the network), which a pure core
must not do; so the default is an approximation, and a real tokenizer the caller already
has is plugged in through `EncodingCounter`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sized
from typing import Protocol, runtime_checkable

import msgspec

from pipeline.processors.options import Options
from pipeline.values.messages import (
    DataPart,
    FilePart,
    Message,
    Part,
    ReasoningPart,
    SourcePart,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = [
    "ApproxTokenCounter",
    "EncodingCounter",
    "TokenCounter",
    "count_message",
    "count_system",
    "longest_prefix_within",
]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a text: `ApproxTokenCounter`, `EncodingCounter` or your own."""

    def count(self, text: str) -> int: ...


def check_counter(o: Options, counter: object) -> TokenCounter:
    """A processor's `counter` option: None (the default, `ApproxTokenCounter()`) or a
    `TokenCounter`; anything else is `ProcessorConfigError`."""
    if counter is None:
        return ApproxTokenCounter()
    if (  # a str or a tuple has a count() too, of another kind
        isinstance(counter, str | bytes | bytearray | tuple | list)
        or not isinstance(counter, TokenCounter)
    ):
        raise o.fail("counter", counter, "None or a counter with count(text) -> int")
    return counter


class ApproxTokenCounter:
    """About one token per `bytes_per_token` UTF-8 bytes, rounded up.

    English BPE tokenizers average about 4 characters a token; counting bytes instead of
    characters makes the estimate grow for other scripts (3 bytes a CJK character, close
    to one token each), so it errs on the side of more tokens.
    """

    def __init__(self, bytes_per_token: float = 4.0) -> None:
        self._per = Options("ApproxTokenCounter").positive("bytes_per_token", bytes_per_token)
        self.bytes_per_token = bytes_per_token

    def count(self, text: str) -> int:
        n = len(text) if text.isascii() else len(text.encode("utf-8"))
        return math.ceil(n / self._per)

    def __repr__(self) -> str:
        return f"ApproxTokenCounter(bytes_per_token={self.bytes_per_token})"


class EncodingCounter:
    """A real tokenizer's encode function, as a counter: the tokens are `len(encode(text))`.

    For tiktoken with its encoding files available locally,
    ``EncodingCounter(tiktoken.get_encoding("o200k_base").encode)``; for a Hugging Face
    tokenizer file, ``EncodingCounter(lambda t: tok.encode(t).ids)``.
    """

    def __init__(self, encode: Callable[[str], Sized]) -> None:
        Options("EncodingCounter").function("encode", encode, "a function text -> tokens")
        self.encode = encode

    def count(self, text: str) -> int:
        return len(self.encode(text))


_json = msgspec.json.Encoder()


def _part_text(p: Part) -> str:
    if isinstance(p, TextPart | ReasoningPart):
        return p.text
    if isinstance(p, ToolCallPart):
        return p.tool_name + _json.encode(p.args).decode()
    if isinstance(p, ToolResultPart):
        r = p.result
        return r if isinstance(r, str) else _json.encode(r).decode()
    if isinstance(p, SourcePart):
        return p.url + (p.title or "")
    if isinstance(p, DataPart):
        return _json.encode(p.data).decode()
    if isinstance(p, FilePart):
        return p.filename or ""
    return ""  # a step-start part; a server tool's parts (never sent to a model)


def count_message(
    counter: TokenCounter, m: Message, *, overhead: int = 4, file_tokens: int = 256
) -> int:
    """A message's tokens: its parts' text (tool arguments and results as JSON), plus
    `overhead` for the role and framing, plus `file_tokens` per file or image (whose
    cost depends on the provider, not on the length of its base64)."""
    total = overhead
    count = counter.count
    for p in m.parts:
        if type(p) is TextPart:  # the common case, first and without the dispatch
            total += count(p.text)
            continue
        total += count(_part_text(p))
        if isinstance(p, FilePart):
            total += file_tokens
    return total


def count_system(
    counter: TokenCounter, system: tuple[SystemMessage, ...], *, overhead: int = 4
) -> int:
    return sum(counter.count(s.content) + overhead for s in system)


def longest_prefix_within(counter: TokenCounter, text: str, budget: int) -> str:
    """The longest prefix of `text` that counts at most `budget` tokens (binary search:
    counts are monotone in the prefix for any sane tokenizer)."""
    if budget <= 0:
        return ""
    if counter.count(text) <= budget:
        return text
    lo, hi = 0, len(text)  # count(text[:lo]) <= budget < count(text[:hi])
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if counter.count(text[:mid]) <= budget:
            lo = mid
        else:
            hi = mid
    return text[:lo]
