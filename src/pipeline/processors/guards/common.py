"""What the guard processors share: which messages they check, how they warn, how they
ask a judge model and read its verdict, and the error for a missing optional extra.

Pure: a judge call is an `AskModel` request the hook yields; the interpreter carries it
out (in tests, a scripted model on the simulator).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from types import ModuleType
from typing import Literal, TypeVar

import msgspec

from pipeline.processor import AskModel, ModelAnswer, abort
from pipeline.values.bounds import MAX_JSON_DEPTH, json_too_deep
from pipeline.values.chunks import DataChunk
from pipeline.values.messages import (
    Message,
    MessageList,
    Part,
    Role,
    SystemMessage,
    TextPart,
    ToolResultPart,
)
from pipeline.values.model import ModelRequest, ModelSettings

__all__ = [
    "GUARDS_EXTRA",
    "GuardsExtraMissing",
    "JudgeError",
    "ask_judge",
    "judge_instructions",
    "unread_results",
    "checked_indices",
    "decode_verdict",
    "drop_messages",
    "require_extra",
    "warning",
    "with_metadata",
    "with_text",
]

GUARDS_EXTRA = "guards"

Strategy = Literal["block", "warn"]

_T = TypeVar("_T")


class GuardsExtraMissing(ImportError):
    """A guard needs a library from the optional `guards` extra that is not installed.

    `module` is what was imported, `package` the distribution that has it, `hint` another
    way out (said after the install line)."""

    def __init__(self, feature: str, module: str, package: str | None = None,
                 hint: str = "") -> None:
        self.feature = feature
        self.module = module
        self.package = package or module
        super().__init__(
            f"{feature} needs the {self.package!r} package, part of the optional extra "
            f"'{GUARDS_EXTRA}': pip install 'pipeline-agents[{GUARDS_EXTRA}]'"
            + (f" ({hint})" if hint else "")
        )


def require_extra(
    module: str,
    feature: str,
    *,
    package: str | None = None,
    hint: str = "",
    error: type[GuardsExtraMissing] = GuardsExtraMissing,
) -> ModuleType:
    """Import `module` (lazily, only when a guard needs it), or raise `error` saying which
    extra has it (see `GuardsExtraMissing`)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise error(feature, module, package, hint) from e


def checked_indices(
    ml: MessageList, *, roles: Iterable[Role] = ("user",), last_only: bool = False
) -> tuple[int, ...]:
    """Indices of the messages an input guard checks: this run's input (not the memory of
    an earlier conversation, checked when it was new) in `roles`; the last one only if
    `last_only`."""
    wanted = frozenset(roles)
    found = tuple(
        i
        for i, (m, s) in enumerate(zip(ml.messages, ml.sources, strict=True))
        if s == "input" and m.role in wanted and m.text
    )
    return found[-1:] if last_only else found


def drop_messages(ml: MessageList, drop: set[int], processor_id: str) -> MessageList:
    """`ml` without the messages at `drop` (the `filter` strategy); when that leaves no
    user message of this run's input, the run is aborted: there is nothing left to ask."""
    pairs = [ms for i, ms in enumerate(zip(ml.messages, ml.sources, strict=True))
             if i not in drop]
    if not any(m.role == "user" and s == "input" for m, s in pairs):
        abort("Every input message was filtered out", metadata={"processor_id": processor_id})
    return MessageList(tuple(m for m, _ in pairs), tuple(s for _, s in pairs), ml.system)


def with_text(message: Message, text: str, **metadata: object) -> Message:
    """`message` with its text parts replaced by one (where the first was), and
    `metadata` merged into its metadata; other parts (files, tool calls) are kept."""
    parts: list[Part] = []
    placed = False
    for p in message.parts:
        if isinstance(p, TextPart):
            if not placed and text:
                parts.append(TextPart(text))
            placed = True
        else:
            parts.append(p)
    if not placed and text:
        parts.insert(0, TextPart(text))
    meta = dict(message.metadata or {})
    meta.update(metadata)
    return msgspec.structs.replace(message, parts=tuple(parts), metadata=meta or None)


def with_metadata(message: Message, **metadata: object) -> Message:
    """`message` with `metadata` merged into its metadata."""
    return msgspec.structs.replace(message, metadata={**(message.metadata or {}), **metadata})


def warning(processor_id: str, **data: object) -> DataChunk:
    """The `data-*` chunk a guard emits for the `warn` strategy (and beside other actions)."""
    return DataChunk(f"data-{processor_id}", {"processor_id": processor_id, **data})


class JudgeError(Exception):
    """The judge model failed or its answer could not be read: the guard fails closed."""


def ask_judge(
    model: str,
    instructions: str,
    content: str,
    *,
    max_tokens: int | None = None,
    context: str = "",
) -> AskModel:
    """An `AskModel` for a judge: the content goes in delimiters, as data, not orders;
    `context` (text that came just before it), when given, in its own delimiters first."""
    if context:
        text = f"<context>\n{context}\n</context>\n<content>\n{content}\n</content>"
    else:
        text = f"<content>\n{content}\n</content>"
    return AskModel(
        ModelRequest(
            model=model,
            system=(SystemMessage(instructions),),
            messages=(
                Message(
                    id="judge-input",
                    role="user",
                    parts=(TextPart(text),),
                ),
            ),
            model_settings=ModelSettings(temperature=0.0, max_tokens=max_tokens),
        )
    )


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)


def unread_results(
    ml: MessageList, checked: frozenset[str]
) -> list[tuple[int, int, ToolResultPart]]:
    """The tool results the model has not read yet, in the tool messages after the last
    other message (each step's results come right after its call), but those of the
    calls in `checked` (a guard checked them already): (message index, part index, part).
    """
    messages = ml.messages
    first = len(messages)
    while first > 0 and messages[first - 1].role == "tool":
        first -= 1
    return [(i, j, p) for i in range(first, len(messages))
            for j, p in enumerate(messages[i].parts)
            if isinstance(p, ToolResultPart) and p.tool_call_id not in checked]


def judge_instructions(given: str | None, template: str, categories: Iterable[str]) -> str:
    """A judge's instructions: those `given`, else `template` naming the `categories`."""
    return given or template.format(categories=", ".join(categories))


def decode_verdict(answer: object, type_: type[_T]) -> _T:
    """The judge's JSON answer as `type_`; anything else is a `JudgeError`."""
    if not isinstance(answer, ModelAnswer):
        raise JudgeError(f"expected the judge's ModelAnswer, got {type(answer).__name__}")
    text = answer.text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise JudgeError(f"the judge's answer is not JSON: {answer.text[:200]!r}")
    if json_too_deep(text[start : end + 1]):
        raise JudgeError(f"the judge's answer nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return msgspec.json.decode(text[start : end + 1], type=type_)
    except msgspec.DecodeError as e:
        raise JudgeError(f"the judge's answer does not fit {type_.__name__}: {e}") from e


def check_unit(name: str, value: float) -> float:
    """A score or threshold in [0, 1]."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be between 0 and 1, got {value!r}")
    return value
