"""SystemPromptScrubber: the system prompt, or a long fragment of it, leaking into the
streamed answer is redacted (or the run blocked) before the caller sees it.

A leak is a run of at least `min_words` consecutive words of the prompt (case and
punctuation aside), found across chunk boundaries: the last `min_words` words are held
back until the next words show whether they start a leak. What leaks is held whole until
it ends (at most as long as the prompt), then redacted.

Beyond the prompt itself, `custom_patterns` (regular expressions such as
`r"(?i)my (system )?instructions"`) count as leaks too; each should match within
`min_words` words, the text held back. Strategies: `redact` (the leak replaced as
`redaction_method` says: `placeholder`, `mask` or `remove`), `warn` (let through) and
`block`. Every leak released is reported in a `data-<id>` chunk (action, where, count:
never the leaked text).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

import msgspec

from effects import Continue, Out, Replace
from pipeline.processor import (
    FlushArgs,
    FlushResult,
    OutputResultArgs,
    OutputResultResult,
    StatefulProcessor,
    StreamArgs,
    StreamResult,
    abort,
)
from pipeline.processors.guards.common import warning
from pipeline.processors.guards.holdback import NOTHING_HELD, Held, flush_held, hold_stream
from pipeline.processors.options import Options
from pipeline.values.chunks import DataChunk
from pipeline.values.messages import Message, TextPart

ScrubStrategy = Literal["redact", "warn", "block"]
RedactionMethod = Literal["placeholder", "mask", "remove"]

_WORD = re.compile(r"\w+")

Shingles = frozenset[tuple[str, ...]]


class ScrubState(msgspec.Struct, frozen=True):
    held: Held = NOTHING_HELD
    shingles: Shingles | None = None
    """Every run of `n` consecutive words of the prompt (made at the run's first chunk)."""
    n: int = 0
    prompt_chars: int = 0


def shingles_of(prompt: str, min_words: int) -> tuple[Shingles, int]:
    words = [w.casefold() for w in _WORD.findall(prompt)]
    n = min(min_words, len(words))
    if n == 0:
        return frozenset(), 0
    return frozenset(tuple(words[i:i + n]) for i in range(len(words) - n + 1)), n


class SystemPromptScrubber(StatefulProcessor[ScrubState]):
    """Redacts (`strategy="redact"`), reports (`"warn"`) or blocks (`"block"`)
    system-prompt leaks.

    `prompt`: the text to protect; by default the run's system messages (the agent's
    instructions included). `min_words`: the shortest run of prompt words that counts
    as a leak (a prompt shorter than that counts only whole). `redaction_method`:
    `placeholder` (`replacement`), `mask` (letters and digits starred) or `remove`.
    `custom_patterns`: regular expressions that count as leaks too.
    """

    def __init__(
        self,
        *,
        prompt: str | None = None,
        min_words: int = 8,
        strategy: ScrubStrategy = "redact",
        replacement: str = "[REDACTED:system-prompt]",
        redaction_method: RedactionMethod = "placeholder",
        custom_patterns: Iterable[str | re.Pattern[str]] = (),
        id: str = "system-prompt-scrubber",
    ) -> None:
        o = Options("SystemPromptScrubber")
        if prompt is not None and (not isinstance(prompt, str) or not prompt.strip()):
            raise o.fail("prompt", prompt, "None (the run's system messages) or a non-empty "
                         "string (an empty one protects nothing)")
        o.integer("min_words", min_words, min=2)
        o.choice("strategy", strategy, ScrubStrategy)
        o.text("replacement", replacement, empty=True)
        o.choice("redaction_method", redaction_method, RedactionMethod)
        if isinstance(custom_patterns, str | bytes | re.Pattern) or not isinstance(
            custom_patterns, Iterable
        ):
            raise o.fail("custom_patterns", custom_patterns,
                         "a list or tuple of regular expressions")
        patterns = [o.pattern("custom_patterns", p) for p in custom_patterns]
        o.id(id)
        self.id = id
        self.prompt = prompt
        self.min_words = min_words
        self.strategy: ScrubStrategy = strategy
        self.replacement = replacement
        self.redaction_method: RedactionMethod = redaction_method
        self.custom_patterns = tuple(patterns)

    def initial_state(self) -> ScrubState:
        return ScrubState()

    def _ready(self, state: ScrubState, system: tuple[str, ...]) -> ScrubState:
        if state.shingles is not None:
            return state
        prompt = self.prompt if self.prompt is not None else "\n".join(system)
        shingles, n = shingles_of(prompt, self.min_words)
        return msgspec.structs.replace(state, shingles=shingles, n=n, prompt_chars=len(prompt))

    def _redacted(self, leak: str) -> str:
        if self.redaction_method == "remove":
            return ""
        if self.redaction_method == "mask":
            return _WORD.sub(lambda m: "*" * len(m.group()), leak)
        return self.replacement

    def scan(
        self, state: ScrubState, text: str, final: bool, report: list[int] | None = None
    ) -> tuple[str, str]:
        """`holdback.Scanner`: release all but the last n words and any leak still
        growing; leaks released are redacted (or reported, or the run is blocked).
        The number of leaks released is added to `report`."""
        shingles, n = state.shingles or frozenset(), state.n
        if not shingles and not self.custom_patterns:
            return text, ""
        if not shingles:
            n = self.min_words
        words = [(m.start(), m.end(), m.group().casefold()) for m in _WORD.finditer(text)]
        spans: list[tuple[int, int]] = []
        if shingles:
            for i in range(len(words) - n + 1):
                if tuple(w[2] for w in words[i:i + n]) in shingles:
                    spans.append((words[i][0], words[i + n - 1][1]))
        for pattern in self.custom_patterns:
            spans.extend(m.span() for m in pattern.finditer(text) if m.end() > m.start())
        leaks: list[tuple[int, int]] = []
        for s, e in sorted(spans):
            if leaks and s <= leaks[-1][1]:
                leaks[-1] = (leaks[-1][0], max(e, leaks[-1][1]))
            else:
                leaks.append((s, e))
        if leaks and self.strategy == "block":
            abort("system prompt leak detected", metadata={"processor": self.id})
        if final:
            cut = len(text)
        else:
            # The last n words (the last one perhaps cut short) may start a leak not yet
            # seen whole: hold them.
            cut = words[-n][0] if len(words) >= n else 0
            for s, e in leaks:
                if e > cut:
                    cut = min(cut, s)
            if len(text) - cut > state.prompt_chars + 4096:
                abort("system prompt scrubber: held text over its cap; blocked to fail closed")
        out: list[str] = []
        at = 0
        for s, e in leaks:
            if e > cut:
                break
            if report is not None:
                report.append(1)
            if self.strategy == "warn":
                continue
            out += (text[at:s], self._redacted(text[s:e]))
            at = e
        out.append(text[at:cut])
        return "".join(out), text[cut:]

    def _report(self, report: list[int], where: str) -> tuple[DataChunk, ...]:
        if not report:
            return ()
        action = "warn" if self.strategy == "warn" else "redact"
        return (warning(self.id, action=action, where=where, leaks=len(report)),)

    def process_output_stream(self, args: StreamArgs[ScrubState]) -> StreamResult[ScrubState]:
        state = args.state
        if state.shingles is None:
            state = self._ready(state, tuple(s.content for s in args.message_list.system))
        report: list[int] = []
        chunks, held = hold_stream(
            args.part, state.held, lambda t, f: self.scan(state, t, f, report)
        )
        if chunks is None:
            return Continue() if state is args.state else Out(Continue(), state)
        return Out(Replace(chunks), msgspec.structs.replace(state, held=held),
                   self._report(report, "stream"))

    def flush_output_stream(self, args: FlushArgs[ScrubState]) -> FlushResult[ScrubState]:
        state = args.state
        if not state.held.text:
            return Continue()
        report: list[int] = []
        chunks = flush_held(state.held, lambda t, f: self.scan(state, t, f, report))
        return Out(Replace(chunks), msgspec.structs.replace(state, held=NOTHING_HELD),
                   self._report(report, "stream"))

    def process_output_result(
        self, args: OutputResultArgs[ScrubState]
    ) -> OutputResultResult[ScrubState]:
        state = self._ready(args.state, tuple(s.content for s in args.message_list.system))
        ids = frozenset(m.id for m in args.messages if m.role == "assistant")
        changed = False

        def one(m: Message) -> Message:
            nonlocal changed
            if m.id not in ids:
                return m
            parts = tuple(
                TextPart(self.scan(state, p.text, True)[0]) if isinstance(p, TextPart) else p
                for p in m.parts
            )
            if parts == m.parts:
                return m
            changed = True
            return m.with_parts(parts)

        ml = args.message_list.map_messages(one)
        return Out(Replace(ml), state) if changed else Out(Continue(), state)


__all__ = [
    "RedactionMethod", "ScrubState", "ScrubStrategy", "SystemPromptScrubber", "shingles_of",
]
