"""PIIDetector: finds personal data and secrets on input, on the stream and on the result,
and detects, redacts, masks, hashes or blocks them.

On the stream it holds a bounded window of text back (see `holdback.py`), so a value
split across any chunk boundaries is found whole and never reaches the caller, the
response message or `result.text` before it is redacted. It fails closed: a detector that
raises blocks the run (`on_error="allow"` lets the text through unchecked instead).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from typing import Literal, cast

import msgspec

import pipeline.processor as pr
from effects import Abort, Continue, Out, Replace, Skip
from pipeline.processor import AskModel, ModelAnswer, StatefulProcessor, StepChange, abort
from pipeline.processors.guards import pii_detectors as d
from pipeline.processors.guards import text_view
from pipeline.processors.guards.common import unread_results
from pipeline.processors.guards.holdback import (
    NOTHING_HELD,
    BlockKind,
    Held,
    delta,
    flush_held,
    hold_stream,
)
from pipeline.processors.options import Options
from pipeline.values.chunks import (
    Chunk,
    DataChunk,
    ReasoningDelta,
    ServerToolCall,
    ServerToolResult,
    TextDelta,
    ToolApprovalRequest,
    ToolCall,
    ToolCallDelta,
    ToolError,
    ToolResult,
)
from pipeline.values.messages import (
    Message,
    MessageList,
    Part,
    ServerToolCallPart,
    ServerToolResultPart,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from pipeline.values.model import ModelRequest

Strategy = Literal["detect", "redact", "mask", "hash", "remove", "block"]
OnError = Literal["block", "allow"]
Kind = Literal[
    "email", "card", "iban", "national-id", "ip", "secret", "phone",  # BUILTIN_KINDS
    "url", "uuid", "crypto-wallet",  # OPTIONAL_KINDS
]
"""The built-in kinds `types=` takes (`pii_detectors.BUILTIN_KINDS + OPTIONAL_KINDS`)."""
DEFAULT_KINDS = cast("tuple[Kind, ...]", d.BUILTIN_KINDS)
JUDGED = "judged"
"""The kind of a value the judge found (`_judged_text`), a key `strategies=` may have
with a judge."""
Where = Literal["input", "stream", "result", "tool-results", "tool-calls"]


class PIIState(msgspec.Struct, frozen=True):
    """A detector's state in a run: the stream's text held back, and the tool calls
    whose results `process_tool_result` handled (with `scan_tools`), which no later
    hook of the detector scans again."""

    held: Held = NOTHING_HELD
    checked: frozenset[str] = frozenset()

    def holding(self, held: Held) -> PIIState:
        return self if held is self.held else PIIState(held, self.checked)


NOTHING_SEEN = PIIState()

_TOOL_CHUNKS = frozenset({
    ToolCall, ToolCallDelta, ToolResult, ToolError, ToolApprovalRequest, ServerToolCall,
    ServerToolResult,
})
"""The chunks that carry a tool call's arguments or result to the client."""

_Handle = Callable[[str, list[d.Finding]], str]
"""A text handled, its findings added to the report (`redact_text`, `_judged_text`)."""

JUDGE_PROMPT = (
    "You find personal data and secrets in a text: names of people, email addresses, "
    "phone numbers, postal addresses, payment cards, bank accounts, national ids, IP "
    "addresses, API keys, passwords. Reply with JSON only: "
    '{"values": [{"type": "<kind>", "value": "<the exact text>"}]}; '
    '{"values": []} when there is none.'
)


class JudgeValue(msgspec.Struct, frozen=True):
    type: str
    value: str


class JudgeReply(msgspec.Struct, frozen=True):
    values: tuple[JudgeValue, ...]


_judge_decoder = msgspec.json.Decoder(JudgeReply)


class PIIDetector(StatefulProcessor[PIIState]):
    """Personal data and secrets, found and handled on input, stream and result.

    - `types`: which built-in kinds to look for (`pii_detectors.BUILTIN_KINDS`: email,
      phone, card, iban, national-id, ip, secret; by default all of them; and on request
      `OPTIONAL_KINDS`: url, uuid, crypto-wallet); `custom` adds kinds of your own, each a
      regex or a function returning spans.
    - `strategy` for every kind, `strategies` per kind: "detect" (pass, report in a
      transient `data-pii` chunk), "redact" (`[REDACTED:email]`), "mask" (`****1111`,
      `j***@example.com`), "hash" (`[email:3f2a...]`, salted with `salt`), "block"
      (abort the run), "remove" (the value dropped).
    - `window`: characters held back on the stream; set it at least as long as the
      longest value a pattern must see whole (64 covers the built-in kinds). A value
      still growing at the window's edge is held from its start, up to `max_hold`
      characters; past that the run is blocked (fail closed, never a partial release).
    - `on_error`: "block" (default) when a detector raises; "allow" passes the text on.
    - `regex_only`: use no library (`phonenumbers`, `python-stdnum`): phone numbers by
      pattern, cards and IBANs by their check digits computed here, and no national ids.
    - `judge_model`: also ask this model (through `AskModel`) for values on input and on
      the result. With `judge_stream=True` the stream is judged too: each text block is
      held whole (up to `max_hold` characters, past which the run is blocked) and
      released at its end, judged; otherwise the stream keeps to the local detectors.
    - Tool calls and results sent out (their `tool-call` / `tool-result` / `tool-error`
      chunks on the stream, and the tool calls and results in the result's messages) are
      always handled, every string in them (keys too), by the local detectors (not the
      judge): what leaves the run is handled. A call's `tool-call-delta` chunks are not
      streamed (partial JSON cannot be judged; the complete call follows), and the tool
      still runs with the model's arguments. So are the calls and results of tools the
      provider ran (`server-tool-call`, `server-tool-result`), approval requests, and
      `data-*` chunks on the stream (what a tool writes for the client).
    - `scan_tools`: also what the model and the tools see. With `on_input` (what the
      model reads), each result of a tool the run ran is handled in
      `process_tool_result` (the detector in either list), before the
      model, the stream or the messages see it, and not scanned again on the way out;
      as an input processor, before each model call, also the tool results the model
      has not read that no tool-result hook saw (the caller's history, a call answered
      without running). Tool-call arguments are handled before the tool runs too
      (`process_tool_call`: the tool gets them handled).
    - `concurrent`: with a `judge_model` and only "block"/"detect", the input check runs
      beside the first model call (`pipeline.loop.race`): the model's output is held,
      and no tool runs, until it passed.
    """

    either_list = True  # an input check, an output check or both, as placed

    process_data_parts = True
    """`data-*` chunks (what a tool writes for the client) are handled as tool results are."""

    def __init__(
        self,
        *,
        id: str = "pii-detector",
        types: Iterable[Kind] = DEFAULT_KINDS,
        strategy: Strategy = "redact",
        strategies: Mapping[str, Strategy] | None = None,
        custom: Mapping[str, str | re.Pattern[str] | d.Detector] | None = None,
        phone_regions: Sequence[str] = ("US",),
        national_ids: Sequence[str] = d.DEFAULT_NATIONAL_IDS,
        window: int = 64,
        max_hold: int = 4096,
        salt: str = "",
        on_input: bool = True,
        on_stream: bool = True,
        on_result: bool = True,
        on_error: OnError = "block",
        regex_only: bool = False,
        judge_model: str | None = None,
        judge_stream: bool = False,
        judge_instructions: str = JUDGE_PROMPT,
        scan_tools: bool = False,
        concurrent: bool = False,
    ) -> None:
        kinds, patterns = _check_options(
            id=id, types=types, strategy=strategy, strategies=strategies, custom=custom,
            phone_regions=phone_regions, national_ids=national_ids, window=window,
            max_hold=max_hold, salt=salt, on_input=on_input, on_stream=on_stream,
            on_result=on_result, on_error=on_error, regex_only=regex_only,
            judge_model=judge_model, judge_stream=judge_stream,
            judge_instructions=judge_instructions, scan_tools=scan_tools,
            concurrent=concurrent,
        )
        self.id = id
        self.concurrent = concurrent
        """Its input check runs beside the first model call (`pipeline.loop.race`)."""
        self.strategy: Strategy = strategy
        self.strategies: dict[str, Strategy] = dict(strategies or {})
        self.window = window
        self.max_hold = max_hold
        self.salt = salt
        self.on_input, self.on_stream, self.on_result = on_input, on_stream, on_result
        self.on_error: OnError = on_error
        self.judge_model = judge_model
        self.judge_stream = judge_stream
        self.judge_instructions = judge_instructions
        self.scan_tools = scan_tools
        built = ((kind, _builtin(kind, regex_only, phone_regions, national_ids))
                 for kind in kinds)
        self.detectors: tuple[tuple[str, d.Detector], ...] = (
            *((kind, found) for kind, found in built if found is not None),
            *((name, d.custom(pattern)) for name, pattern in patterns.items()),
        )

    def initial_state(self) -> PIIState:
        return NOTHING_SEEN

    # --- finding and handling ---------------------------------------------------------

    def find(self, text: str) -> list[d.Finding]:
        """Every value in `text`, disjoint, in order (a detector's error propagates).

        The detectors read the text's plain view (`text_view`: invisible characters
        dropped, full-width forms and look-alike letters made plain), so a disguised
        value is found; each span is the whole span of `text` it was read from.
        """
        return self._find_in(text, text_view.view(text))

    def _find_in(self, text: str, v: text_view.TextView) -> list[d.Finding]:
        found = [d.Finding(s, e, kind) for kind, det in self.detectors for s, e in det(v.text)]
        if v.origin is None:
            return d.resolve(found)
        mapped = [d.Finding(*v.span(f.start, f.end), f.kind) for f in found if f.end > f.start]
        # and the text as it is: a custom pattern may be written for its letters, and an
        # invisible character between two words is also a word boundary there
        mapped.extend(
            d.Finding(s, e, kind) for kind, det in self.detectors for s, e in det(text)
        )
        return d.resolve(mapped)

    def strategy_for(self, kind: str) -> Strategy:
        return self.strategies.get(kind, self.strategy)

    def replacement(self, kind: str, value: str) -> str:
        """What a value becomes under its kind's strategy (detect: itself)."""
        how = self.strategy_for(kind)
        if how == "redact":
            return f"[REDACTED:{kind}]"
        if how == "mask":
            return _mask(kind, value)
        if how == "remove":
            return ""
        if how == "hash":
            digest = hashlib.sha256((self.salt + value).encode()).hexdigest()[:12]
            return f"[{kind}:{digest}]"
        return value

    def _handle(self, text: str, found: list[d.Finding]) -> str:
        """`text` with each finding handled; a blocking kind aborts the run."""
        blocked = sorted({f.kind for f in found if self.strategy_for(f.kind) == "block"})
        if blocked:
            abort(f"PII detected: {', '.join(blocked)}", metadata={"kinds": list(blocked)})
        out: list[str] = []
        at = 0
        for f in found:
            out.append(text[at:f.start])
            value = text[f.start:f.end]
            # the value as read (a disguised one made plain), except to detect (kept as is)
            out.append(value if self.strategy_for(f.kind) == "detect"
                       else self.replacement(f.kind, text_view.view(value).text))
            at = f.end
        out.append(text[at:])
        return "".join(out)

    def _find_or_fail(
        self, text: str, v: text_view.TextView | None = None
    ) -> list[d.Finding] | None:
        """`find`, failing closed: None when a detector raised and errors are allowed."""
        try:
            return self._find_in(text, text_view.view(text) if v is None else v)
        except Exception as e:
            if self.on_error == "allow":
                return None
            abort(
                f"PII detection failed ({type(e).__name__}); blocked to fail closed",
                metadata={"error": type(e).__name__},
            )

    def redact_text(self, text: str, report: list[d.Finding] | None = None) -> str:
        """A whole text (not streamed) handled by the strategy."""
        found = self._find_or_fail(text)
        if not found:
            return text
        if report is not None:
            report.extend(found)
        return self._handle(text, found)

    def _scan(self, report: list[d.Finding], text: str, final: bool) -> tuple[str, str]:
        """The stream's scanner (`holdback.Scanner`): release what is safe, keep the rest.

        Scans once the held text reaches twice the window, so each character is scanned
        about twice; releases all but the last `window` characters, and never the start
        of a value that may still be growing (held from its start, up to `max_hold`).
        The window counts characters of the plain view (`text_view`), so invisible
        characters stretching a value being written do not push its start out of it;
        `max_hold` counts the text's own characters (it bounds the buffer).
        """
        n = len(text)
        if not final and n < 2 * self.window:
            return "", text
        v = text_view.view(text)
        nv = len(v.text)
        if not final and nv < 2 * self.window and n <= self.max_hold:
            return "", text
        found = self._find_or_fail(text, v)
        keep = v.offset(max(0, nv - self.window))
        if found is None:  # a detector failed and errors are allowed through
            return (text, "") if final else (text[:keep], text[keep:])
        cut = n if final else d.context_start(text, keep)  # a phone/card word held too
        for f in reversed(found):  # a value across the cut is held from its start
            if f.start < cut < f.end:
                cut = f.start
        cut = _token_start(text, cut, n - self.max_hold // 2)
        if n - cut > self.max_hold:
            abort(
                f"a possible PII value is longer than max_hold ({self.max_hold}); "
                "blocked to fail closed",
                metadata={"max_hold": self.max_hold},
            )
        done = [f for f in found if f.end <= cut]
        report.extend(done)
        return self._handle(text[:cut], done) if done else text[:cut], text[cut:]

    def _report(self, found: list[d.Finding], where: Where) -> tuple[DataChunk, ...]:
        if not found:
            return ()
        kinds: dict[str, int] = {}
        for f in found:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
        return (DataChunk("data-pii", {"processor_id": self.id, "where": where,
                                       "found": kinds}, transient=True),)

    # --- hooks ------------------------------------------------------------------------

    def process_input(self, args: pr.InputArgs[PIIState]) -> pr.InputResult[PIIState]:
        if not self.on_input:
            return Continue()
        return self._input_handled(args, self.redact_text)

    def _input_handled(self, args: pr.InputArgs[PIIState], handle: _Handle
                       ) -> pr.InputResult[PIIState]:
        """The user messages with `handle` applied to their text."""
        report: list[d.Finding] = []
        ml = _map_text(args.message_list, lambda t: handle(t, report), ("user",))
        return _result(ml, args.message_list, args.state, self._report(report, "input"))

    def _result_handled(self, args: pr.OutputResultArgs[PIIState], handle: _Handle
                        ) -> pr.OutputResultResult[PIIState]:
        """The run's answer with `handle` applied to its text, its tool results handled."""
        report: list[d.Finding] = []
        ml = _map_text(args.message_list, lambda t: handle(t, report), ("assistant",),
                       only=frozenset(m.id for m in args.messages))
        ml = self._tools_in_result(args, ml, report)
        return _result(ml, args.message_list, args.state, self._report(report, "result"))

    def process_output_stream(self, args: pr.StreamArgs[PIIState]) -> pr.StreamResult[PIIState]:
        if not self.on_stream:
            return Continue()
        report: list[d.Finding] = []
        part, state = args.part, args.state
        t = type(part)
        if t is DataChunk:
            return self._data_chunk(part, state, report)
        if t in _TOOL_CHUNKS:
            tool_part = self._tool_chunk(part, report, state.checked)
            if tool_part is None:
                return Skip()
            part = tool_part
        chunks, held = hold_stream(part, state.held, lambda t, f: self._scan(report, t, f))
        if chunks is None:
            if part is args.part:
                return Continue()
            chunks = (part,)
        return Out(Replace(chunks), state.holding(held), self._report(report, "stream"))

    # --- tool calls and results (scan_tools) ------------------------------------------

    def _value(self, value: object, report: list[d.Finding]) -> object:
        """A JSON-like value with every string in it handled, keys too (a result keyed
        by e-mail address); keys handled alike stay apart (` #2`...), nothing is lost."""
        if isinstance(value, str):
            return self.redact_text(value, report)
        if isinstance(value, dict):
            out: dict[object, object] = {}
            for k, v in value.items():
                key = self.redact_text(k, report) if isinstance(k, str) else k
                if key in out:
                    n = 2
                    while f"{key} #{n}" in out or f"{key} #{n}" in value:
                        n += 1
                    key = f"{key} #{n}"
                out[key] = self._value(v, report)
            return out
        if isinstance(value, list | tuple):
            return [self._value(v, report) for v in value]
        if value is None or isinstance(value, bool | int | float):
            return value
        return self._value(msgspec.to_builtins(value), report)  # a Struct, a dataclass...

    def _data_chunk(
        self, part: Chunk, state: PIIState, report: list[d.Finding]
    ) -> pr.StreamResult[PIIState]:
        """A `data-*` chunk with every string in its data handled (local detectors). It
        passes at once, the text held stays held (as before it was looked at)."""
        assert isinstance(part, DataChunk)
        data = self._value(part.data, report)
        if not report:
            return Continue()
        return Out(Replace(msgspec.structs.replace(part, data=data)), state,
                   self._report(report, "stream"))

    def _tool_chunk(
        self, part: Chunk, report: list[d.Finding], checked: frozenset[str]
    ) -> Chunk | None:
        """A tool chunk with its arguments or result handled (a result `checked` in
        process_tool_result as it is); None for a tool-call delta (its partial arguments
        cannot be checked; the complete call follows). What the client gets: the tool
        runs with the model's arguments all the same (`scan_tools`: `_tool_call`)."""
        t = type(part)
        if t is ToolCallDelta:
            return None
        if (t is ToolResult or t is ToolError) and checked:
            assert isinstance(part, ToolResult | ToolError)
            if part.tool_call_id in checked:
                return part
        # (a provider's own tool's call and result too: never checked on the way in)
        if t is ToolCall or t is ServerToolCall:
            assert isinstance(part, ToolCall | ServerToolCall)
            found = len(report)
            args = self._value(part.args, report)
            if len(report) > found and isinstance(args, dict):
                return msgspec.structs.replace(part, args=args)
        elif t is ToolResult or t is ServerToolResult:
            assert isinstance(part, ToolResult | ServerToolResult)
            found = len(report)
            result = self._value(part.result, report)
            if len(report) > found:
                return msgspec.structs.replace(part, result=result)
        elif t is ToolError:
            assert isinstance(part, ToolError)
            error = self.redact_text(part.error, report)
            if error != part.error:
                return msgspec.structs.replace(part, error=error)
        elif t is ToolApprovalRequest:
            assert isinstance(part, ToolApprovalRequest)
            found = len(report)
            args = self._value(part.args, report)
            message = self.redact_text(part.message, report)
            if len(report) > found and isinstance(args, dict):
                return msgspec.structs.replace(part, args=args, message=message)
        return part

    def _tool_part(
        self, p: Part, report: list[d.Finding], calls: bool, checked: frozenset[str]
    ) -> Part:
        if isinstance(p, ToolResultPart):
            if p.tool_call_id in checked:
                return p
            found = len(report)
            result = self._value(p.result, report)
            if len(report) > found:
                return msgspec.structs.replace(p, result=result)
        elif calls and isinstance(p, ToolCallPart | ServerToolCallPart):
            found = len(report)
            args = self._value(p.args, report)
            if len(report) > found and isinstance(args, dict):
                return msgspec.structs.replace(p, args=args)
        elif isinstance(p, ServerToolResultPart):
            found = len(report)
            result = self._value(p.result, report)
            if len(report) > found:
                return msgspec.structs.replace(p, result=result)
        return p

    def _tool_messages(
        self, ml: MessageList, report: list[d.Finding], indices: Iterable[int],
        calls: bool, checked: frozenset[str],
    ) -> MessageList:
        """`ml` with the tool parts (results but those `checked` already; calls too with
        `calls`) of the messages at `indices` handled."""
        messages = list(ml.messages)
        changed = False
        for i in indices:
            m = messages[i]
            parts = tuple(self._tool_part(p, report, calls, checked) for p in m.parts)
            if any(a is not b for a, b in zip(parts, m.parts, strict=True)):
                messages[i] = m.with_parts(parts)
                changed = True
        return MessageList(tuple(messages), ml.sources, ml.system) if changed else ml

    def _tool_call(self, args: pr.ToolCallArgs[PIIState]) -> pr.ToolCallResult[PIIState]:
        """A call's arguments, handled before its tool runs (`scan_tools`): the tool
        gets them as the client does."""
        report: list[d.Finding] = []
        handled = self._value(args.args, report)
        if not report or handled == args.args or not isinstance(handled, dict):
            return Continue()
        return Out(Replace(handled), args.state, self._report(report, "tool-calls"))

    def _tool_result(self, args: pr.ToolResultArgs[PIIState]) -> pr.ToolResultResult[PIIState]:
        """A result of a tool the run ran, handled before anyone sees it (`scan_tools`)."""
        report: list[d.Finding] = []
        result = self._value(args.result, report)
        s = args.state
        state = PIIState(s.held, s.checked | {args.call.tool_call_id})
        changed = bool(report) and result != args.result
        return Out(Replace(result) if changed else Continue(), state,
                   self._report(report, "tool-results"))

    def _tool_results_step(self, args: pr.InputStepArgs[PIIState]) -> pr.InputStepResult[PIIState]:
        """Before a model call: the tool results it has not read yet that no hook of the
        detector handled (those of the caller's history), handled once
        (a retry of the step does not handle them again)."""
        ml, s = args.message_list, args.state
        unread = unread_results(ml, s.checked)
        if not unread:
            return Continue()
        report: list[d.Finding] = []
        new = self._tool_messages(ml, report, sorted({i for i, _, _ in unread}), True,
                                  s.checked)
        state = PIIState(s.held, s.checked | {p.tool_call_id for _, _, p in unread})
        effect = Continue() if new is ml else Replace(StepChange(message_list=new))
        return Out(effect, state, self._report(report, "tool-results"))

    def _tools_in_result(self, args: pr.OutputResultArgs[PIIState], ml: MessageList,
                         report: list[d.Finding]) -> MessageList:
        """The run's tool calls and results in the result's messages, handled: what
        leaves the run (the model may have read them as the tools returned them, and the
        tools ran with the model's arguments, without scan_tools)."""
        ids = frozenset(m.id for m in args.messages)
        return self._tool_messages(
            ml, report, [i for i, m in enumerate(ml.messages) if m.id in ids],
            True, args.state.checked,
        )

    def flush_output_stream(self, args: pr.FlushArgs[PIIState]) -> pr.FlushResult[PIIState]:
        if not args.state.held.text:
            return Continue()
        report: list[d.Finding] = []
        chunks = flush_held(args.state.held, lambda t, f: self._scan(report, t, f))
        return Out(Replace(chunks), args.state.holding(NOTHING_HELD),
                   self._report(report, "stream"))

    def process_output_result(
        self, args: pr.OutputResultArgs[PIIState]
    ) -> pr.OutputResultResult[PIIState]:
        if not self.on_result:
            return Continue()
        return self._result_handled(args, self.redact_text)

    # --- the judge --------------------------------------------------------------------

    def hook_functions(self) -> Mapping[pr.HookName, Callable[..., object]]:
        hooks = dict(super().hook_functions())
        if self.judge_model is not None:
            hooks["process_input"] = self._judged_input
            hooks["process_output_result"] = self._judged_result
        if self.judge_stream:
            hooks["process_output_stream"] = self._judged_stream
            hooks["flush_output_stream"] = self._judged_flush
        if self.scan_tools and self.on_input:
            hooks["process_tool_result"] = self._tool_result
            hooks["process_input_step"] = self._tool_results_step
        if self.scan_tools:
            hooks["process_tool_call"] = self._tool_call
        return hooks

    def _ask_judge(
        self, texts: Sequence[str]
    ) -> Generator[object, object, list[str]]:
        """The values the judge names in `texts` (one request for all of them)."""
        if not any(t.strip() for t in texts):
            return []
        assert self.judge_model is not None
        answer = yield AskModel(ModelRequest(
            model=self.judge_model,
            system=(SystemMessage(self.judge_instructions),),
            messages=(Message(id="pii-judge-input", role="user",
                              parts=(TextPart("\n\n".join(texts)),)),),
        ))
        try:
            if not isinstance(answer, ModelAnswer):
                raise TypeError(f"expected ModelAnswer, got {type(answer).__name__}")
            reply = _judge_decoder.decode(answer.text.strip())
        except (TypeError, msgspec.DecodeError) as e:
            if self.on_error == "allow":
                return []
            abort(f"PII judge reply unreadable ({type(e).__name__}); blocked to fail closed")
        return [v.value for v in reply.values if v.value.strip()]

    def _judged_input(
        self, args: pr.InputArgs[PIIState]
    ) -> Generator[object, object, pr.InputResult[PIIState]]:
        if not self.on_input:
            return Continue()
        texts = [m.text for m in args.message_list.messages if m.role == "user"]
        return self._input_handled(args, self._judged_text((yield from self._ask_judge(texts))))

    def _judged_result(
        self, args: pr.OutputResultArgs[PIIState]
    ) -> Generator[object, object, pr.OutputResultResult[PIIState]]:
        if not self.on_result:
            return Continue()
        texts = [m.text for m in args.messages if m.role == "assistant"]
        return self._result_handled(args, self._judged_text((yield from self._ask_judge(texts))))

    def _judged_stream(
        self, args: pr.StreamArgs[PIIState]
    ) -> Generator[object, object, pr.StreamResult[PIIState]]:
        """The stream with the judge: each block held whole, judged at its end."""
        if not self.on_stream:
            return Continue()
        part, held = args.part, args.state.held
        report: list[d.Finding] = []
        pt = type(part)
        if pt is DataChunk:
            return self._data_chunk(part, args.state, report)
        if pt in _TOOL_CHUNKS:
            tool_part = self._tool_chunk(part, report, args.state.checked)
            if tool_part is None:
                return Skip()
            part = tool_part
        t = type(part)
        if t is TextDelta or t is ReasoningDelta:
            assert isinstance(part, TextDelta | ReasoningDelta)
            kind: BlockKind = "text" if t is TextDelta else "reasoning"
            out: tuple[Chunk, ...] = ()
            if held.text and (held.kind != kind or held.id != part.id):
                out = yield from self._judge_block(held, report)
                held = NOTHING_HELD
            text = held.text + part.text
            if len(text) > self.max_hold:
                abort(f"text block longer than max_hold ({self.max_hold}) for the PII "
                      "judge; blocked to fail closed", metadata={"max_hold": self.max_hold})
            return Out(Replace(out), args.state.holding(Held(kind, part.id, text)),
                       self._report(report, "stream"))
        if not held.text:
            if part is args.part:
                return Continue()
            return Out(Replace(part), args.state, self._report(report, "stream"))
        out = yield from self._judge_block(held, report)
        return Out(Replace((*out, part)), args.state.holding(NOTHING_HELD),
                   self._report(report, "stream"))

    def _judged_flush(
        self, args: pr.FlushArgs[PIIState]
    ) -> Generator[object, object, pr.FlushResult[PIIState]]:
        if not args.state.held.text:
            return Continue()
        report: list[d.Finding] = []
        out = yield from self._judge_block(args.state.held, report)
        return Out(Replace(out), args.state.holding(NOTHING_HELD),
                   self._report(report, "stream"))

    def _judge_block(
        self, held: Held, report: list[d.Finding]
    ) -> Generator[object, object, tuple[Chunk, ...]]:
        """A whole held block, judged and handled: the delta to release (if any)."""
        assert held.kind is not None
        values = yield from self._ask_judge([held.text])
        text = self._judged_text(values)(held.text, report)
        return (delta(held.kind, held.id, text),) if text else ()

    def _judged_text(self, values: list[str]) -> _Handle:
        """Text -> text handled for the local findings and the judge's values (each
        looked for as written and, in the text's plain view, as it reads), the findings
        added to the report."""
        wanted = {*values, *(text_view.view(v).text for v in values)} - {""}
        pattern = (
            re.compile("|".join(re.escape(v) for v in sorted(wanted, key=len, reverse=True)))
            if wanted else None
        )

        def handle(text: str, report: list[d.Finding]) -> str:
            v = text_view.view(text)
            local = self._find_or_fail(text, v) or []
            judged = [] if pattern is None else [
                d.Finding(m.start(), m.end(), "judged") for m in pattern.finditer(text)
            ]
            if pattern is not None and v.origin is not None:
                judged.extend(
                    d.Finding(*v.span(*m.span()), "judged")
                    for m in pattern.finditer(v.text) if m.end() > m.start()
                )
            found = d.resolve([*local, *judged])
            report.extend(found)
            return self._handle(text, found) if found else text

        return handle


_REGION = re.compile(r"[A-Z]{2}")


_PLAIN: dict[str, d.Detector] = {
    "email": d.email, "ip": d.ip, "secret": d.secret, "url": d.url, "uuid": d.uuid,
    "crypto-wallet": d.crypto_wallet,
}
"""The built-in kinds whose detector takes no options."""


def _builtin(
    kind: str, regex_only: bool, phone_regions: Sequence[str], national_ids: Sequence[str]
) -> d.Detector | None:
    """The detector of built-in `kind`; None for national ids when none are looked for."""
    plain = _PLAIN.get(kind)
    if plain is not None:
        return plain
    if kind == "card":
        return d.card(regex_only=regex_only)
    if kind == "iban":
        return d.iban(regex_only=regex_only)
    if kind == "phone":
        return d.phone(phone_regions, regex_only=regex_only)
    if kind == "national-id" and _national_ids_looked_for(regex_only, national_ids):
        return d.national_ids(national_ids)
    return None


def _national_ids_looked_for(regex_only: object, national_ids: object) -> bool:
    """Whether the "national-id" kind has a detector: it needs python-stdnum (not
    `regex_only`) and the ids to look for."""
    return not regex_only and bool(national_ids)


def _check_options(
    *, id: object, types: Iterable[str], strategy: object, strategies: object, custom: object,
    phone_regions: object, national_ids: object, window: object, max_hold: object,
    salt: object, on_input: object, on_stream: object, on_result: object,
    on_error: object, regex_only: object, judge_model: object, judge_stream: object,
    judge_instructions: object, scan_tools: object, concurrent: object,
) -> tuple[tuple[str, ...], dict[str, str | re.Pattern[str] | d.Detector]]:
    """Every option of `PIIDetector` checked (a setting not understood is an error, not a
    guard that lets values through): the kinds to look for and the custom detectors."""
    o = Options("PIIDetector")
    o.id(id)
    kinds = tuple(dict.fromkeys(o.choices("types", types, Kind)))
    o.choice("strategy", strategy, Strategy)
    patterns: dict[str, str | re.Pattern[str] | d.Detector] = {}
    if custom is not None:
        if not isinstance(custom, Mapping):
            raise o.fail("custom", custom, "a dict of kind name to a regex or a function")
        for name, pattern in custom.items():
            o.text("custom", name)
            if callable(pattern):
                patterns[name] = pattern
            else:
                patterns[name] = o.pattern(f"custom[{name!r}]", pattern)
    for flag, value in (("on_input", on_input), ("on_stream", on_stream),
                        ("on_result", on_result), ("regex_only", regex_only),
                        ("judge_stream", judge_stream), ("scan_tools", scan_tools)):
        o.flag(flag, value)
    o.optional_text("judge_model", judge_model)
    if judge_stream and judge_model is None:
        raise o.fail("judge_stream", judge_stream, "False without a judge_model")
    if strategies is not None:
        found = {*kinds, *patterns, *((JUDGED,) if judge_model is not None else ())}
        if not _national_ids_looked_for(regex_only, national_ids):
            found.discard("national-id")
        o.mapping("strategies", strategies, keys=found, values=Strategy)
    per_kind = tuple(strategies.values()) if isinstance(strategies, Mapping) else ()
    changing = sorted({str(v) for v in (strategy, *per_kind) if v not in ("block", "detect")})
    o.concurrent(concurrent, judged=judge_model is not None,
                 rewrites=f"strategy {changing[0]!r}" if changing else None)
    o.strings("phone_regions", phone_regions, check=_REGION.fullmatch,
              describe="a region code of two capital letters (ISO 3166, 'US')")
    if not regex_only and "phone" in kinds:
        try:
            import phonenumbers
        except ImportError:  # the phone detector names the missing library
            pass
        else:
            o.strings("phone_regions", phone_regions,
                      allowed=frozenset(phonenumbers.SUPPORTED_REGIONS),
                      describe="a region phonenumbers knows (ISO 3166, 'US')")
    o.strings("national_ids", national_ids, allowed=sorted(d.NATIONAL_IDS))
    w = o.integer("window", window, min=1)
    if not isinstance(max_hold, int) or isinstance(max_hold, bool) or max_hold < 2 * w:
        raise o.fail("max_hold", max_hold, f"an int >= 2 * window ({2 * w})")
    o.text("salt", salt, empty=True)
    o.choice("on_error", on_error, OnError)
    o.text("judge_instructions", judge_instructions)
    return kinds, patterns


def _token_start(text: str, cut: int, floor: int) -> int:
    """Move `cut` back to the start of the word it falls in (a value being typed is
    held whole), unless that word reaches back past `floor` (then the cut stays)."""
    if cut <= 0 or cut >= len(text) or text[cut - 1].isspace() or text[cut].isspace():
        return cut
    m = _LAST_TOKEN.search(text, 0, cut)
    start = m.start() if m is not None else cut
    return start if start >= floor else cut


_LAST_TOKEN = re.compile(r"\S+\Z")


def _map_text(
    ml: MessageList,
    fn: Callable[[str], str],
    roles: tuple[str, ...],
    only: frozenset[str] | None = None,
) -> MessageList:
    """`ml` with `fn` applied to the text parts of the messages of `roles` (and, with
    `only`, of those ids); the same list when nothing changed."""
    changed = False

    def one(m: Message) -> Message:
        nonlocal changed
        if m.role not in roles or (only is not None and m.id not in only):
            return m
        parts = tuple(TextPart(fn(p.text)) if isinstance(p, TextPart) else p for p in m.parts)
        if parts == m.parts:
            return m
        changed = True
        return m.with_parts(parts)

    new = ml.map_messages(one)
    return new if changed else ml


def _result(
    new: MessageList, old: MessageList, state: PIIState, emit: tuple[Chunk, ...]
) -> Out[Continue | Replace[MessageList] | Abort, PIIState] | Continue:
    effect: Continue | Replace[MessageList] | Abort = Continue() if new is old else Replace(new)
    if not emit and new is old:
        return Continue()
    return Out(effect, state, emit)


_SHOW_LAST_FOUR = frozenset({"card", "phone", "iban", "national-id", "secret"})


def _mask(kind: str, value: str) -> str:
    """Letters and digits starred, separators kept; cards, phones, IBANs, ids and secrets
    of eight or more keep their last four; an email keeps its domain."""
    if kind == "email" and "@" in value:
        local, _, domain = value.rpartition("@")
        shown = local[0] + "*" * (len(local) - 1) if len(local) > 3 else "*" * len(local)
        return f"{shown}@{domain}"
    keep = 4 if kind in _SHOW_LAST_FOUR and sum(c.isalnum() for c in value) >= 8 else 0
    out: list[str] = []
    for c in reversed(value):
        if c.isalnum():
            if keep:
                keep -= 1
                out.append(c)
            else:
                out.append("*")
        else:
            out.append(c)
    return "".join(reversed(out))


__all__ = [
    "DEFAULT_KINDS", "JUDGE_PROMPT", "Kind", "OnError", "PIIDetector", "PIIState", "Strategy",
]
