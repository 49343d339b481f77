"""The bounds every input is held to, in one place.

- `MAX_TOOL_RESULT_BYTES`: a tool's result, as encoded JSON, at most 1 MiB by default
  (`Agent.create(max_tool_result_bytes=...)`, per tool `tool(fn, max_result_bytes=...)`,
  per MCP toolset). 1 MiB is ~250k tokens, more than any model's context takes in one
  message, yet far above what a useful tool answer needs; beyond it the model gets an
  error result saying by how much, so it can ask for less.
- `MAX_TOOL_ARGS_BYTES`: a tool call's arguments as JSON text given to
  `from_openai`, 1 MiB (the same reasoning as for results).
- `MAX_CONVERT_CHARS`: all the text (content, arguments, results) one call of
  `from_openai` converts, 32 Mi characters: the largest context windows
  hold a few million tokens, some 10 MB of text.
- `MAX_JSON_DEPTH`: how deeply JSON values (tool-call arguments, tool results, metadata)
  may nest, 128 (serde_json's default): deep enough for any real document, far below the
  interpreter's recursion limit, so decoding, encoding and copying never overflow it.

- `MAX_TOOL_CALLS_PER_RESPONSE`: the tool calls one model response may make, 1,024:
  parallel calls come by the tens at most; past it the run fails (`StreamFailed`, an
  `ApiError` of type `limit_exceeded`) before any call runs.

The depth checks walk with an explicit stack: they never recurse in Python.
"""

from __future__ import annotations

from typing import cast

MAX_TOOL_RESULT_BYTES = 1 << 20
MAX_JSON_DEPTH = 128
MAX_TOOL_ARGS_BYTES = 1 << 20
MAX_CONVERT_CHARS = 32 << 20
MAX_TOOL_CALLS_PER_RESPONSE = 1024


def check_cap(name: str, value: object) -> None:
    """Raise for a size cap that is not a positive int (a bool is no int here)."""
    if type(value) is not int:
        raise TypeError(f"{name} must be an int (bytes), got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1 byte, got {value}")


_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_KEPT = bytes(b for b in range(256) if b not in b'[]{}"')


def json_too_deep(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON text nests arrays/objects deeper than `limit`, before decoding it.

    In C-speed passes, no recursion: escapes dropped, the strings cut out, only the
    brackets kept, then the innermost pairs removed once per level. Malformed text is
    left to the decoder, which says what is wrong with it."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") <= limit:
        return False  # the common case: too few brackets to nest that deep
    if b"\\" in data:  # an escaped backslash first, then an escaped quote: no quote left
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    kept = data.translate(_BRACKETS, _NOT_KEPT)  # brackets and the strings' quotes
    # Most strings hold no bracket: `""` now. Dropping any `""` (an empty string, or the
    # end of one string and the start of the next) keeps what is outside the strings.
    kept = kept.replace(b'""', b"")
    left = b"".join(kept.split(b'"')[::2]) if b'"' in kept else kept
    for level in range(limit):
        if not left:
            return False
        shorter = left.replace(b"[]", b"")
        if len(shorter) == len(left):
            # unbalanced ("]]][[["): not JSON, but a decoder descends into every opener
            # before it finds that out, so those count
            return level + left.count(b"[") > limit
        left = shorter
    return b"[" in left


def value_too_deep(value: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether dicts, lists and tuples nest deeper than `limit` in `value` (walked with a
    stack; a cycle counts as too deep)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        v, d = stack.pop()
        t = type(v)
        if t is dict or isinstance(v, dict):
            items: object = cast("dict[object, object]", v).values()
        elif t is list or t is tuple or isinstance(v, list | tuple):
            items = v
        else:
            continue
        if d >= limit:
            return True
        stack.extend((x, d + 1) for x in cast("list[object]", items))
    return False
