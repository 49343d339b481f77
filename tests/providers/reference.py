"""Recorded request bodies, read back into ModelRequests, and compared by meaning.

The conformance tests read a recorded request body into our types (written here, apart
from the codecs), let the provider encode it over a real socket, and check that what
arrived means the same as what the other project sent: key order, `null` versus absent,
a one-part text list versus a string, and argument JSON spacing do not count.
"""

from __future__ import annotations

import json
from typing import Any

from pipeline.values.messages import (
    FilePart,
    Message,
    Part,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from pipeline.values.model import (
    ModelRequest,
    ModelSettings,
    StructuredOutput,
    ToolChoice,
    ToolChoiceTool,
    ToolSpec,
)

Json = Any  # recorded JSON is heterogeneous by nature; this module only reads it

OPENAI_KEYS = {
    "model", "messages", "tools", "tool_choice", "response_format", "temperature", "top_p",
    "max_tokens", "max_completion_tokens", "stop", "seed", "stream", "stream_options",
}
ANTHROPIC_KEYS = {
    "model", "messages", "system", "tools", "tool_choice", "max_tokens", "temperature",
    "top_p", "stop_sequences", "stream",
}


def _settings(body: dict[str, Json], max_key: str | None) -> ModelSettings:
    stop = body.get("stop", body.get("stop_sequences"))
    return ModelSettings(
        temperature=body.get("temperature"),
        max_tokens=body.get(max_key) if max_key else None,
        top_p=body.get("top_p"),
        stop=None if stop is None else tuple([stop] if isinstance(stop, str) else stop),
        seed=body.get("seed"),
    )


def _extras(body: dict[str, Json], known: set[str], section: str) -> dict[str, Json] | None:
    extra = {k: v for k, v in body.items() if k not in known}
    return {section: extra} if extra else None


# --- OpenAI Chat Completions -----------------------------------------------------------


def _image(url: str) -> FilePart:
    """An image part from a URL or a `data:` URL."""
    if url.startswith("data:"):
        mt, _, data = url[5:].partition(";base64,")
        return FilePart(mt, data)
    return FilePart("image/*", url, is_url=True)


def _user_parts(content: Json, text: str = "text", image: str = "image_url") -> tuple[Part, ...]:
    """A user message's content (Chat's part types by default; Responses' `input_*`)."""
    if isinstance(content, str):
        return (TextPart(content),)
    parts: list[Part] = []
    for c in content:
        if c["type"] == text:
            parts.append(TextPart(c["text"]))
        elif c["type"] == image:
            url = c[image]
            parts.append(_image(url if isinstance(url, str) else url["url"]))
        else:
            raise AssertionError(f"content part not modelled: {c['type']}")
    return tuple(parts)


def openai_request(body: dict[str, Json], route: str) -> ModelRequest:
    system: list[SystemMessage] = []
    messages: list[Message] = []
    names: dict[str, str] = {}
    for i, m in enumerate(body["messages"]):
        mid = f"m{i}"
        role = m["role"]
        if role in ("system", "developer"):
            if not messages:
                system.append(SystemMessage(m["content"]))
            else:
                messages.append(Message(id=mid, role="system", parts=(TextPart(m["content"]),)))
        elif role == "user":
            messages.append(Message(id=mid, role="user", parts=_user_parts(m["content"])))
        elif role == "assistant":
            parts: list[Part] = []
            if m.get("content") is not None:
                parts.append(TextPart(m["content"]))
            for tc in m.get("tool_calls") or ():
                names[tc["id"]] = tc["function"]["name"]
                args = json.loads(tc["function"]["arguments"] or "{}")
                parts.append(ToolCallPart(tc["id"], tc["function"]["name"], args))
            messages.append(Message(id=mid, role="assistant", parts=tuple(parts)))
        elif role == "tool":
            cid = m["tool_call_id"]
            result = ToolResultPart(cid, names.get(cid, "unknown"), m["content"])
            messages.append(Message(id=mid, role="tool", parts=(result,)))
    tools = tuple(
        ToolSpec(t["function"]["name"], t["function"].get("description", ""),
                 t["function"].get("parameters", {}))
        for t in body.get("tools", ())
    )
    choice: ToolChoice = "auto"
    tc = body.get("tool_choice")
    if isinstance(tc, dict):
        choice = ToolChoiceTool(tc["function"]["name"])
    elif tc in ("auto", "none", "required"):
        choice = tc
    so = None
    rf = body.get("response_format")
    if isinstance(rf, dict) and rf.get("type") == "json_schema":
        js = rf["json_schema"]
        so = StructuredOutput(js["schema"], js.get("name", "output"), bool(js.get("strict")))
    max_key = next((k for k in ("max_completion_tokens", "max_tokens") if k in body), None)
    return ModelRequest(
        model=f"{route}/{body['model']}",
        system=tuple(system),
        messages=tuple(messages),
        tools=tools,
        tool_choice=choice,
        model_settings=_settings(body, max_key),
        provider_options=_extras(body, OPENAI_KEYS, route),
        structured_output=so,
    )


def _drop_none(v: Json) -> Json:
    if isinstance(v, dict):
        return {k: _drop_none(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_none(x) for x in v]
    return v


def normalize_openai(body: dict[str, Json]) -> dict[str, Json]:
    b: dict[str, Json] = _drop_none(json.loads(json.dumps(body)))
    b.setdefault("stream", False)
    for m in b["messages"]:
        c = m.get("content")
        if isinstance(c, list) and len(c) == 1 and c[0].get("type") == "text":
            m["content"] = c[0]["text"]
        for tc in m.get("tool_calls", ()):
            tc["function"]["arguments"] = json.loads(tc["function"]["arguments"] or "{}")
    for t in b.get("tools", ()):
        t["function"].pop("strict", None)  # not modelled by ToolSpec
        if not t["function"].get("description"):
            t["function"].pop("description", None)
    if b.get("tools"):
        b.setdefault("tool_choice", "auto")
    if isinstance(b.get("stop"), str):
        b["stop"] = [b["stop"]]
    return b


# --- Anthropic Messages ----------------------------------------------------------------


def _turn(i: int, role: Json, parts: list[Part], results: list[Part]) -> list[Message]:
    """Recorded message `i` as ours: its tool results (a tool message), then the rest."""
    out = [Message(id=f"m{i}r", role="tool", parts=tuple(results))] if results else []
    if parts:
        out.append(Message(id=f"m{i}", role=role, parts=tuple(parts)))
    return out


def _tool_result_content(c: Json) -> Json:
    if isinstance(c, list):
        return "".join(x.get("text", "") for x in c)
    return c


def anthropic_request(body: dict[str, Json], route: str = "anthropic") -> ModelRequest:
    sys = body.get("system")
    system = (
        () if sys is None
        else (SystemMessage(sys),) if isinstance(sys, str)
        else tuple(SystemMessage(s["text"]) for s in sys)
    )
    messages: list[Message] = []
    names: dict[str, str] = {}
    for i, m in enumerate(body["messages"]):
        content = m["content"]
        blocks: list[dict[str, Json]] = (
            [{"type": "text", "text": content}] if isinstance(content, str) else content
        )
        parts: list[Part] = []
        results: list[Part] = []
        for b in blocks:
            t = b["type"]
            if t == "text":
                parts.append(TextPart(b["text"]))
            elif t == "thinking":
                parts.append(ReasoningPart(b["thinking"], signature=b["signature"]))
            elif t == "redacted_thinking":
                parts.append(ReasoningPart("", redacted=b["data"]))
            elif t == "tool_use":
                names[b["id"]] = b["name"]
                parts.append(ToolCallPart(b["id"], b["name"], b["input"]))
            elif t == "tool_result":
                cid = b["tool_use_id"]
                results.append(
                    ToolResultPart(cid, names.get(cid, "unknown"),
                                   _tool_result_content(b.get("content", "")),
                                   is_error=bool(b.get("is_error")))
                )
            elif t == "image":
                src = b["source"]
                if src["type"] == "url":
                    parts.append(FilePart("image/*", src["url"], is_url=True))
                else:
                    parts.append(FilePart(src["media_type"], src["data"]))
            else:
                raise AssertionError(f"block not modelled: {t}")
        messages += _turn(i, m["role"], parts, results)
    tools = tuple(
        ToolSpec(t["name"], t.get("description", ""), t["input_schema"])
        for t in body.get("tools", ())
    )
    choice: ToolChoice = "auto"
    tc = body.get("tool_choice")
    if isinstance(tc, dict):
        kinds: dict[str, ToolChoice] = {"auto": "auto", "any": "required", "none": "none"}
        choice = ToolChoiceTool(tc["name"]) if tc["type"] == "tool" else kinds[tc["type"]]
    return ModelRequest(
        model=f"{route}/{body['model']}",
        system=system,
        messages=tuple(messages),
        tools=tools,
        tool_choice=choice,
        model_settings=_settings(body, "max_tokens"),
        provider_options=_extras(body, ANTHROPIC_KEYS, route),
    )


def normalize_anthropic(body: dict[str, Json]) -> dict[str, Json]:
    b: dict[str, Json] = json.loads(json.dumps(body))
    b.setdefault("stream", False)
    sys = b.get("system")
    if isinstance(sys, str):
        b["system"] = [{"type": "text", "text": sys}]
    for m in b["messages"]:
        if isinstance(m["content"], str):
            m["content"] = [{"type": "text", "text": m["content"]}]
        for blk in m["content"]:
            if blk.get("type") == "tool_result":
                if not blk.get("is_error"):
                    blk.pop("is_error", None)
                blk["content"] = _tool_result_content(blk.get("content", ""))
    for t in b.get("tools", ()):
        if not t.get("description"):
            t.pop("description", None)
    if b.get("tools"):
        b.setdefault("tool_choice", {"type": "auto"})
    return b


# --- OpenAI Responses ------------------------------------------------------------------

RESPONSES_KEYS = {
    "model", "input", "instructions", "tools", "tool_choice", "text", "temperature",
    "top_p", "max_output_tokens", "stream",
}


def _summary_text(item: Json) -> str:
    return "\n\n".join(s["text"] for s in item.get("summary") or ())


def responses_request(body: dict[str, Json], route: str) -> ModelRequest:
    system: list[SystemMessage] = []
    if body.get("instructions"):
        system.append(SystemMessage(body["instructions"]))
    messages: list[Message] = []
    names: dict[str, str] = {}
    turn: list[Part] = []  # the assistant's items, gathered into one message

    def flush(i: int) -> None:
        if turn:
            messages.append(Message(id=f"a{i}", role="assistant", parts=tuple(turn)))
            turn.clear()

    for i, it in enumerate(body["input"]):
        kind = it.get("type", "message")
        if kind == "reasoning":
            sig = it["id"] + (f" {it['encrypted_content']}" if it.get("encrypted_content") else "")
            turn.append(ReasoningPart(_summary_text(it), signature=sig))
        elif kind == "function_call":
            names[it["call_id"]] = it["name"]
            args = json.loads(it["arguments"] or "{}")
            turn.append(ToolCallPart(it["call_id"], it["name"], args))
        elif kind == "function_call_output":
            flush(i)
            cid = it["call_id"]
            result = ToolResultPart(cid, names.get(cid, "unknown"), it["output"])
            messages.append(Message(id=f"m{i}", role="tool", parts=(result,)))
        elif it["role"] == "assistant":
            c = it["content"]
            turn.append(TextPart(c if isinstance(c, str) else "".join(x["text"] for x in c)))
        else:
            flush(i)
            role = it["role"]
            if role in ("system", "developer"):
                if not messages:
                    system.append(SystemMessage(it["content"]))
                else:
                    messages.append(Message(id=f"m{i}", role="system",
                                            parts=(TextPart(it["content"]),)))
            else:
                messages.append(Message(id=f"m{i}", role="user",
                                        parts=_user_parts(it["content"], "input_text",
                                                          "input_image")))
    flush(len(body["input"]))
    tools = tuple(
        ToolSpec(t["name"], t.get("description") or "", t.get("parameters", {}))
        for t in body.get("tools", ())
    )
    choice: ToolChoice = "auto"
    tc = body.get("tool_choice")
    if isinstance(tc, dict):
        choice = ToolChoiceTool(tc["name"])
    elif tc in ("auto", "none", "required"):
        choice = tc
    so = None
    fmt = (body.get("text") or {}).get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        so = StructuredOutput(fmt["schema"], fmt.get("name", "output"), bool(fmt.get("strict")))
    return ModelRequest(
        model=f"{route}/{body['model']}",
        system=tuple(system),
        messages=tuple(messages),
        tools=tools,
        tool_choice=choice,
        model_settings=_settings(body, "max_output_tokens"),
        provider_options=_extras(body, RESPONSES_KEYS, route),
        structured_output=so,
    )


def normalize_responses(body: dict[str, Json]) -> dict[str, Json]:
    b: dict[str, Json] = _drop_none(json.loads(json.dumps(body)))
    b.setdefault("stream", False)
    items = b["input"]
    if b.get("instructions"):
        items.insert(0, {"role": "system", "content": b["instructions"]})
    b.pop("instructions", None)
    for it in items:
        if it.get("role") == "developer":
            it["role"] = "system"
        if it.get("type") == "message":
            del it["type"]
        c = it.get("content")
        if isinstance(c, list) and len(c) == 1 and c[0].get("type") in ("input_text",
                                                                         "output_text"):
            it["content"] = c[0]["text"]
        if it.get("type") == "function_call":
            it.pop("id", None)  # the item id: the call is named by its call_id
            it.pop("status", None)
            it["arguments"] = json.loads(it["arguments"] or "{}")
        if it.get("type") == "reasoning":
            text = _summary_text(it)
            it["summary"] = [{"type": "summary_text", "text": text}] if text else []
    for t in b.get("tools", ()):
        t.pop("strict", None)  # not modelled by ToolSpec
        if not t.get("description"):
            t.pop("description", None)
    if b.get("tools"):
        b.setdefault("tool_choice", "auto")
    return b


# --- Bedrock Converse ------------------------------------------------------------------

BEDROCK_KEYS = {"messages", "system", "inferenceConfig", "toolConfig"}


def bedrock_request(body: dict[str, Json], route: str = "bedrock") -> ModelRequest:
    """A Converse body (the model is in its URL: `route/m`)."""
    system = tuple(SystemMessage(s["text"]) for s in body.get("system", ()))
    messages: list[Message] = []
    names: dict[str, str] = {}
    for i, m in enumerate(body["messages"]):
        parts: list[Part] = []
        results: list[Part] = []
        for b in m["content"]:
            if "text" in b:
                parts.append(TextPart(b["text"]))
            elif "toolUse" in b:
                u = b["toolUse"]
                names[u["toolUseId"]] = u["name"]
                parts.append(ToolCallPart(u["toolUseId"], u["name"], u["input"]))
            elif "toolResult" in b:
                r = b["toolResult"]
                cid = r["toolUseId"]
                results.append(ToolResultPart(
                    cid, names.get(cid, "unknown"), _tool_result_content(r["content"]),
                    is_error=r.get("status") == "error"))
            elif "reasoningContent" in b:
                rt = b["reasoningContent"]["reasoningText"]
                parts.append(ReasoningPart(rt["text"], signature=rt.get("signature")))
            else:
                raise AssertionError(f"block not modelled: {sorted(b)}")
        messages += _turn(i, m["role"], parts, results)
    config = body.get("toolConfig") or {}
    tools = tuple(
        ToolSpec(t["toolSpec"]["name"], t["toolSpec"].get("description", ""),
                 t["toolSpec"]["inputSchema"]["json"])
        for t in config.get("tools", ())
    )
    choice: ToolChoice = "auto"
    tc = config.get("toolChoice")
    if isinstance(tc, dict):
        choice = ToolChoiceTool(tc["tool"]["name"]) if "tool" in tc else (
            "required" if "any" in tc else "auto")
    inference = body.get("inferenceConfig") or {}
    stop = inference.get("stopSequences")
    return ModelRequest(
        model=f"{route}/m",
        system=system,
        messages=tuple(messages),
        tools=tools,
        tool_choice=choice,
        model_settings=ModelSettings(
            temperature=inference.get("temperature"), max_tokens=inference.get("maxTokens"),
            top_p=inference.get("topP"), stop=None if stop is None else tuple(stop)),
        provider_options=_extras(body, BEDROCK_KEYS, route),
    )


def normalize_bedrock(body: dict[str, Json]) -> dict[str, Json]:
    b: dict[str, Json] = json.loads(json.dumps(body))
    for key in ("system", "inferenceConfig"):
        if not b.get(key):
            b.pop(key, None)  # an empty one means none
    config = b.get("toolConfig")
    if config:
        config.setdefault("toolChoice", {"auto": {}})
    return b


# --- Google Gemini (generateContent) -----------------------------------------------------

GEMINI_SETTINGS = {
    "maxOutputTokens": "max_tokens", "temperature": "temperature", "topP": "top_p",
    "stopSequences": "stop", "seed": "seed",
}
_GEMINI_SCHEMA = ("responseSchema", "responseJsonSchema")


def _gemini_result(response: Json) -> tuple[Json, bool]:
    """A functionResponse's value: its `output` (or `error`), else the whole object
    (Gemini's documented reading)."""
    if isinstance(response, dict) and len(response) == 1:
        (key, value), = response.items()
        if key in ("output", "error"):
            return value, key == "error"
    return response, False


def gemini_request(body: dict[str, Json], route: str) -> ModelRequest:
    """A recorded request; its `model` (named in the URL, not the body) put in by the test."""
    model = body.get("model", "m")
    system = tuple(
        SystemMessage(p["text"]) for p in (body.get("systemInstruction") or {}).get("parts", ())
    )
    messages: list[Message] = []
    for i, c in enumerate(body["contents"]):
        parts: list[Part] = []
        results: list[Part] = []
        for p in c["parts"]:
            sig = p.get("thoughtSignature")
            if p.get("thought"):
                parts.append(ReasoningPart(p.get("text", ""), signature=sig))
                continue
            if sig is not None:
                parts.append(ReasoningPart("", signature=sig))
            if "functionCall" in p:
                fc = p["functionCall"]
                parts.append(ToolCallPart(fc["id"], fc["name"], fc.get("args") or {}))
            elif "functionResponse" in p:
                fr = p["functionResponse"]
                value, err = _gemini_result(fr["response"])
                results.append(ToolResultPart(fr["id"], fr["name"], value, is_error=err))
            elif "text" in p:
                parts.append(TextPart(p["text"]))
            elif "inlineData" in p:
                parts.append(FilePart(p["inlineData"]["mimeType"], p["inlineData"]["data"]))
            elif "fileData" in p:
                fd = p["fileData"]
                parts.append(FilePart(fd.get("mimeType", ""), fd["fileUri"], is_url=True))
            else:
                raise AssertionError(f"part not modelled: {sorted(p)}")
        if results:
            messages.append(Message(id=f"m{i}r", role="tool", parts=tuple(results)))
        if parts:
            messages.append(Message(id=f"m{i}", role="assistant" if c["role"] == "model"
                                    else "user", parts=tuple(parts)))
    declarations = [d for t in body.get("tools", ()) for d in t.get("functionDeclarations", ())]
    tools = tuple(
        ToolSpec(d["name"], d.get("description", ""),
                 d.get("parametersJsonSchema", d.get("parameters_json_schema",
                                                     d.get("parameters", {}))))
        for d in declarations
    )
    choice: ToolChoice = "auto"
    fcc = (body.get("toolConfig") or {}).get("functionCallingConfig") or {}
    allowed = fcc.get("allowedFunctionNames")
    if fcc.get("mode") == "ANY":
        choice = ToolChoiceTool(allowed[0]) if allowed and len(allowed) == 1 else "required"
    elif fcc.get("mode") == "NONE":
        choice = "none"
    gen = dict(body.get("generationConfig") or {})
    picked = {ours: gen.pop(theirs) for theirs, ours in GEMINI_SETTINGS.items() if theirs in gen}
    so = None
    for key in _GEMINI_SCHEMA:
        if key in gen:
            so = StructuredOutput(gen.pop(key))
            gen.pop("responseMimeType", None)
    stop = picked.get("stop")
    extra = {k: v for k, v in body.items()
             if k not in ("model", "contents", "systemInstruction", "tools", "toolConfig",
                          "generationConfig")}
    if gen:
        extra["generationConfig"] = gen
    return ModelRequest(
        model=f"{route}/{model}",
        system=system,
        messages=tuple(messages),
        tools=tools,
        tool_choice=choice,
        model_settings=ModelSettings(
            temperature=picked.get("temperature"), max_tokens=picked.get("max_tokens"),
            top_p=picked.get("top_p"), stop=None if stop is None else tuple(stop),
            seed=picked.get("seed"),
        ),
        provider_options={route: extra} if extra else None,
        structured_output=so,
    )


def _gemini_schema_meaning(s: Json) -> Json:
    """What a schema says, as both forms can say it: type names in lower case, no
    `additionalProperties` or `title` (the subset has no closed objects)."""
    if isinstance(s, list):
        return [_gemini_schema_meaning(x) for x in s]
    if not isinstance(s, dict):
        return s
    out: dict[str, Json] = {}
    for k, v in s.items():
        if k in ("additionalProperties", "title"):
            continue
        if k == "type" and isinstance(v, str):
            out[k] = v.lower()
        elif k == "properties":
            out[k] = {n: _gemini_schema_meaning(x) for n, x in v.items()}
        else:
            out[k] = _gemini_schema_meaning(v)
    return out


def normalize_gemini(body: dict[str, Json]) -> dict[str, Json]:
    b: dict[str, Json] = json.loads(json.dumps(body))
    si = b.get("systemInstruction")
    if isinstance(si, dict):
        si.pop("role", None)  # the system instruction's role is not read
    for c in b["contents"]:
        for p in c["parts"]:
            fr = p.get("functionResponse")
            if fr is not None:
                value, err = _gemini_result(fr["response"])
                fr["response"] = {"error" if err else "output": value}
            fc = p.get("functionCall")
            if fc is not None:
                fc.setdefault("args", {})
    names = []
    for t in b.get("tools", ()):
        for d in t.get("functionDeclarations", ()):
            names.append(d["name"])
            params = None
            for key in ("parametersJsonSchema", "parameters_json_schema", "parameters"):
                if key in d:
                    params = _gemini_schema_meaning(d.pop(key))
            if params and (params.get("properties") or params.get("type") != "object"):
                d["parameters"] = params  # an empty object schema is no parameters
            if not d.get("description"):
                d.pop("description", None)
    fcc = (b.get("toolConfig") or {}).get("functionCallingConfig")
    if isinstance(fcc, dict):
        if sorted(fcc.get("allowedFunctionNames") or ()) == sorted(names) and len(names) > 1:
            fcc.pop("allowedFunctionNames")
        if fcc == {"mode": "AUTO"}:
            b.pop("toolConfig")
    gen = b.get("generationConfig")
    if isinstance(gen, dict):
        for key in _GEMINI_SCHEMA:
            if key in gen:
                gen["responseSchema"] = _gemini_schema_meaning(gen.pop(key))
        if not gen:
            b.pop("generationConfig")
    return b
