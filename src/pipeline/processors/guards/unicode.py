"""UnicodeNormalizer: one canonical spelling for the text a model receives.

NFKC (full-width, ligatures, math letters and other compatibility forms become plain
ones), control and invisible format characters stripped (zero-width spaces, bidi
overrides: the "Trojan source" tricks), whitespace collapsed, optionally confusable
homoglyphs folded (a Cyrillic "a", U+0430, in "paypal" becomes a Latin one; needs the
`guards` extra). `normalize_text` is idempotent: normalizing twice changes nothing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Literal

import msgspec

import pipeline.processor as pr
from effects import Continue, Out, Replace
from pipeline.processor import StatefulProcessor, StepChange
from pipeline.processors.guards.common import require_extra
from pipeline.processors.options import Options
from pipeline.values.messages import Message, MessageList, Part, Role, TextPart, ToolResultPart

__all__ = ["FoldHomoglyphs", "NormalForm", "UnicodeNormalizer", "normalize_text"]

NormalForm = Literal["NFKC", "NFC"]
"""The Unicode normal form (None: none)."""

FoldHomoglyphs = Literal["off", "mixed", "all"]
"""Homoglyph folding: off; only in words that mix scripts (the homograph attack: a
Latin word with a Cyrillic letter in it), leaving words of one script alone; or every
character that has an ASCII lookalike (turns Greek and Cyrillic words into Latin)."""

_KEEP_CONTROLS = frozenset("\t\n")
_ZWJ = "\u200d"
_WORD = re.compile(r"\w+")
_MAX_PASSES = 4


def _is_emoji(ch: str) -> bool:
    return unicodedata.category(ch) == "So" or 0x1F000 <= ord(ch) <= 0x1FAFF


def _strip_controls(text: str, preserve_emojis: bool) -> str:
    out: list[str] = []
    for i, ch in enumerate(text):
        cat = unicodedata.category(ch)
        if cat == "Cc":
            if ch in _KEEP_CONTROLS:
                out.append(ch)
            elif ch == "\r" and not text.startswith("\n", i + 1):
                out.append("\n")  # a line break, not a character to drop: CRLF becomes LF
            continue
        if cat == "Cf":
            # a zero-width joiner between emoji builds one emoji (family, flags): keep it
            if (
                ch == _ZWJ
                and preserve_emojis
                and out
                and _is_emoji(out[-1])
                and i + 1 < len(text)
                and _is_emoji(text[i + 1])
            ):
                out.append(ch)
            continue
        if cat in ("Zl", "Zp"):
            out.append("\n")
            continue
        out.append(ch)
    return "".join(out)


_SPACE_RUN = re.compile(r"[^\S\n]+")
_BREAK_RUN = re.compile(r" ?\n[\n ]*")


def _collapse(text: str) -> str:
    text = _SPACE_RUN.sub(" ", text)
    # one line break stays one; two or more (a paragraph break) become exactly two
    return _BREAK_RUN.sub(lambda m: "\n\n" if m.group().count("\n") > 1 else "\n", text)


@cache
def _ascii_lookalikes() -> Mapping[str, str]:
    """Every single character with an ASCII letter or digit lookalike, mapped to it."""
    confusables = require_extra("confusable_homoglyphs.confusables", "homoglyph folding")
    data: dict[str, list[dict[str, str]]] = confusables.confusables_data
    table: dict[str, str] = {}
    for ch, glyphs in data.items():
        if len(ch) != 1 or ch.isascii():
            continue
        for g in glyphs:
            c = g.get("c", "")
            if len(c) == 1 and c.isascii() and c.isalnum():
                table[ch] = c
                break
    return table


def _script(ch: str) -> str:
    """A coarse script name from the character's Unicode name (LATIN, CYRILLIC...)."""
    if ch.isascii():
        return "LATIN" if ch.isalpha() else ""
    name = unicodedata.name(ch, "")
    return name.split(" ", 1)[0] if ch.isalpha() and name else ""


def _fold(text: str, mode: FoldHomoglyphs) -> str:
    table = _ascii_lookalikes()
    if mode == "all":
        return "".join(table.get(ch, ch) for ch in text)

    def fold_word(m: re.Match[str]) -> str:
        word = m.group()
        scripts = {s for s in map(_script, word) if s}
        if len(scripts) < 2 or "LATIN" not in scripts:
            return word
        return "".join(ch if _script(ch) == "LATIN" else table.get(ch, ch) for ch in word)

    return _WORD.sub(fold_word, text)


def _once(
    text: str,
    form: Literal["NFKC", "NFC"] | None,
    strip_control: bool,
    preserve_emojis: bool,
    collapse: bool,
    trim: bool,
    fold: FoldHomoglyphs,
) -> str:
    if strip_control:
        text = _strip_controls(text, preserve_emojis)
    if form is not None:
        text = unicodedata.normalize(form, text)
    if fold != "off":
        text = _fold(text, fold)
        if form is not None:
            text = unicodedata.normalize(form, text)
    if collapse:
        text = _collapse(text)
    if trim:
        text = text.strip()
    return text


def normalize_text(
    text: str,
    *,
    form: Literal["NFKC", "NFC"] | None = "NFKC",
    strip_control: bool = True,
    preserve_emojis: bool = True,
    collapse_whitespace: bool = True,
    trim: bool = True,
    fold_homoglyphs: FoldHomoglyphs = "off",
) -> str:
    """`text` normalized; idempotent.

    The steps can feed each other (stripping a control character can bring a letter and
    its combining mark together, which NFKC then composes), so they repeat until nothing
    changes, a few passes at most.
    """
    for _ in range(_MAX_PASSES):
        new = _once(
            text, form, strip_control, preserve_emojis, collapse_whitespace, trim, fold_homoglyphs
        )
        if new == text:
            return new
        text = new
    return text


Checked = frozenset[str]
"""A normalizer's state in a run: the calls whose results `process_tool_result`
normalized (not normalized again before a model call)."""


class UnicodeNormalizer(StatefulProcessor[Checked]):
    """An input processor: normalizes the text of the run's messages (see the module).

    `roles`: whose messages are normalized (default the user's; add "assistant" for a
    continued conversation, "tool" for string tool results from the web or files, which
    is where indirect injections hide). With "tool", each string result of a tool the
    run ran is normalized in `process_tool_result`, before the model, the stream or the
    messages see it; the input's in `process_input`. `every_step=True` also normalizes,
    before every model call, the messages of those roles the run added that no hook
    normalized yet (the model's answers).
    """

    def __init__(
        self,
        *,
        form: NormalForm | None = "NFKC",
        strip_control: bool = True,
        preserve_emojis: bool = True,
        collapse_whitespace: bool = True,
        trim: bool = True,
        fold_homoglyphs: FoldHomoglyphs = "off",
        roles: Iterable[Role] = ("user",),
        every_step: bool = False,
        id: str = "unicode-normalizer",
    ) -> None:
        o = Options("UnicodeNormalizer")
        o.choice("form", form, NormalForm | None)
        for name, value in (("strip_control", strip_control),
                            ("preserve_emojis", preserve_emojis),
                            ("collapse_whitespace", collapse_whitespace), ("trim", trim),
                            ("every_step", every_step)):
            o.flag(name, value)
        o.choice("fold_homoglyphs", fold_homoglyphs, FoldHomoglyphs)
        roles = o.choices("roles", roles, Role, empty=False)
        o.id(id)
        self.id = id
        self.roles = frozenset(roles)
        self.every_step = every_step
        self.fold_homoglyphs: FoldHomoglyphs = fold_homoglyphs
        if fold_homoglyphs != "off":
            _ascii_lookalikes()  # fail now, naming the extra, not in the middle of a run
        self._normalize: Callable[[str], str] = lambda t: normalize_text(
            t,
            form=form,
            strip_control=strip_control,
            preserve_emojis=preserve_emojis,
            collapse_whitespace=collapse_whitespace,
            trim=trim,
            fold_homoglyphs=fold_homoglyphs,
        )

    def normalize(self, text: str) -> str:
        """`text` as this processor normalizes it."""
        return self._normalize(text)

    def initial_state(self) -> Checked:
        return frozenset()

    def hook_functions(self) -> Mapping[pr.HookName, Callable[..., object]]:
        hooks = dict(super().hook_functions())
        if "tool" in self.roles:
            hooks["process_tool_result"] = self._tool_result
        return hooks

    def _message(self, m: Message, checked: Checked) -> Message:
        if m.role not in self.roles:
            return m
        changed = False
        parts: list[Part] = []
        for p in m.parts:
            if isinstance(p, TextPart):
                t = self._normalize(p.text)
                if t != p.text:
                    p, changed = TextPart(t), True
            elif (isinstance(p, ToolResultPart) and isinstance(p.result, str)
                  and p.tool_call_id not in checked):
                t = self._normalize(p.result)
                if t != p.result:
                    p, changed = msgspec.structs.replace(p, result=t), True
            parts.append(p)
        return m.with_parts(parts) if changed else m

    def _list(self, ml: MessageList, checked: Checked) -> MessageList | None:
        new = tuple(self._message(m, checked) for m in ml.messages)
        if all(a is b for a, b in zip(new, ml.messages, strict=True)):
            return None
        return MessageList(new, ml.sources, ml.system)

    def process_input(self, args: pr.InputArgs[Checked]) -> pr.InputResult[Checked]:
        ml = self._list(args.message_list, args.state)
        return Continue() if ml is None else Replace(ml)

    def process_input_step(self, args: pr.InputStepArgs[Checked]) -> pr.InputStepResult[Checked]:
        if not self.every_step:
            return Continue()
        ml = self._list(args.message_list, args.state)
        return Continue() if ml is None else Replace(StepChange(message_list=ml))

    def _tool_result(self, args: pr.ToolResultArgs[Checked]) -> pr.ToolResultResult[Checked]:
        """A string result of a tool the run ran, normalized before anyone reads it."""
        checked = args.state | {args.call.tool_call_id}
        r = args.result
        if isinstance(r, str) and (t := self._normalize(r)) != r:
            return Out(Replace(t), checked)
        return Out(Continue(), checked)
