"""Tool-call ids and tool names rewritten to what one provider accepts, reversibly.

Histories move between providers: an id like ``llm_version:0`` from one server is a 400
at Anthropic, Mistral-style servers want exactly nine alphanumerics, and OpenAI caps ids
at 40 characters. `sanitize_request` rewrites every tool-call id and tool name of one
request to the provider's `SanitizeProfile` and returns a `NameMap` to undo it.

Per request and per namespace (ids, names) the mapping is:

- **idempotent**: a string the provider already accepts is kept as is;
- **injective**: distinct originals never share an output, even when they differ only
  in forbidden characters (``a:b`` / ``a.b``), are empty, or their short hashes collide;
- **deterministic**: sha256 and fixed probing, no randomness, no process hash seed;
- **reversible**: `NameMap` maps provider strings back to the caller's.

How one string that the provider rejects is rewritten (first free candidate wins):

1. the string with forbidden characters replaced by ``_`` (or ``-``, or dropped when the
   alphabet has neither), if that is acceptable: ``get.weather`` -> ``get_weather``;
2. for probes 1..64: a readable prefix of step 1, a separator and a base-N sha256 digest
   of (probe, original), or only the digest when the rule leaves no room for a prefix;
3. the shortest acceptable strings in alphabet order, for tiny custom rules whose space
   the hashes did not cover; a rule whose space is exhausted raises `ValueError`.

Acceptable originals are reserved before any rejected one is rewritten, so rewriting
can never take an id or name that was already valid.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import string
from collections.abc import Iterable, Iterator, Mapping
from typing import TypeVar

import msgspec

from pipeline.values.chunks import ModelEvent, ToolCall, ToolCallDelta
from pipeline.values.messages import Message, Part, ToolCallPart, ToolResultPart
from pipeline.values.model import ModelRequest, ToolChoiceTool
from pipeline.values.pairing import repair_pairing

__all__ = [
    "ALNUM",
    "ANTHROPIC",
    "BEDROCK",
    "GEMINI",
    "MISTRAL",
    "OPENAI",
    "SAFE_CHARS",
    "NameMap",
    "Rule",
    "SanitizeProfile",
    "prepare_request",
    "restore_event",
    "restore_message",
    "sanitize_request",
]

ALNUM = string.ascii_letters + string.digits
SAFE_CHARS = ALNUM + "_-"
"""``[a-zA-Z0-9_-]``: what OpenAI and Anthropic accept in ids and tool names."""

_HASH_BITS = 40
"""Digest strength aimed for; probing, not digest length, is what guarantees injectivity."""
_MAX_PROBES = 64
_MIN_PREFIX = 4
"""Below this many readable characters a prefix only costs digest room."""
_PREFIX_CAP = 48
"""Readable prefix cap when the rule has no maximum length."""


class Rule(msgspec.Struct, frozen=True):
    """The strings a provider accepts in one slot: characters from `alphabet`,
    length in ``[min_len, max_len]`` (`max_len` None: unbounded)."""

    alphabet: str
    min_len: int = 1
    max_len: int | None = None
    first: str | None = None
    """The characters a non-empty string may start with (a subset of `alphabet`); None:
    any of `alphabet` (Gemini's names start with a letter or an underscore)."""

    def __post_init__(self) -> None:
        if not self.alphabet:
            raise ValueError("Rule: alphabet must not be empty")
        if self.first is not None and (not self.first or set(self.first) - set(self.alphabet)):
            raise ValueError("Rule: first must be a non-empty subset of alphabet")
        if len(set(self.alphabet)) != len(self.alphabet):
            raise ValueError("Rule: alphabet has repeated characters")
        if self.min_len < 0:
            raise ValueError("Rule: min_len must be >= 0")
        if self.max_len is not None and self.max_len < max(self.min_len, 1):
            raise ValueError("Rule: max_len must be >= max(min_len, 1)")

    def accepts(self, s: str) -> bool:
        """Whether the provider takes `s` unchanged."""
        if len(s) < self.min_len or (self.max_len is not None and len(s) > self.max_len):
            return False
        if self.first is not None and s and s[0] not in self.first:
            return False
        # strip removes every leading/trailing char in the set: empty iff all chars allowed
        return s.strip(self.alphabet) == ""

    @property
    def pattern(self) -> str:
        """The rule as an anchored regular expression (for documentation and checks)."""
        chars = "".join("\\" + c if c in "\\]^-[" else c for c in self.alphabet)
        upper = "" if self.max_len is None else str(self.max_len)
        if self.first is None:
            return f"^[{chars}]{{{self.min_len},{upper}}}$"
        head = "".join("\\" + c if c in "\\]^-[" else c for c in self.first)
        return f"^(?![^{head}])[{chars}]{{{self.min_len},{upper}}}$"

    @property
    def _fill(self) -> str:
        """What replaces a forbidden character (empty: drop it)."""
        return "_" if "_" in self.alphabet else "-" if "-" in self.alphabet else ""

    @property
    def _digest_len(self) -> int:
        base = len(self.alphabet)
        n = 1 if base == 1 else math.ceil(_HASH_BITS / math.log2(base))
        return n if self.max_len is None else min(n, self.max_len)


class SanitizeProfile(msgspec.Struct, frozen=True):
    """What one provider accepts as tool-call ids and as tool names.

    Declare another with `SanitizeProfile.custom(...)`, or with `Rule`s directly.
    """

    name: str
    ids: Rule
    names: Rule

    @classmethod
    def custom(
        cls,
        name: str,
        *,
        id_chars: str = SAFE_CHARS,
        id_min_len: int = 1,
        id_max_len: int | None = 64,
        name_chars: str = SAFE_CHARS,
        name_min_len: int = 1,
        name_max_len: int | None = 64,
        name_first: str | None = None,
    ) -> SanitizeProfile:
        return cls(
            name,
            Rule(id_chars, id_min_len, id_max_len),
            Rule(name_chars, name_min_len, name_max_len, name_first),
        )


OPENAI = SanitizeProfile.custom("openai", id_max_len=40)
"""Chat Completions: names ``^[a-zA-Z0-9_-]{1,64}$``; ids capped at 40 characters
(OpenAI answers longer ones with ``string_above_max_length``)."""
ANTHROPIC = SanitizeProfile.custom("anthropic", id_max_len=None)
"""Messages API: tool_use ids ``^[a-zA-Z0-9_-]+$``, names ``^[a-zA-Z0-9_-]{1,64}$``."""
MISTRAL = SanitizeProfile.custom("mistral", id_chars=ALNUM, id_min_len=9, id_max_len=9)
"""Mistral-style servers: ids exactly nine alphanumerics; names as OpenAI."""
BEDROCK = SanitizeProfile.custom("bedrock")
"""Bedrock Converse: toolUseId ``^[a-zA-Z0-9_-]+$`` of at most 64 characters, toolSpec
names ``^[a-zA-Z0-9_-]{1,64}$``."""
GEMINI = SanitizeProfile.custom(
    "gemini", name_chars=SAFE_CHARS + ".:", name_first=string.ascii_letters + "_"
)
"""Gemini: function names ``^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$``; call ids as OpenAI's
names (its own are short and alphanumeric)."""


class NameMap(msgspec.Struct, frozen=True):
    """How one request's ids and names were rewritten, both ways.

    Only changed entries are stored, so the empty map is the identity and any string
    not in it (a kept original, an id the provider made up) maps to itself.
    Build one with `NameMap.of`; the backward maps must be the forward maps' inverses.
    """

    ids: Mapping[str, str] = msgspec.field(default_factory=dict)
    names: Mapping[str, str] = msgspec.field(default_factory=dict)
    ids_back: Mapping[str, str] = msgspec.field(default_factory=dict)
    names_back: Mapping[str, str] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        # stored both ways so lookups per streamed chunk stay O(1); check they agree
        if dict(self.ids_back) != _inverse(self.ids) or dict(self.names_back) != _inverse(
            self.names
        ):
            raise ValueError("NameMap: backward maps must invert the (injective) forward maps")

    @classmethod
    def of(cls, ids: Mapping[str, str], names: Mapping[str, str]) -> NameMap:
        """From original -> sanitized maps (entries mapping a string to itself are dropped)."""
        i = {k: v for k, v in ids.items() if k != v}
        n = {k: v for k, v in names.items() if k != v}
        return cls(i, n, _inverse(i), _inverse(n))

    @property
    def is_identity(self) -> bool:
        return not self.ids and not self.names

    def sanitized_id(self, original: str) -> str:
        return self.ids.get(original, original)

    def original_id(self, sanitized: str) -> str:
        """The caller's id for `sanitized`; an unknown id is returned unchanged."""
        return self.ids_back.get(sanitized, sanitized)

    def sanitized_name(self, original: str) -> str:
        return self.names.get(original, original)

    def original_name(self, sanitized: str) -> str:
        """The caller's tool name for `sanitized`; an unknown name is returned unchanged."""
        return self.names_back.get(sanitized, sanitized)


def _inverse(m: Mapping[str, str]) -> dict[str, str]:
    inv = {v: k for k, v in m.items()}
    if len(inv) != len(m):
        raise ValueError("NameMap: two originals share a sanitized value")
    return inv


# --- the rewriting -----------------------------------------------------------------


def _digest(original: str, probe: int, n: int, alphabet: str) -> str:
    """`n` base-len(alphabet) digits of sha256(probe, original): stable across processes."""
    data = probe.to_bytes(4, "big") + original.encode("utf-8", "surrogatepass")
    base = len(alphabet)
    blocks = math.ceil((n * base.bit_length() + 64) / 256)
    num = int.from_bytes(
        b"".join(hashlib.sha256(i.to_bytes(4, "big") + data).digest() for i in range(blocks)),
        "big",
    )
    out = []
    for _ in range(n):
        num, r = divmod(num, base)
        out.append(alphabet[r])
    return "".join(out)


def _clean(original: str, rule: Rule) -> str:
    fill = rule._fill
    cleaned = "".join(c if c in rule.alphabet else fill for c in original)
    first = rule.first
    if first is not None and cleaned and cleaned[0] not in first:
        # A readable prefix that may start the string (`_` where the rule allows it).
        cleaned = ("_" if "_" in first else first[0]) + cleaned
    return cleaned


def _candidate(original: str, cleaned: str, rule: Rule, probe: int) -> str:
    if probe == 0:
        return cleaned
    digest_len = rule._digest_len
    sep = rule._fill
    room = _PREFIX_CAP if rule.max_len is None else rule.max_len - digest_len - len(sep)
    room = min(room, _PREFIX_CAP)
    head = cleaned[:room] + sep if cleaned and room >= _MIN_PREFIX else ""
    n = max(digest_len, rule.min_len - len(head))
    if rule.max_len is not None:
        n = min(n, rule.max_len - len(head))
    return head + _digest(original, probe, n, rule.alphabet)


def _all_accepted(rule: Rule) -> Iterator[str]:
    """Every acceptable string, shortest first: the last resort for tiny rules."""
    length = rule.min_len
    while rule.max_len is None or length <= rule.max_len:
        for chars in itertools.product(rule.alphabet, repeat=length):
            yield "".join(chars)
        length += 1


def _rewrite(original: str, rule: Rule, taken: set[str], what: str) -> str:
    cleaned = _clean(original, rule)
    for probe in range(_MAX_PROBES + 1):
        c = _candidate(original, cleaned, rule, probe)
        if c not in taken and rule.accepts(c):
            return c
    # each taken string blocks one step, so this stops within len(taken) + 1 steps
    for c in _all_accepted(rule):
        if c not in taken and rule.accepts(c):
            return c
    raise ValueError(f"sanitize: the rule {rule.pattern} has no room for another {what}")


def _assign(originals: Iterable[str], rule: Rule, what: str) -> dict[str, str]:
    """An injective original -> sanitized map over `originals`, changed entries only.

    Acceptable originals are reserved first; the rest are rewritten in order of first
    appearance, which decides who gets a contested candidate.
    """
    ordered = dict.fromkeys(originals)
    kept = {o for o in ordered if rule.accepts(o)}
    taken = set(kept)
    out: dict[str, str] = {}
    for o in ordered:
        if o not in kept:
            s = _rewrite(o, rule, taken, what)
            taken.add(s)
            out[o] = s
    return out


# --- requests, messages, events ------------------------------------------------------


def _tool_parts(messages: Iterable[Message]) -> Iterator[ToolCallPart | ToolResultPart]:
    for m in messages:
        for p in m.parts:
            if isinstance(p, ToolCallPart | ToolResultPart):
                yield p


def _request_names(request: ModelRequest) -> Iterator[str]:
    # definitions first, so a tool's own spec decides contested candidates
    for spec in request.tools:
        yield spec.name
    if isinstance(request.tool_choice, ToolChoiceTool):
        yield request.tool_choice.tool_name
    if request.structured_output is not None:
        # codecs send it as a response-format name or a forced tool name: same rules
        yield request.structured_output.name
    for p in _tool_parts(request.messages):
        yield p.tool_name


def _map_message(m: Message, ids: Mapping[str, str], names: Mapping[str, str]) -> Message:
    if not ids and not names:
        return m
    parts: list[Part] = []
    changed = False
    for p in m.parts:
        if isinstance(p, ToolCallPart | ToolResultPart):
            i = ids.get(p.tool_call_id, p.tool_call_id)
            n = names.get(p.tool_name, p.tool_name)
            if i != p.tool_call_id or n != p.tool_name:
                p = msgspec.structs.replace(p, tool_call_id=i, tool_name=n)
                changed = True
        parts.append(p)
    # unchanged messages are shared, not copied
    return m.with_parts(parts) if changed else m


def sanitize_request(
    request: ModelRequest, profile: SanitizeProfile
) -> tuple[ModelRequest, NameMap]:
    """`request` with every tool-call id and tool name (in messages, tools, tool_choice
    and the structured-output name) rewritten to `profile`, and the map to undo it."""
    ids = _assign((p.tool_call_id for p in _tool_parts(request.messages)), profile.ids, "id")
    names = _assign(_request_names(request), profile.names, "tool name")
    names_map = NameMap.of(ids, names)
    if names_map.is_identity:
        return request, names_map
    choice = request.tool_choice
    if isinstance(choice, ToolChoiceTool):
        choice = ToolChoiceTool(names.get(choice.tool_name, choice.tool_name))
    out = msgspec.structs.replace(
        request,
        messages=tuple(_map_message(m, ids, names) for m in request.messages),
        tools=tuple(
            msgspec.structs.replace(t, name=names[t.name]) if t.name in names else t
            for t in request.tools
        ),
        tool_choice=choice,
        structured_output=(
            None
            if request.structured_output is None
            else msgspec.structs.replace(
                request.structured_output,
                name=names.get(request.structured_output.name, request.structured_output.name),
            )
        ),
    )
    return out, names_map


def prepare_request(
    request: ModelRequest, profile: SanitizeProfile
) -> tuple[ModelRequest, NameMap]:
    """What a codec should encode: pairing repaired, then ids and names sanitized.

    Repair comes first: it may give repeated call ids fresh ones, which the sanitizer
    then fits to the profile; sanitizing is injective, so it keeps the pairing.
    """
    repaired = msgspec.structs.replace(request, messages=repair_pairing(request.messages))
    return sanitize_request(repaired, profile)


def restore_message(message: Message, names: NameMap) -> Message:
    """A decoded message with the provider's ids and names mapped back to the caller's."""
    return _map_message(message, names.ids_back, names.names_back)


E = TypeVar("E", bound=ModelEvent)


def restore_event(event: E, names: NameMap) -> E:
    """A decoded model event with its tool-call id and tool name mapped back;
    events without either are returned as they are."""
    if isinstance(event, ToolCall | ToolCallDelta):
        i = names.original_id(event.tool_call_id)
        n = names.original_name(event.tool_name)
        if i != event.tool_call_id or n != event.tool_name:
            return msgspec.structs.replace(event, tool_call_id=i, tool_name=n)
    return event
