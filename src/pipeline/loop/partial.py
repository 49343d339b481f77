"""Typed partial output: the output type as far as a reply has streamed.

The reply's text, as the stream processors released it (so a guard that holds or
redacts a field is obeyed), is parsed as partial JSON (jiter's partial mode: a string
still streaming is kept as far as it came, a number still streaming is left out) and
converted to the output type; a partial that does not convert yet (a required field
still missing) or equals the last one is not sent. The step's last partial is its whole
reply; `output.check_output` sends the decoded output once more if it differs (a reply
an output-step processor replaced, say), so the last partial always equals the output.
"""

from __future__ import annotations

import re

from pipeline.values.bounds import json_too_deep
from pipeline.values.chunks import OutputPartial
from pipeline.values.messages import JsonObject
from pipeline.values.output_type import OutputDecodeError, TypedOutput, partial_parser

_OPEN_FENCE = re.compile(r"^\s*```[a-zA-Z]*[ \t]*\n")
_TRAILING_NUMBER = re.compile(r"(?<=[:\[,])(\s*)-?[0-9][0-9.eE+-]*$|(?<=[:\[,])(\s*)-$")
"""A number at the very end of an unfinished reply: it may still grow (12 -> 123)."""

NOTHING: object = object()
"""No partial was sent yet."""


def parse_partial(text: str) -> JsonObject | None:
    """The JSON object a reply's text holds so far (None: none yet, or not an object)."""
    fence = _OPEN_FENCE.match(text)
    if fence is not None:
        text = text[fence.end():]
        end = text.rfind("```")
        if end != -1:
            text = text[:end]
    text = text.strip()
    if not text or text[0] != "{" or json_too_deep(text):
        return None
    try:
        whole = partial_parser().from_json(text.encode(), partial_mode="off")
    except ValueError:
        text = _TRAILING_NUMBER.sub("", text)
        try:
            whole = partial_parser().from_json(text.encode(), partial_mode="trailing-strings")
        except ValueError:
            return None
    return whole if isinstance(whole, dict) else None


class PartialOutputs:
    """The partial outputs of one attempt at a step's reply."""

    __slots__ = ("_seen", "last", "step", "typed")

    def __init__(self, typed: TypedOutput, step: int, last: object) -> None:
        self.typed = typed
        self.step = step
        self._seen = -1
        self.last = last
        """The last partial value sent in this run (`NOTHING`: none)."""

    def next(self, text: str) -> OutputPartial | None:
        """A new partial for the reply's text so far, if it changed."""
        if len(text) == self._seen:
            return None
        self._seen = len(text)
        data = parse_partial(text)
        if data is None:
            return None
        try:
            value = self.typed.convert(data)
        except OutputDecodeError:
            return None
        if self.last is not NOTHING and value == self.last:
            return None
        self.last = value
        return OutputPartial(self.step, value, data)
