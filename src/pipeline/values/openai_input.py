"""OpenAI Chat Completions style messages (dicts) as a `MessageList`.

    from_openai([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1",
            "type": "function",
            "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ])

System (and developer) messages become the list's system messages; user content may be a
string or a list of `text`, `image_url`, `file` (inline PDF and other documents) and
`input_audio` parts; assistant tool calls keep their ids,
their arguments decoded from JSON (at most `MAX_TOOL_ARGS_BYTES`, `MAX_JSON_DEPTH`
deep); a tool message's result is its text; `MAX_CONVERT_CHARS` of text at most in all.
Anything else raises `InvalidInputError` naming the message and the field. Runs refuse
such dicts given directly (an `InvalidInput` error pointing here).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from pipeline.values.bounds import (
    MAX_CONVERT_CHARS,
    MAX_JSON_DEPTH,
    MAX_TOOL_ARGS_BYTES,
    json_too_deep,
)
from pipeline.values.messages import (
    FilePart,
    Message,
    MessageList,
    Part,
    Role,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from pipeline.values.result import InvalidInput
from pipeline.values.validate import InvalidInputError

__all__ = ["from_openai"]


class _Bad(Exception):
    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem


def from_openai(
    messages: Iterable[Mapping[str, object]], *, id_prefix: str = "openai", created_at: float = 0.0
) -> MessageList:
    """Convert OpenAI-style message dicts (see the module doc); raises InvalidInputError."""
    if isinstance(messages, str | bytes | Mapping):
        raise InvalidInputError(InvalidInput(
            None, "messages", f"expected a list of message dicts, got {type(messages).__name__}"
        ))
    system: list[SystemMessage] = []
    out: list[Message] = []
    names: dict[str, str] = {}  # tool-call id -> tool name, for the tool messages
    total = 0  # characters converted so far
    for i, d in enumerate(messages):
        mid = f"{id_prefix}-{i}"
        try:
            if not isinstance(d, Mapping):
                raise _Bad("message", f"expected a dict, got {type(d).__name__}")
            if isinstance(d.get("id"), str):
                mid = str(d["id"])
            total += _chars(d)
            if total > MAX_CONVERT_CHARS:
                raise _Bad("content", f"the input passes the cap of {MAX_CONVERT_CHARS} "
                                      "characters here")
            role = d.get("role")
            if role in ("system", "developer"):
                system.append(SystemMessage(_text(d.get("content"), "content")))
                continue
            kind: Role
            if role == "user":
                kind, parts = "user", _user_parts(d.get("content"))
            elif role == "assistant":
                kind, parts = "assistant", _assistant_parts(d, names)
            elif role == "tool":
                kind = "tool"
                cid = d.get("tool_call_id")
                if not isinstance(cid, str):
                    raise _Bad("tool_call_id", f"expected a str, got {type(cid).__name__}")
                result = _text(d.get("content"), "content")
                parts = (ToolResultPart(cid, names.get(cid, ""), result),)
            else:
                raise _Bad(
                    "role",
                    f"unknown role {role!r} (expected system, developer, user, assistant or tool)",
                )
        except _Bad as e:
            raise InvalidInputError(InvalidInput(i, e.field, e.problem, mid)) from None
        out.append(Message(id=mid, role=kind, parts=parts, created_at=created_at))
    return MessageList.of(out, system=system)


def _chars(d: Mapping[str, object]) -> int:
    """The characters of a message's content and tool-call arguments (what it costs to
    convert), counted before converting; what is not text counts nothing here (it is
    refused below)."""
    n = 0
    content = d.get("content")
    if isinstance(content, str):
        n += len(content)
    elif isinstance(content, list | tuple):
        for p in content:
            if isinstance(p, Mapping):
                for v in (p.get("text"), p.get("image_url"), p.get("file"),
                          p.get("input_audio")):
                    if isinstance(v, Mapping):
                        v = v.get("url", v.get("file_data", v.get("data")))
                    if isinstance(v, str):
                        n += len(v)
    calls = d.get("tool_calls")
    if isinstance(calls, list | tuple):
        for c in calls:
            fn = c.get("function") if isinstance(c, Mapping) else None
            raw = fn.get("arguments") if isinstance(fn, Mapping) else None
            if isinstance(raw, str):
                n += len(raw)
    return n


def _text(content: object, field: str) -> str:
    """A string, or a list of text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list | tuple):
        texts: list[str] = []
        for j, p in enumerate(content):
            if not (isinstance(p, Mapping) and p.get("type") == "text"
                    and isinstance(p.get("text"), str)):
                raise _Bad(f"{field}[{j}]", "expected a text part {'type': 'text', 'text': ...}")
            texts.append(str(p["text"]))
        return "".join(texts)
    raise _Bad(field, f"expected a str or a list of text parts, got {type(content).__name__}")


def _user_parts(content: object) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (TextPart(content),)
    if not isinstance(content, list | tuple):
        raise _Bad("content", f"expected a str or a list of parts, got {type(content).__name__}")
    parts: list[Part] = []
    for j, p in enumerate(content):
        kind = p.get("type") if isinstance(p, Mapping) else None
        if kind == "text" and isinstance(p, Mapping) and isinstance(p.get("text"), str):
            parts.append(TextPart(str(p["text"])))
        elif kind == "image_url" and isinstance(p, Mapping):
            image = p.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            if not isinstance(url, str):
                raise _Bad(f"content[{j}].image_url", "expected a url")
            parts.append(_image(url))
        elif kind == "file" and isinstance(p, Mapping):
            parts.append(_file(p.get("file"), f"content[{j}].file"))
        elif kind == "input_audio" and isinstance(p, Mapping):
            parts.append(_audio(p.get("input_audio"), f"content[{j}].input_audio"))
        else:
            raise _Bad(f"content[{j}]", f"unsupported part {kind!r} "
                       "(text, image_url, file and input_audio are)")
    return tuple(parts)


def _file(spec: object, field: str) -> FilePart:
    """A `file` part given inline (`file_data`, a base64 data URL); a `file_id` names a
    file uploaded to OpenAI, which no other provider can read."""
    if not isinstance(spec, Mapping):
        raise _Bad(field, "expected {'file_data': 'data:...;base64,...', 'filename': ...}")
    data, name = spec.get("file_data"), spec.get("filename")
    if not (isinstance(data, str) and data.startswith("data:") and ";base64," in data):
        what = "a file_id (an upload to OpenAI) cannot be sent to other providers; give" \
            if "file_id" in spec else "expected"
        raise _Bad(f"{field}.file_data", f"{what} file_data as a base64 data URL")
    if name is not None and not isinstance(name, str):
        raise _Bad(f"{field}.filename", "expected a str")
    media_type, b64 = data[5:].split(";base64,", 1)
    return FilePart(media_type or "application/octet-stream", b64, filename=name)


_AUDIO = {"wav": "audio/wav", "mp3": "audio/mpeg"}


def _audio(spec: object, field: str) -> FilePart:
    """An `input_audio` part: base64 data and its format (wav or mp3)."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("data"), str):
        raise _Bad(field, "expected {'data': <base64>, 'format': 'wav' or 'mp3'}")
    fmt = spec.get("format")
    if fmt not in _AUDIO:
        raise _Bad(f"{field}.format", f"expected 'wav' or 'mp3', got {fmt!r}")
    return FilePart(_AUDIO[str(fmt)], str(spec["data"]))


def _image(url: str) -> FilePart:
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return FilePart(media_type or "application/octet-stream", data)
    return FilePart("image/*", url, is_url=True)


def _assistant_parts(d: Mapping[str, object], names: dict[str, str]) -> tuple[Part, ...]:
    content = d.get("content")
    parts: list[Part] = []
    if content is not None:
        text = _text(content, "content")
        if text:
            parts.append(TextPart(text))
    calls = d.get("tool_calls") or ()
    if not isinstance(calls, list | tuple):
        raise _Bad("tool_calls", f"expected a list, got {type(calls).__name__}")
    for j, c in enumerate(calls):
        fn = c.get("function") if isinstance(c, Mapping) else None
        cid = c.get("id") if isinstance(c, Mapping) else None
        name = fn.get("name") if isinstance(fn, Mapping) else None
        raw = fn.get("arguments", "{}") if isinstance(fn, Mapping) else None
        if not (isinstance(cid, str) and isinstance(name, str) and isinstance(raw, str)):
            raise _Bad(
                f"tool_calls[{j}]",
                "expected {'id': str, 'function': {'name': str, 'arguments': str}}",
            )
        where = f"tool_calls[{j}].function.arguments"
        size = len(raw.encode("utf-8", "surrogatepass"))
        if size > MAX_TOOL_ARGS_BYTES:
            raise _Bad(where, f"{size} bytes, over the cap of {MAX_TOOL_ARGS_BYTES}")
        if json_too_deep(raw):
            raise _Bad(where, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
        try:
            args = msgspec.json.decode(raw or "{}")
        except msgspec.DecodeError as e:
            raise _Bad(f"tool_calls[{j}].function.arguments", f"invalid JSON: {e}") from None
        if not isinstance(args, dict):
            raise _Bad(f"tool_calls[{j}].function.arguments", "expected a JSON object")
        names[cid] = name
        parts.append(ToolCallPart(cid, name, args))
    return tuple(parts)
