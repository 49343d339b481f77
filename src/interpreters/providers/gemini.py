"""The Google Gemini wire format (Generative Language API, `generateContent`).

Encoding: `systemInstruction`, `contents` of `user` and `model` turns (consecutive turns of
one role merged) with text, inline and URI file parts, `functionCall` and
`functionResponse` parts (ids sent both ways), thought signatures sent back on the part
they came with, function declarations whose parameters are fitted to Gemini's schema
subset, `toolConfig`, `generationConfig` (maxOutputTokens, temperature, topP,
stopSequences, seed; responseMimeType + responseSchema for typed output), namespaced
provider options (`generationConfig` merged key by key).
Decoding: every SSE data frame (and a whole body) is a GenerateContentResponse: text and
thought parts, function calls (a made-up, per-response unique id when Gemini sends none),
thought signatures (a `ReasoningEnd` carrying it, just before the part it came on),
finish reasons, usage (thoughts and cached tokens), and blocked prompts or answers
(`promptFeedback.blockReason`, finishReason SAFETY, RECITATION, Vertex's MODEL_ARMOR...)
and candidates that finished empty as typed errors, never retried.
Embeddings: the body and the answer of `batchEmbedContents` (providers/gemini_embed.py
does the I/O).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal
from urllib.parse import quote

import msgspec

from interpreters.providers import codec
from interpreters.providers.codec import DecoderBase, JsonCodec, JsonDict
from interpreters.providers.provider import ProviderError
from interpreters.providers.sse import SseEvent
from pipeline.values import chunks  # the events; those made per event are imported by name
from pipeline.values.chunks import (
    FinishReason,
    ModelEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)
from pipeline.values.ids import unique_id
from pipeline.values.messages import (
    FilePart,
    JsonObject,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from pipeline.values.model import ApiError, ModelRequest, ToolChoiceTool
from pipeline.values.output_type import inline_refs
from pipeline.values.sanitize import GEMINI, SanitizeProfile


class GeminiOptions(msgspec.Struct, frozen=True):
    option_sections: tuple[str, ...] = ("google",)
    """Which `provider_options` sections are merged into the body."""
    profile: SanitizeProfile = GEMINI
    """What the server accepts as function-call ids and function names."""


# --- the schema subset -----------------------------------------------------------------

_SCHEMA_KEYS = frozenset({
    "type", "format", "title", "description", "nullable", "enum", "items", "minItems",
    "maxItems", "properties", "required", "minProperties", "maxProperties", "minLength",
    "maxLength", "pattern", "minimum", "maximum", "anyOf", "propertyOrdering", "default",
})
"""The OpenAPI Schema fields Gemini's `parameters` and `responseSchema` take; it rejects
the rest (`$ref`, `$defs`, `additionalProperties`, `$schema`, `const`...)."""


def gemini_schema(schema: JsonObject) -> JsonDict:
    """A JSON Schema in the subset Gemini takes: refs inlined (a recursive one becomes an
    open object, which Gemini cannot say), `const` as a one-value enum, a `null` in a type
    list or an `anyOf` as `nullable`, unknown fields dropped."""
    out = _subset(inline_refs(schema))
    assert isinstance(out, dict)
    return out


def _subset(node: object) -> object:
    if isinstance(node, list | tuple):
        return [_subset(v) for v in node]
    if not isinstance(node, Mapping):
        return node
    if "$ref" in node:
        return {"type": "object"}  # recursive: left as a $ref by inline_refs
    out: JsonDict = {}
    for k, v in node.items():
        if k == "properties" and isinstance(v, Mapping):
            out[k] = {str(name): _subset(sub) for name, sub in v.items()}
        elif k == "const":
            out["enum"] = [v]
        elif k in ("anyOf", "oneOf") and isinstance(v, list | tuple):
            options = [o for o in v if not (isinstance(o, Mapping) and o.get("type") == "null")]
            if len(options) < len(v):
                out["nullable"] = True
            if len(options) == 1:
                only = _subset(options[0])
                if isinstance(only, dict):
                    out.update(only)
            else:
                out["anyOf"] = [_subset(o) for o in options]
        elif k == "type" and isinstance(v, list | tuple):
            kinds = [t for t in v if t != "null"]
            if len(kinds) < len(v):
                out["nullable"] = True
            if len(kinds) == 1:
                out["type"] = kinds[0]
            elif kinds:
                out["anyOf"] = [{"type": t} for t in kinds]
        elif k in _SCHEMA_KEYS:
            out[k] = _subset(v)
    if "enum" in out and "type" not in out:
        out["type"] = "string"  # Gemini's enums are of strings
    return out


# --- encoding -------------------------------------------------------------------------


def _file_part(part: FilePart) -> JsonDict:
    if part.is_url:
        return {"fileData": {"mimeType": part.media_type, "fileUri": part.data}}
    return {"inlineData": {"mimeType": part.media_type, "data": part.data}}


def _model_parts(m: Message, route: str) -> list[JsonDict]:
    """A model turn's parts; a thought signature goes back on the part it came with (the
    one after its reasoning part), or alone when nothing follows."""
    out: list[JsonDict] = []
    signature: str | None = None
    for p in m.parts:
        part: JsonDict | None = None
        if isinstance(p, ReasoningPart):
            if p.signature is None or p.redacted is not None or not codec.signed_for(p, route):
                continue  # a summary needs no return; another provider's signature none
            if p.text:
                part = {"text": p.text, "thought": True}
            else:
                if signature is not None:
                    out.append({"text": "", "thoughtSignature": signature})
                signature = p.signature
                continue
        elif isinstance(p, TextPart):
            if not p.text and signature is None:
                continue
            part = {"text": p.text}
        elif isinstance(p, ToolCallPart):
            part = {"functionCall": {"id": p.tool_call_id, "name": p.tool_name,
                                     "args": dict(p.args)}}
        if part is None:
            continue
        if isinstance(p, ReasoningPart):
            part["thoughtSignature"] = p.signature
        elif signature is not None:
            part["thoughtSignature"] = signature
            signature = None
        out.append(part)
    if signature is not None:
        out.append({"text": "", "thoughtSignature": signature})
    return out


def _user_parts(m: Message) -> list[JsonDict]:
    out: list[JsonDict] = []
    for p in m.parts:
        if isinstance(p, TextPart):
            if p.text:  # the API rejects empty text parts
                out.append({"text": p.text})
        elif isinstance(p, FilePart):
            out.append(_file_part(p))
        elif isinstance(p, ToolResultPart):
            # The response is an object: the result under `output`, a failure under
            # `error` (the keys Gemini's documentation gives them).
            value = p.result if isinstance(p.result, str | int | float | bool | dict | list
                                           | tuple) else codec.json_text(p.result)
            out.append({"functionResponse": {
                "id": p.tool_call_id, "name": p.tool_name,
                "response": {"error" if p.is_error else "output": value},
            }})
    return out


def _parts(m: Message, route: str) -> list[JsonDict]:
    return _model_parts(m, route) if m.role == "assistant" else _user_parts(m)


def _is_response(part: JsonDict) -> bool:
    return "functionResponse" in part


def _contents(request: ModelRequest, route: str) -> tuple[list[JsonDict], list[str]]:
    """The turns (consecutive ones of one role merged, the function responses opening the
    turn that answers the calls) and the system texts."""
    return codec.merge_turns(request, lambda m: _parts(m, route), _is_response,
                             assistant="model", content="parts")


_MODES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}


def encode_request(
    request: ModelRequest, *, model: str, stream: bool, options: GeminiOptions
) -> JsonDict:
    """The JSON body (as a dict) for one generateContent call (the model is in the URL)."""
    contents, system = _contents(request, options.option_sections[0])
    body: JsonDict = {"contents": contents}
    system = [t for t in system if t]
    if system:
        body["systemInstruction"] = {"parts": [{"text": t} for t in system]}
    if request.tools:
        declarations: list[JsonDict] = []
        for t in request.tools:
            d: JsonDict = {"name": t.name, "description": t.description}
            params = gemini_schema(t.parameters)
            if params.get("properties") or params.get("type") not in (None, "object"):
                d["parameters"] = params  # an empty object schema is left out, as Gemini wants
            declarations.append(d)
        body["tools"] = [{"functionDeclarations": declarations}]
        tc = request.tool_choice
        config: JsonDict = (
            {"mode": "ANY", "allowedFunctionNames": [tc.tool_name]}
            if isinstance(tc, ToolChoiceTool)
            else {"mode": _MODES[tc]}
        )
        body["toolConfig"] = {"functionCallingConfig": config}
    s = request.model_settings
    generation: JsonDict = {}
    codec.put_given(generation, (
        ("maxOutputTokens", s.max_tokens), ("temperature", s.temperature), ("topP", s.top_p),
        ("stopSequences", list(s.stop) if s.stop is not None else None), ("seed", s.seed),
    ))
    so = request.structured_output
    if so is not None:
        generation["responseMimeType"] = "application/json"
        generation["responseSchema"] = gemini_schema(so.schema)
    extra: JsonDict = {}
    codec.merge_options(extra, request.provider_options, options.option_sections)
    given = extra.pop("generationConfig", None)
    if isinstance(given, Mapping):
        generation.update({str(k): v for k, v in given.items()})
    count = generation.get("candidateCount")
    if count is not None and count != 1:
        raise ProviderError(ApiError(
            status=None, error_type="configuration", retryable=False,
            message=f"generationConfig.candidateCount={count!r} asks for several "
            "candidates; the agent loop uses exactly one (leave it out, or set it to 1)",
        ))
    if generation:
        body["generationConfig"] = generation
    body.update(extra)
    return body


# --- wire types for decoding ----------------------------------------------------------
# gc=False: untracked by the collector (no cycle goes through them). The decoder keeps the
# last usage between frames; tracked, it would be promoted and set off full collections.


class _FunctionCall(msgspec.Struct, frozen=True, gc=False):
    name: str | None = None
    args: dict[str, object] | None = None
    id: str | None = None


class _Part(msgspec.Struct, frozen=True, rename="camel", gc=False):
    text: str | None = None
    thought: bool | None = None
    thought_signature: str | None = None
    function_call: _FunctionCall | None = None


class _Content(msgspec.Struct, frozen=True, gc=False):
    parts: list[_Part] | None = None
    role: str | None = None


class _Rating(msgspec.Struct, frozen=True, gc=False):
    category: str | None = None
    probability: str | None = None
    blocked: bool | None = None


class _Candidate(msgspec.Struct, frozen=True, rename="camel", gc=False):
    content: _Content | None = None
    finish_reason: str | None = None
    finish_message: str | None = None
    index: int | None = None
    safety_ratings: list[_Rating] | None = None


class _Feedback(msgspec.Struct, frozen=True, rename="camel", gc=False):
    block_reason: str | None = None
    block_reason_message: str | None = None
    safety_ratings: list[_Rating] | None = None


class _Usage(msgspec.Struct, frozen=True, rename="camel", gc=False):
    prompt_token_count: int | None = None
    candidates_token_count: int | None = None
    thoughts_token_count: int | None = None
    cached_content_token_count: int | None = None
    tool_use_prompt_token_count: int | None = None

    def usage(self) -> chunks.Usage:
        # Thoughts are billed as output, and are part of it (as OpenAI's reasoning tokens).
        thoughts = self.thoughts_token_count or 0
        return chunks.Usage(
            input_tokens=(self.prompt_token_count or 0) + (self.tool_use_prompt_token_count or 0),
            output_tokens=(self.candidates_token_count or 0) + thoughts,
            reasoning_tokens=thoughts,
            cached_input_tokens=self.cached_content_token_count or 0,
        )


class _Response(msgspec.Struct, frozen=True, rename="camel", gc=False):
    candidates: list[_Candidate] | None = None
    prompt_feedback: _Feedback | None = None
    usage_metadata: _Usage | None = None
    model_version: str | None = None
    response_id: str | None = None
    error: dict[str, object] | None = None
    """A google.rpc status sent inside the stream."""


_response = msgspec.json.Decoder(_Response)

_FINISH: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "FINISH_REASON_UNSPECIFIED": "other",
    "OTHER": "other",
    "LANGUAGE": "other",
    "UNEXPECTED_TOOL_CALL": "other",
    "TOO_MANY_TOOL_CALLS": "other",
    "MALFORMED_RESPONSE": "other",
    "MISSING_THOUGHT_SIGNATURE": "other",
    "NO_IMAGE": "other",
    "IMAGE_OTHER": "other",
}
"""The finish reasons that end an answer, and how; a reason not here (and not a block)
is `other`. A candidate with nothing in it is no answer: see `EMPTY_RETRIED`."""
EMPTY_RETRIED = frozenset({"STOP", "FINISH_REASON_UNSPECIFIED"})
"""Reasons whose empty candidate is Gemini's transient empty answer: an
`invalid_response`, retried. With any other reason (known or not; MAX_TOKENS aside, whose
budget went to thinking) an empty candidate is a `no_answer` error, not retried: the same
request would end the same way."""
BLOCKED_FINISH = frozenset({
    "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "MODEL_ARMOR",
})
"""Finish reasons that mean Gemini (or Vertex's Model Armor) withheld the answer: a typed
error, not a finish."""
_BLOCK_WORDS = ("SAFETY", "PROHIBITED", "BLOCK", "ARMOR", "RECITATION", "SPII")
"""What a reason this decoder does not know says when it is a block (`VIDEO_SAFETY`)."""
BLOCKED = "content_blocked"
"""The `error_type` of a prompt or an answer Gemini blocked (its reason is the `code`)."""
NO_ANSWER = "no_answer"
"""The `error_type` of a candidate that finished with nothing in it (its reason is the
`code`)."""


def _withheld(reason: str) -> bool:
    if reason in BLOCKED_FINISH:
        return True
    return reason not in _FINISH and any(w in reason for w in _BLOCK_WORDS)


def _blocked_categories(ratings: list[_Rating] | None) -> str:
    names = [r.category for r in ratings or () if r.blocked and r.category]
    return f" ({', '.join(names)})" if names else ""


class GeminiStreamDecoder(DecoderBase):
    """GenerateContentResponse frames -> ModelEvents."""

    def __init__(self, *, status: int = 200, request_id: str | None = None) -> None:
        super().__init__(status=status, request_id=request_id)
        self._open: Literal["text", "reasoning"] | None = None
        self._block = ""
        self._blocks = 0
        self._signature: str | None = None
        """The signature of the open thought block, sent with its end."""
        self._calls: set[str] = set()
        self._produced = False
        self._usage = _Usage()

    def feed(self, event: SseEvent) -> list[ModelEvent]:
        try:
            r = _response.decode(event.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise self._bad_frame("GenerateContentResponse", e, event.data) from None
        cands = r.candidates
        if self._open == "text" and cands is not None and len(cands) == 1 \
                and r.error is None and r.prompt_feedback is None:
            # The common frame, one more piece of the open text: `frame`, inline.
            c = cands[0]
            content = c.content
            parts = content.parts if content is not None else None
            if parts is not None and len(parts) == 1 and c.finish_reason is None and not c.index:
                p = parts[0]
                if p.text and p.thought is None and p.thought_signature is None \
                        and p.function_call is None:
                    if r.usage_metadata is not None:
                        self._usage = r.usage_metadata
                    if r.response_id is not None:
                        self._response_id = r.response_id
                    if r.model_version is not None:
                        self._model_id = r.model_version
                    return [TextDelta(self._block, p.text)]
        out = self.frame(r, event.data)
        if out:
            self._started = True
        return out

    def frame(self, r: _Response, raw: str) -> list[ModelEvent]:
        if r.error is not None:
            raise self._error(raw.encode())
        if r.response_id is not None:
            self._response_id = r.response_id
        if r.model_version is not None:
            self._model_id = r.model_version
        if r.usage_metadata is not None:
            self._usage = r.usage_metadata  # cumulative: the last one counts
        fb = r.prompt_feedback
        if fb is not None and fb.block_reason:
            raise self._blocked(
                fb.block_reason,
                f"Gemini blocked the prompt: {fb.block_reason}"
                + _blocked_categories(fb.safety_ratings)
                + (f": {fb.block_reason_message}" if fb.block_reason_message else ""),
            )
        out: list[ModelEvent] = []
        for c in r.candidates or ():
            if c.index not in (None, 0):
                continue  # the loop reads one candidate (candidateCount is refused)
            if c.content is not None and c.content.parts:
                for part in c.content.parts:
                    self._part(part, out)
            if c.finish_reason is not None:
                self._finish(c, out)
        return out

    def _blocked(self, reason: str, message: str) -> ProviderError:
        return ProviderError(ApiError(
            status=self._status, message=message, error_type=BLOCKED, code=reason,
            request_id=self._request_id, retryable=False,
        ))

    def _switch(self, kind: Literal["text", "reasoning"], out: list[ModelEvent]) -> str:
        if self._open != kind:
            self._close(out)
            self._open = kind
            self._block = f"{kind}-{self._blocks}"
            self._blocks += 1
            start = chunks.TextStart if kind == "text" else chunks.ReasoningStart
            out.append(start(self._block))
        return self._block

    def _close(self, out: list[ModelEvent]) -> None:
        if self._open == "text":
            out.append(chunks.TextEnd(self._block))
        elif self._open == "reasoning":
            out.append(self._reasoning_end(self._block, self._signature))
            self._signature = None
        self._open = None

    def _part(self, p: _Part, out: list[ModelEvent]) -> None:
        sig = p.thought_signature
        if p.thought:
            if sig is not None and self._signature is not None:
                self._close(out)  # another signed thought: a block of its own
            block = self._switch("reasoning", out)
            if sig is not None:
                self._signature = sig
            if p.text:
                out.append(ReasoningDelta(block, p.text))
            self._produced = True
            return
        if sig is not None:
            # The signature belongs to this part: a reasoning part of its own just before
            # it, which the encoder turns back into this part's `thoughtSignature`.
            self._close(out)
            block = f"reasoning-{self._blocks}"
            self._blocks += 1
            out += (chunks.ReasoningStart(block), self._reasoning_end(block, sig))
            self._produced = True
        fc = p.function_call
        if fc is not None:
            self._close(out)
            name = fc.name or ""
            if not name:
                raise self._invalid("a functionCall part without a name")
            call_id = self._fresh_id(fc.id)
            args = fc.args or {}
            out += (ToolCallDelta(call_id, name, codec.json_text(args)),
                    chunks.ToolCall(call_id, name, args))
            self._produced = True
        elif p.text:
            out.append(TextDelta(self._switch("text", out), p.text))
            self._produced = True

    def _fresh_id(self, wire: str | None) -> str:
        """Gemini's id for a call, or (it often sends none) one made from the response id
        and the call's place; `_2`, `_3`... when one of this response has it."""
        base = wire or f"call_{self._response_id or 'gemini'}_{len(self._calls)}"
        return unique_id(base, self._calls)

    def _finish(self, c: _Candidate, out: list[ModelEvent]) -> None:
        raw = c.finish_reason or ""
        if _withheld(raw):
            raise self._blocked(
                raw, f"Gemini withheld the answer: {raw}"
                + _blocked_categories(c.safety_ratings)
                + (f": {c.finish_message}" if c.finish_message else ""),
            )
        if raw == "MALFORMED_FUNCTION_CALL":
            raise ProviderError(ApiError(
                status=self._status, error_type="invalid_tool_arguments", code=raw,
                message="Gemini produced a malformed function call"
                + (f": {c.finish_message}" if c.finish_message else ""),
                request_id=self._request_id, retryable=not self._started and not out,
            ))
        reason = _FINISH.get(raw, "other")
        if not self._produced and reason != "length":
            if raw in EMPTY_RETRIED:
                raise self._invalid(
                    f"the model finished ({raw}) with a candidate with no content")
            raise ProviderError(ApiError(
                status=self._status, error_type=NO_ANSWER, code=raw, retryable=False,
                message=f"Gemini finished ({raw}) without an answer"
                + (f": {c.finish_message}" if c.finish_message else ""),
                request_id=self._request_id,
            ))
        self._close(out)
        if reason == "stop" and self._calls:
            reason = "tool-calls"
        usage = self._usage.usage()
        out.append(chunks.ModelFinish(reason, usage, self._response_id, self._model_id))
        self.done = True


def decode_response_body(
    body: bytes, *, status: int = 200, request_id: str | None = None
) -> list[ModelEvent]:
    """A non-streaming GenerateContentResponse as the same events a stream gives."""
    resp = codec.decode_response(
        _response, body, "GenerateContentResponse", lambda r: r.error is not None,
        status=status, request_id=request_id,
    )
    dec = GeminiStreamDecoder(status=status, request_id=request_id)
    out = dec.frame(resp, "")
    if not dec.done:
        raise codec.invalid_response(
            status, "the response has no finished candidate", started=False,
            request_id=request_id, body=body[:2000].decode("utf-8", "replace"),
        )
    return out


# --- embeddings (batchEmbedContents) --------------------------------------------------

EMBED_BATCH = 100
"""Texts per batchEmbedContents call: the most the API takes in one."""
EmbedTask = Literal[
    "RETRIEVAL_QUERY", "RETRIEVAL_DOCUMENT", "SEMANTIC_SIMILARITY", "CLASSIFICATION",
    "CLUSTERING", "QUESTION_ANSWERING", "FACT_VERIFICATION", "CODE_RETRIEVAL_QUERY",
]


def embed_path(model: str) -> str:
    return f"/models/{_model_name(model)}:batchEmbedContents"


def encode_embeddings(
    texts: tuple[str, ...], *, model: str, dimensions: int | None = None,
    task_type: EmbedTask | None = None,
) -> bytes:
    """The body of one batchEmbedContents call (at most `EMBED_BATCH` texts)."""
    one: JsonDict = {"model": f"models/{model.removeprefix('models/')}"}
    codec.put_given(one, (("outputDimensionality", dimensions), ("taskType", task_type)))
    return msgspec.json.encode(
        {"requests": [{**one, "content": {"parts": [{"text": t}]}} for t in texts]}
    )


class _Embedding(msgspec.Struct, frozen=True, gc=False):
    values: list[float]


class _Embeddings(msgspec.Struct, frozen=True, gc=False):
    embeddings: list[_Embedding] | None = None
    error: dict[str, object] | None = None


_embeddings = msgspec.json.Decoder(_Embeddings)


def decode_embeddings(
    body: bytes, *, count: int, dimensions: int | None = None, status: int = 200,
    request_id: str | None = None,
) -> tuple[tuple[float, ...], ...]:
    """One vector per text asked for, all of one dimension (`dimensions` when given);
    anything else is an `invalid_response`."""
    resp = codec.decode_response(
        _embeddings, body, "batchEmbedContents response", lambda r: r.error is not None,
        status=status, request_id=request_id,
    )
    vectors = tuple(tuple(e.values) for e in resp.embeddings or ())
    sizes = {len(v) for v in vectors}
    problem = (
        f"{len(vectors)} embeddings for {count} texts" if len(vectors) != count
        else f"embeddings of dimensions {sorted(sizes)}" if len(sizes) > 1 or 0 in sizes
        else f"embeddings of {sizes.pop()} dimensions, not {dimensions}"
        if dimensions is not None and sizes and dimensions not in sizes
        else None
    )
    if problem is not None:
        raise codec.invalid_response(status, f"the response has {problem}", started=False,
                                     request_id=request_id)
    return vectors


def _model_name(model: str) -> str:
    return quote(model.removeprefix("models/"), safe="-._~@")


class GeminiCodec(JsonCodec[GeminiOptions]):
    """The Codec for `models/{model}:generateContent` and `:streamGenerateContent`."""

    options_type = GeminiOptions
    # The key goes in a header, never in the URL (where logs and traces keep it).
    key_header, key_prefix = "x-goog-api-key", ""
    request_body = staticmethod(encode_request)
    decoder = GeminiStreamDecoder
    decode_whole = staticmethod(decode_response_body)

    def path(self, model: str, *, stream: bool) -> str:
        name = _model_name(model)
        return (
            f"/models/{name}:streamGenerateContent?alt=sse" if stream
            else f"/models/{name}:generateContent"
        )


GENERATE_CONTENT = codec.wire_format("gemini", GeminiCodec, GeminiOptions)
"""The Gemini generateContent wire format, for the table of wire formats (providers/table.py)."""

__all__ = [
    "BLOCKED",
    "EMBED_BATCH",
    "GENERATE_CONTENT",
    "GeminiCodec",
    "GeminiOptions",
    "GeminiStreamDecoder",
    "NO_ANSWER",
    "decode_embeddings",
    "decode_response_body",
    "embed_path",
    "encode_embeddings",
    "encode_request",
    "gemini_schema",
]
