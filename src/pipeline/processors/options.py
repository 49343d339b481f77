"""Checking a processor's options when it is built, and the one error for a bad one.

A guard that misreads a setting lets text through, so every option of a built-in
processor is checked in its constructor: its type (a bool is not a number, a bare string
is not a list of strings), its allowed values (read off the option's `Literal` with
`typing.get_args`, so the type mypy checks and the run-time check cannot drift apart),
its range, and the keys of a mapping. Each constructor makes one `Options` and calls it
once per option.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from types import NoneType, UnionType
from typing import Literal, TypeVar, Union, cast, get_args, get_origin

__all__ = ["Options", "ProcessorConfigError", "literal_values"]

_MAX_REPR = 80
_T = TypeVar("_T")


class ProcessorConfigError(ValueError, TypeError):
    """An option a processor was built with is not one it understands.

    `processor` is the class, `option` the argument (`strategies['email']` for a value in
    a mapping), `value` the value given (its `repr`, shortened), `allowed` what the option
    takes. A `ValueError` for a bad value and a `TypeError` for a bad type, so code that
    caught either before still does."""

    def __init__(
        self, processor: str, option: str, value: str, allowed: str, *, key: bool = False
    ) -> None:
        given = f"{option} has the key {value}, which" if key else f"{option}={value}"
        super().__init__(f"{processor}: {given} is not allowed; expected {allowed}")
        self.processor = processor
        self.option = option
        self.value = value
        self.allowed = allowed


def _show(value: object) -> str:
    r = repr(value)
    return r if len(r) <= _MAX_REPR else r[: _MAX_REPR - 3] + "..."


def literal_values(tp: object) -> tuple[object, ...]:
    """The values a `Literal` (or a union of them, `None` included) allows, in order."""
    if get_origin(tp) is Literal:
        return get_args(tp)
    if tp is None or tp is NoneType:
        return (None,)
    if get_origin(tp) in (Union, UnionType):
        return tuple(v for arg in get_args(tp) for v in literal_values(arg))
    raise TypeError(f"not a Literal: {tp!r}")


def _one_of(values: Iterable[object]) -> str:
    return "one of " + ", ".join(repr(v) for v in values)


class Options:
    """The checks of one processor's options; each raises `ProcessorConfigError` naming
    the processor, the option, the value and what is allowed."""

    def __init__(self, processor: str) -> None:
        self.processor = processor

    def fail(
        self, option: str, value: object, allowed: str, *, key: bool = False
    ) -> ProcessorConfigError:
        return ProcessorConfigError(self.processor, option, _show(value), allowed, key=key)

    def choice(self, option: str, value: object, literal: object) -> None:
        """`value` is one of the `Literal`'s values (a `str` `Literal`: compared as str,
        so 1 never passes for True)."""
        allowed = literal_values(literal)
        if not any(type(value) is type(a) and value == a for a in allowed):
            raise self.fail(option, value, _one_of(allowed))

    def flag(self, option: str, value: object) -> None:
        if type(value) is not bool:
            raise self.fail(option, value, "True or False")

    def concurrent(self, value: object, *, judged: bool, rewrites: str | None) -> None:
        """`concurrent` (an input check that races the model, `pipeline.loop.race`): a
        bool, and True only with a judge to race (`judged`) and a setting that can only
        pass or abort (`rewrites`: the setting that would change the input, if one)."""
        self.flag("concurrent", value)
        if value and not judged:
            raise self.fail("concurrent", value, "False without a judge_model (nothing to race)")
        if value and rewrites is not None:
            raise self.fail("concurrent", value, f"False with {rewrites} (a guard that races "
                            "the model can only pass or abort, not change what it has)")

    def integer(self, option: str, value: object, *, min: int, max: int | None = None) -> int:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= min and (
            max is None or value <= max)
        if not ok:
            raise self.fail(option, value, f"an int >= {min}" if max is None
                            else f"an int from {min} to {max}")
        assert isinstance(value, int)
        return value

    def optional_integer(self, option: str, value: object, *, min: int) -> None:
        if value is not None and not (
            isinstance(value, int) and not isinstance(value, bool) and value >= min
        ):
            raise self.fail(option, value, f"None or an int >= {min}")

    def unit(self, option: str, value: object) -> float:
        """A score or threshold: a number in [0, 1]."""
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
            0.0 <= value <= 1.0
        ):
            raise self.fail(option, value, "a number from 0 to 1")
        return float(value)

    def positive(self, option: str, value: object) -> float:
        """A finite number above 0."""
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
            0.0 < value < math.inf
        ):
            raise self.fail(option, value, "a finite number above 0")
        return float(value)

    def text(self, option: str, value: object, *, empty: bool = False) -> None:
        if not isinstance(value, str) or (not empty and not value):
            raise self.fail(option, value, "a string" if empty else "a non-empty string")

    def optional_text(self, option: str, value: object) -> None:
        if value is not None and (not isinstance(value, str) or not value):
            raise self.fail(option, value, "None or a non-empty string")

    def id(self, value: object) -> None:
        self.text("id", value)

    def function(self, option: str, value: object, what: str) -> None:
        if not callable(value):
            raise self.fail(option, value, what)

    def strings(
        self,
        option: str,
        value: object,
        *,
        allowed: Collection[str] | None = None,
        check: Callable[[str], object] | None = None,
        describe: str = "",
        empty: bool = True,
    ) -> tuple[str, ...]:
        """An iterable of strings (never a bare string, which would iterate its letters),
        each in `allowed` (or passing `check`, described by `describe`); non-empty
        unless `empty`."""
        what = describe or (_one_of(allowed) if allowed is not None else "strings")
        if isinstance(value, str | bytes) or not isinstance(value, Iterable):
            raise self.fail(option, value, f"a list or tuple of {what}" if allowed is None
                            else f"a list or tuple, each {what}")
        items = tuple(value)
        for i, item in enumerate(items):
            bad = not isinstance(item, str) or (allowed is not None and item not in allowed) \
                or (check is not None and not check(item))
            if bad:
                raise self.fail(f"{option}[{i}]", item, what if allowed is not None or describe
                                else "a string")
        if not empty and not items:
            raise self.fail(option, value, f"at least one of {what}")
        return items

    def choices(self, option: str, value: Iterable[_T], literal: object,
                *, empty: bool = True) -> tuple[_T, ...]:
        """An iterable of the `Literal`'s string values (given as `Iterable[literal]`)."""
        allowed = tuple(str(v) for v in literal_values(literal))
        return cast("tuple[_T, ...]", self.strings(option, value, allowed=allowed, empty=empty))

    def mapping(
        self, option: str, value: object, *, keys: Collection[str], values: object
    ) -> dict[str, str]:
        """A mapping whose keys are among `keys` and whose values are the `Literal`
        `values`' (the value's option named `option['key']`)."""
        if not isinstance(value, Mapping):
            raise self.fail(option, value, "a dict")
        for k, v in value.items():
            if not isinstance(k, str) or k not in keys:
                raise self.fail(option, k, "keys " + _one_of(sorted(keys)) if keys
                                else "no keys (nothing is looked for)", key=True)
            self.choice(f"{option}[{k!r}]", v, values)
        return dict(value)

    def pattern(self, option: str, value: object) -> re.Pattern[str]:
        """A regular expression, given as a string or compiled."""
        if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
            return value
        if isinstance(value, str):
            try:
                return re.compile(value)
            except re.error as e:
                raise self.fail(option, value, f"a regular expression ({e})") from e
        raise self.fail(option, value, "a regular expression (a str or re.Pattern[str])")
