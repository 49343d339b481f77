"""Every option of every built-in processor is checked when it is built.

For each built-in (the processors `pipeline.processors` exports and the counters and
backend they take) and each argument of its constructor, hypothesis draws a value outside
what the option allows (a misspelt choice, a bool for a number, a bare string for a
list, a number out of range, an unknown key, a bad regular expression): building the
processor with it raises `ProcessorConfigError` naming that processor and that option.
A value it allows builds it. A table lists the options of each built-in; a test checks it
covers every argument of every constructor, so an option added without a check fails."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import get_args

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipeline.processors as processors
from pipeline.processors import (
    ApprovalReviewer,
    ApproxTokenCounter,
    BatchPartsProcessor,
    Budget,
    EncodingCounter,
    LanguageDetector,
    MessageHistory,
    ModerationProcessor,
    PIIDetector,
    ProcessorConfigError,
    PromptInjectionDetector,
    Py3LangidBackend,
    SemanticRecall,
    Summarization,
    SystemPromptScrubber,
    TokenLimiterProcessor,
    ToolCallFilter,
    UnicodeNormalizer,
    WorkingMemory,
)
from pipeline.processors.budget import OnLimit
from pipeline.processors.guards import pii_detectors as d
from pipeline.processors.guards.injection import InjectionStrategy, JudgeMode
from pipeline.processors.guards.language import LanguageStrategy, Undecided
from pipeline.processors.guards.moderation import ModerationStrategy, OutputCheck
from pipeline.processors.guards.pii import Kind, OnError, Strategy
from pipeline.processors.guards.scrubber import RedactionMethod, ScrubStrategy
from pipeline.processors.guards.unicode import FoldHomoglyphs, NormalForm
from pipeline.processors.memory.processors import OnRecallError, RecallScope
from pipeline.processors.options import literal_values
from pipeline.processors.token_limiter import CountMode, OutputStrategy
from pipeline.values.messages import Role

Values = st.SearchStrategy[object]


class _Profile(msgspec.Struct):
    name: str = ""


class English:
    def detect(self, text: str) -> tuple[str, float]:
        return "en", 1.0


# --- values allowed and not, by the kind of option --------------------------------------

def _not(*types: type) -> Values:
    """Values of other types than `types` (bool counts as its own type)."""
    every: list[Values] = [
        st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=8),
        st.none(), st.binary(max_size=4), st.tuples(st.integers()),
    ]
    kinds = (bool, int, float, str, type(None), bytes, tuple)
    return st.one_of([s for s, k in zip(every, kinds, strict=True) if k not in types])


def flag() -> tuple[Values, Values]:
    return st.booleans(), _not(bool)


RACING_WITHOUT_A_JUDGE = (st.just(False), st.one_of(st.just(True), _not(bool)))
"""`concurrent` where the base settings have no judge: True is refused (nothing to race)."""


def choice(literal: object, *, valid: tuple[object, ...] | None = None) -> tuple[Values, Values]:
    allowed = literal_values(literal)
    strs = tuple(a for a in allowed if isinstance(a, str))
    bad_text = st.one_of(
        st.text(max_size=12), st.sampled_from(strs).map(str.upper),
        st.sampled_from(strs).map(lambda s: s + "s"),
    ).filter(lambda s: s not in allowed)
    other = _not(str) if None not in allowed else _not(str, type(None))
    return st.sampled_from(valid if valid is not None else allowed), st.one_of(bad_text, other)


def integer(lo: int, hi: int | None = None) -> tuple[Values, Values]:
    top = hi if hi is not None else lo + 10_000
    bad = [st.integers(max_value=lo - 1), _not(int), st.integers(lo, top).map(float)]
    if hi is not None:
        bad.append(st.integers(min_value=hi + 1))
    return st.integers(lo, top), st.one_of(bad)


def optional_integer(lo: int) -> tuple[Values, Values]:
    good, bad = integer(lo)
    return st.one_of(st.none(), good), bad.filter(lambda v: v is not None)


def unit() -> tuple[Values, Values]:
    bad = st.one_of(
        st.floats(allow_nan=True).filter(lambda x: not 0.0 <= x <= 1.0),
        st.integers().filter(lambda x: x not in (0, 1)), _not(int, float),
    )
    return st.floats(0.0, 1.0), bad


def text(*, empty: bool = False) -> tuple[Values, Values]:
    good = st.text(min_size=0 if empty else 1, max_size=12)
    bad = _not(str) if empty else st.one_of(st.just(""), _not(str))
    return good, bad


def optional_text() -> tuple[Values, Values]:
    return st.one_of(st.none(), st.text(min_size=1, max_size=12)), st.one_of(
        st.just(""), _not(str, type(None))
    )


def strings(good_item: Values, bad_item: Values, *, empty: bool = True) -> tuple[Values, Values]:
    """A list of strings: good ones; or a bare string, a non-iterable, or a list with one
    bad item among good ones (or, when not `empty`, an empty list)."""
    good = st.lists(good_item, min_size=0 if empty else 1, max_size=4)
    with_bad = st.tuples(st.lists(good_item, max_size=3), bad_item, st.integers(0, 3)).map(
        lambda t: [*t[0][: t[2]], t[1], *t[0][t[2]:]]
    )
    bad = [st.text(min_size=1, max_size=8), with_bad, st.integers(), st.booleans()]
    if not empty:
        bad.append(st.just([]))
    return good, st.one_of(bad)


def choices(literal: object, *, empty: bool = True) -> tuple[Values, Values]:
    allowed = tuple(str(v) for v in literal_values(literal))
    bad_item = st.one_of(st.text(max_size=8).filter(lambda s: s not in allowed), _not(str))
    return strings(st.sampled_from(allowed), bad_item, empty=empty)


def names() -> tuple[Values, Values]:
    return strings(st.text(min_size=1, max_size=8), st.one_of(st.just(""), _not(str)),
                   empty=False)


def objects(good: Values, bad: Values) -> tuple[Values, Values]:
    return good, bad


_names = strings(st.text(max_size=8), _not(str))
TOOL_NAMES = (st.one_of(st.none(), _names[0]), _names[1])
REGEXES = (r"ORD-\d+", r"[A-Z]{3}\d{4}", r"(?i)my (system )?instructions")
BAD_REGEXES = st.sampled_from(("(", "[a-", "*x", "a{2,1}"))
KINDS = tuple(str(k) for k in get_args(Kind))
ROLES = choices(Role, empty=False)


def pii_strategies() -> tuple[Values, Values]:
    good = st.one_of(st.none(), st.dictionaries(st.sampled_from(d.BUILTIN_KINDS),
                                                st.sampled_from(get_args(Strategy))))
    bad = st.one_of(
        st.dictionaries(st.text(max_size=8).filter(lambda k: k not in d.BUILTIN_KINDS),
                        st.sampled_from(get_args(Strategy)), min_size=1),
        st.dictionaries(st.sampled_from(d.BUILTIN_KINDS), choice(Strategy)[1], min_size=1),
        st.dictionaries(st.sampled_from(d.OPTIONAL_KINDS),  # not looked for by default
                        st.sampled_from(get_args(Strategy)), min_size=1),
        _not(type(None)),
    )
    return good, bad


def pii_custom() -> tuple[Values, Values]:
    good = st.one_of(st.none(), st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.one_of(st.sampled_from(REGEXES), st.just(lambda text: [(0, 1)])),
    ))
    bad = st.one_of(
        st.dictionaries(st.text(min_size=1, max_size=8), BAD_REGEXES, min_size=1),
        st.dictionaries(st.text(min_size=1, max_size=8), st.integers(), min_size=1),
        st.dictionaries(st.just(""), st.sampled_from(REGEXES), min_size=1),
        _not(type(None)),
    )
    return good, bad


# --- the table: every built-in, every option --------------------------------------------

Table = dict[str, tuple[Values, Values]]

OPTIONS: dict[Callable[..., object], tuple[dict[str, object], Table]] = {
    PIIDetector: ({}, {
        "concurrent": RACING_WITHOUT_A_JUDGE,
        "id": text(),
        "types": choices(Kind),
        "strategy": choice(Strategy),
        "strategies": pii_strategies(),
        "custom": pii_custom(),
        "phone_regions": strings(st.sampled_from(("US", "GB", "DE", "FR")),
                                 st.sampled_from(("us", "USA", "XX", "", "U"))),
        "national_ids": strings(st.sampled_from(sorted(d.NATIONAL_IDS)),
                                st.sampled_from(("us-ssn", "xx.id", "", "ssn"))),
        "window": (st.integers(1, 2048), integer(1)[1]),  # max_hold (4096) >= 2 * window
        "max_hold": integer(128),
        "salt": text(empty=True),
        "on_input": flag(), "on_stream": flag(), "on_result": flag(),
        "on_error": choice(OnError),
        "regex_only": flag(),
        "judge_model": optional_text(),
        "judge_stream": (st.just(False), st.one_of(st.just(True), _not(bool))),  # no judge
        "judge_instructions": text(),
        "scan_tools": flag(),
    }),
    ApprovalReviewer: ({"judge_model": "judge"}, {
        "judge_model": text(),
        "risk_below": unit(),
        "tools": (st.one_of(st.none(), names()[0]), names()[1].filter(lambda v: v != [])),
        "instructions": optional_text(),
        "max_tokens": optional_integer(1),
        "id": text(),
    }),
    ModerationProcessor: ({"judge_model": "judge"}, {
        "judge_model": text(),
        "categories": names(),
        "threshold": unit(),
        "strategy": choice(ModerationStrategy),
        "output_check": choice(OutputCheck),
        "roles": ROLES,
        "last_message_only": flag(),
        "fail_open": flag(),
        "instructions": optional_text(),
        "moderate_stream": flag(),
        "stream_window": integer(1),
        "context_window": integer(0),
        "max_in_flight": integer(1, 64),
        "concurrent": flag(),
        "id": text(),
    }),
    PromptInjectionDetector: ({}, {
        "concurrent": RACING_WITHOUT_A_JUDGE,
        "strategy": choice(InjectionStrategy),
        "threshold": unit(),
        "classifier_threshold": (st.one_of(st.none(), unit()[0]),
                                 unit()[1].filter(lambda v: v is not None)),
        "judge_model": optional_text(),
        "judge": choice(JudgeMode),
        "judge_floor": unit(),
        "categories": names(),
        "roles": ROLES,
        "last_message_only": flag(),
        "check_tool_results": flag(),
        "fail_open": flag(),
        "instructions": optional_text(),
        "id": text(),
    }),
    LanguageDetector: ({"backend": English()}, {
        "target_languages": strings(
            st.sampled_from(("en", "fr", "English", "pt-BR", "german", "zh-hant")),
            st.one_of(st.sampled_from(("englsh", "", "e", "en_US", "1")), _not(str)),
            empty=False),
        "strategy": choice(LanguageStrategy, valid=("detect", "warn", "block")),  # no judge
        "threshold": unit(),
        "min_text_length": integer(0),
        "judge_model": optional_text(),
        "backend": objects(st.one_of(st.none(), st.just(English())),
                           _not(type(None))),
        "roles": ROLES,
        "last_message_only": flag(),
        "fail_open": flag(),
        "undecided": (st.sampled_from((None, *literal_values(Undecided))),
                      choice(Undecided)[1].filter(lambda v: v is not None)),
        "id": text(),
    }),
    TokenLimiterProcessor: ({"limit": 100}, {
        "limit": integer(1),
        "strategy": choice(OutputStrategy),
        "count_mode": choice(CountMode),
        "counter": objects(st.one_of(st.none(), st.just(ApproxTokenCounter())),
                           _not(type(None))),
        "every_step": flag(),
        "count_system_messages": flag(),
        "start_with_user": flag(),
        "count_reasoning": flag(),
        "message_overhead": integer(0),
        "id": text(),
    }),
    ToolCallFilter: ({}, {
        "exclude": TOOL_NAMES,
        "keep": TOOL_NAMES,
        "every_step": flag(),
        "id": text(),
    }),
    UnicodeNormalizer: ({}, {
        "form": choice(NormalForm | None),
        "strip_control": flag(),
        "preserve_emojis": flag(),
        "collapse_whitespace": flag(),
        "trim": flag(),
        "fold_homoglyphs": choice(FoldHomoglyphs),
        "roles": ROLES,
        "every_step": flag(),
        "id": text(),
    }),
    SystemPromptScrubber: ({}, {
        "prompt": (st.one_of(st.none(), st.text(min_size=1).filter(str.strip)),
                   st.one_of(st.sampled_from(("", "  ", "\n")), _not(str, type(None)))),
        "min_words": integer(2),
        "strategy": choice(ScrubStrategy),
        "replacement": text(empty=True),
        "redaction_method": choice(RedactionMethod),
        "custom_patterns": strings(st.sampled_from(REGEXES),
                                   st.one_of(BAD_REGEXES, _not(str))),
        "id": text(),
    }),
    MessageHistory: ({}, {
        "last_messages": integer(0),
        "id": text(),
    }),
    SemanticRecall: ({}, {
        "top_k": integer(1, 100),
        "message_range": integer(0, 50),
        "scope": choice(RecallScope),
        "on_recall_error": choice(OnRecallError),
        "id": text(),
    }),
    WorkingMemory: ({}, {
        "scope": choice(RecallScope),
        "template": text(empty=True),
        "schema": objects(st.one_of(st.none(), st.just(_Profile)),
                          st.one_of(st.sampled_from((dict, str, 1, "Profile")))),
        "tool_name": (st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,20}", fullmatch=True),
                      st.one_of(st.sampled_from(("", "has space", "1st", "a.b", "x" * 65)),
                                _not(str))),
        "id": text(),
    }),
    Summarization: ({"max_tokens": 100, "judge_model": "judge"}, {
        "max_tokens": integer(1),
        "keep_tokens": (  # at most the base's max_tokens
            st.one_of(st.none(), st.integers(0, 100)),
            st.one_of(st.integers(max_value=-1), st.integers(101), _not(int, type(None))),
        ),
        "judge_model": text(),
        "counter": objects(st.one_of(st.none(), st.just(ApproxTokenCounter())),
                           _not(type(None))),
        "instructions": text(),
        "id": text(),
    }),
    Budget: ({"max_tool_calls": 5, "max_tokens": 1000}, {
        "max_tool_calls": optional_integer(0),
        "max_calls_per_tool": (
            st.one_of(st.none(), st.dictionaries(st.text(min_size=1, max_size=8),
                                                 st.integers(0, 100), max_size=3)),
            st.one_of(
                st.dictionaries(st.text(min_size=1, max_size=8), st.integers(max_value=-1),
                                min_size=1, max_size=2),
                st.dictionaries(st.just(""), st.integers(0, 3), min_size=1),
                st.dictionaries(st.text(min_size=1, max_size=8), _not(int), min_size=1,
                                max_size=2),
                st.lists(st.text(max_size=4), max_size=2), st.text(max_size=4), st.integers(),
            ),
        ),
        "max_model_calls": optional_integer(1),
        "max_tokens": optional_integer(1),
        "max_cost": (
            st.one_of(st.none(), st.floats(0.001, 1e6), st.integers(1, 1000)),
            st.one_of(st.floats(max_value=0.0), st.just(float("nan")), st.integers(max_value=0),
                      st.booleans(), st.text(max_size=4)),
        ),
        "on_limit": choice(OnLimit),
        "id": text(),
    }),
    BatchPartsProcessor: ({}, {
        "max_parts": integer(1),
        "max_chars": optional_integer(1),
        "id": text(),
    }),
    ApproxTokenCounter: ({}, {
        "bytes_per_token": (
            st.one_of(st.floats(0.01, 1e6), st.integers(1, 10**6)),
            st.one_of(st.floats(max_value=0.0), st.just(float("inf")), st.just(float("nan")),
                      st.integers(max_value=0), _not(int, float)),
        ),
    }),
    EncodingCounter: ({}, {
        "encode": objects(st.sampled_from((list, str.split)), _not()),
    }),
    Py3LangidBackend: ({}, {
        "languages": (
            # a few sets: each new one loads the language model again
            st.one_of(st.none(), st.sampled_from((["en"], ("en", "fr"), ["de", "fr", "en"]))),
            strings(st.sampled_from(("en", "fr", "de")),
                    st.one_of(st.sampled_from(("English", "", "EN", "e")), _not(str)),
                    empty=False)[1],
        ),
    }),
}

CASES = [
    pytest.param(cls, option, id=f"{getattr(cls, '__name__', cls)}.{option}")
    for cls, (_, table) in OPTIONS.items()
    for option in table
]


def test_the_table_covers_every_built_in_and_every_option() -> None:
    exported = {
        getattr(processors, name) for name in processors.__all__
        if inspect.isclass(getattr(processors, name))
        and hasattr(getattr(processors, name), "hook_functions")
    }
    assert exported <= set(OPTIONS), exported - set(OPTIONS)
    for cls, (_, table) in OPTIONS.items():
        params = set(inspect.signature(cls).parameters)
        assert params == set(table), (cls, params ^ set(table))


@pytest.mark.parametrize(("cls", "option"), CASES)
@settings(max_examples=40)
@given(data=st.data())
def test_a_value_outside_an_option_raises_at_construction(
    cls: Callable[..., object], option: str, data: st.DataObject
) -> None:
    base, table = OPTIONS[cls]
    _, bad = table[option]
    value = data.draw(bad, label=option)
    with pytest.raises(ProcessorConfigError) as err:
        cls(**{**base, option: value})
    e = err.value
    assert e.processor == getattr(cls, "__name__", "")
    assert e.option == option or e.option.startswith(f"{option}["), (e.option, option)
    assert e.allowed and option in str(e)


@pytest.mark.parametrize(("cls", "option"), CASES)
@settings(max_examples=40)
@given(data=st.data())
def test_a_value_an_option_allows_builds_the_processor(
    cls: Callable[..., object], option: str, data: st.DataObject
) -> None:
    base, table = OPTIONS[cls]
    good, _ = table[option]
    cls(**{**base, option: data.draw(good, label=option)})
