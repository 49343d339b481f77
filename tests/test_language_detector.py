"""LanguageDetector: offline detection (py3langid), each strategy, translation through the
judge, and the fail-closed paths."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from interpreters.testing import Fail, Say, ScriptedModel, Simulator
from pipeline import Agent, DataChunk, Message, MessageList, RunResult, TextPart
from pipeline.processors import LanguageDetector, Py3LangidBackend
from pipeline.processors.guards import language as ld
from pipeline.processors.guards.common import GuardsExtraMissing
from pipeline.processors.guards.language import LanguageStrategy

GERMAN = "Wie wird das Wetter morgen in Berlin sein?"
ENGLISH = "What will the weather be like in Berlin tomorrow?"
FRENCH = "Quel temps fera-t-il demain à Berlin ?"


def run_with(
    det: LanguageDetector, prompt: str | MessageList, judge: list[Say | Fail] | None = None
) -> tuple[ScriptedModel, ScriptedModel, RunResult, list[DataChunk]]:
    model = ScriptedModel([Say("ok")])
    judge_model = ScriptedModel(judge or [])
    run = Simulator(model, models={"judge": judge_model}).run(
        Agent.create("m", input_processors=[det]), prompt
    )
    return model, judge_model, run.result, [c for c in run.chunks if isinstance(c, DataChunk)]


def test_the_offline_backend_tells_languages_apart() -> None:
    backend = Py3LangidBackend()
    assert backend.detect(GERMAN)[0] == "de"
    assert backend.detect(ENGLISH)[0] == "en"
    assert backend.detect(FRENCH)[0] == "fr"
    _, p = backend.detect(ENGLISH)
    assert 0.9 < p <= 1.0


def test_limiting_the_candidates_is_honoured() -> None:
    assert Py3LangidBackend(["en", "fr"]).detect(GERMAN)[0] in ("en", "fr")


def test_detect_records_the_language_in_the_metadata() -> None:
    model, _, result, notes = run_with(LanguageDetector(["en"]), GERMAN)
    sent = model.requests[0].messages[0]
    assert sent.text == GERMAN
    assert sent.metadata is not None and sent.metadata["language"] == "de"
    assert result.status == "finished" and notes == []


def test_target_language_passes_with_its_metadata() -> None:
    model, _, result, _ = run_with(LanguageDetector(["English"], strategy="block"), ENGLISH)
    assert result.status == "finished"
    assert model.requests[0].messages[0].metadata == {
        "language": "en", "language_confidence": pytest.approx(1.0, abs=0.1),
    }


def test_block_stops_other_languages() -> None:
    model, _, result, _ = run_with(LanguageDetector(["en", "fr"], strategy="block"), GERMAN)
    assert result.status == "tripped" and model.requests == []
    assert result.tripwire is not None and "'de'" in result.tripwire.reason


def test_warn_emits_and_goes_on() -> None:
    model, _, result, notes = run_with(LanguageDetector(["en"], strategy="warn"), GERMAN)
    assert result.status == "finished" and len(model.requests) == 1
    assert isinstance(notes[0].data, dict) and notes[0].data["language"] == "de"


def test_translate_goes_through_the_judge_and_keeps_the_original() -> None:
    det = LanguageDetector(["en"], strategy="translate", judge_model="judge")
    model, judge, result, notes = run_with(det, GERMAN, [Say(ENGLISH)])
    assert "English (en)" in judge.requests[0].system[0].content
    sent = model.requests[0].messages[0]
    assert sent.text == ENGLISH
    assert sent.metadata is not None and sent.metadata["original_text"] == GERMAN
    assert result.messages.messages[0].text == ENGLISH
    assert isinstance(notes[0].data, dict) and notes[0].data["action"] == "translate"


def test_short_or_unsure_texts_are_left_alone() -> None:
    det = LanguageDetector(["en"], strategy="block")
    assert run_with(det, "Danke!")[2].status == "finished"  # shorter than min_text_length
    unsure = LanguageDetector(["en"], strategy="block", backend=Unsure(), undecided="allow")
    assert run_with(unsure, GERMAN)[2].status == "finished"


def test_only_this_runs_input_is_checked() -> None:
    hist = MessageList.of(
        [Message(id="old", role="user", parts=(TextPart(GERMAN),))], source="memory"
    ).add(Message(id="new", role="user", parts=(TextPart(ENGLISH),)))
    assert run_with(LanguageDetector(["en"], strategy="block"), hist)[2].status == "finished"


@pytest.mark.parametrize(
    "reply", [Fail(status=400), Say("")], ids=["judge-error", "empty-translation"]
)
def test_translation_failure_fails_closed(reply: Say | Fail) -> None:
    det = LanguageDetector(["en"], strategy="translate", judge_model="judge")
    model, _, result, _ = run_with(det, GERMAN, [reply])
    assert result.status == "tripped" and model.requests == []
    assert result.tripwire is not None and "fail closed" in result.tripwire.reason


def test_translation_failure_with_fail_open_keeps_the_text() -> None:
    det = LanguageDetector(["en"], strategy="translate", judge_model="judge", fail_open=True)
    model, _, result, _ = run_with(det, GERMAN, [Say("")])
    assert result.status == "finished" and model.requests[0].messages[0].text == GERMAN


class Broken:
    def detect(self, text: str) -> tuple[str, float]:
        raise RuntimeError("model file corrupt")


@pytest.mark.parametrize("strategy", ["detect", "warn", "block"])
def test_a_detector_error_fails_closed_whatever_the_strategy(strategy: LanguageStrategy) -> None:
    model, _, result, _ = run_with(LanguageDetector(["en"], strategy=strategy,
                                                    backend=Broken()), ENGLISH)
    assert result.status == "tripped" and model.requests == []
    assert result.tripwire is not None and "model file corrupt" in result.tripwire.reason


def test_a_detector_error_with_fail_open_goes_on() -> None:
    det = LanguageDetector(["en"], backend=Broken(), fail_open=True)
    assert run_with(det, ENGLISH)[2].status == "finished"


def test_translate_without_a_judge_is_refused() -> None:
    with pytest.raises(ValueError, match="judge_model"):
        LanguageDetector(["en"], strategy="translate")


@pytest.fixture
def no_langid(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    ld._identifier.cache_clear()
    for name in ("py3langid", "py3langid.langid"):
        monkeypatch.setitem(sys.modules, name, None)
    yield
    ld._identifier.cache_clear()


def test_without_the_extra_the_error_names_it(no_langid: None) -> None:
    with pytest.raises(GuardsExtraMissing, match=r"pipeline-agents\[guards\]"):
        LanguageDetector(["en"])
    LanguageDetector(["en"], backend=Broken())  # a backend of one's own needs no extra


class Unsure:
    """A backend that names a language it is not sure of."""

    def detect(self, text: str) -> tuple[str, float]:
        return "de", 0.3


@pytest.mark.parametrize(("text", "lang"), [
    ("Guten Morgen", "de"), ("Buenos días", "es"), ("Merci beaucoup", "fr"),
    ("Bom dia amigo", "pt"),
])
def test_two_word_texts_are_told_apart_by_default(text: str, lang: str) -> None:
    _, _, result, notes = run_with(LanguageDetector(["en"], strategy="warn"), text)
    assert result.status == "finished"
    assert [n.data["language"] for n in notes if isinstance(n.data, dict)] == [lang]


def test_the_default_candidates_keep_a_target_outside_the_common_set() -> None:
    det = LanguageDetector(["sw"], strategy="block")
    _, _, result, _ = run_with(det, "Habari ya asubuhi, rafiki yangu, karibu nyumbani kwetu.")
    assert result.status == "finished"


def test_an_undecided_text_is_blocked_under_block() -> None:
    model, _, result, _ = run_with(LanguageDetector(["en"], strategy="block",
                                                    backend=Unsure()), ENGLISH)
    assert result.status == "tripped" and model.requests == []
    assert result.tripwire is not None and "undecided" in result.tripwire.reason


@pytest.mark.parametrize("strategy", ["detect", "translate"])
def test_an_undecided_text_passes_when_the_strategy_does_not_block(
    strategy: LanguageStrategy,
) -> None:
    det = LanguageDetector(["en"], strategy=strategy, backend=Unsure(), judge_model="judge")
    model, judge, result, notes = run_with(det, ENGLISH)
    assert result.status == "finished" and judge.requests == [] and notes == []
    assert model.requests[0].messages[0].text == ENGLISH


def test_an_undecided_text_is_warned_of_under_warn() -> None:
    _, _, result, notes = run_with(LanguageDetector(["en"], strategy="warn",
                                                    backend=Unsure()), ENGLISH)
    assert result.status == "finished"
    assert [n.data["action"] for n in notes if isinstance(n.data, dict)] == ["undecided"]


def test_the_undecided_choice_overrides_the_strategy() -> None:
    _, _, allowed, _ = run_with(LanguageDetector(["en"], strategy="block", backend=Unsure(),
                                                 undecided="allow"), ENGLISH)
    assert allowed.status == "finished"
    _, _, blocked, _ = run_with(LanguageDetector(["en"], backend=Unsure(),
                                                 undecided="block"), ENGLISH)
    assert blocked.status == "tripped"


def test_an_unknown_undecided_choice_is_refused() -> None:
    with pytest.raises(ValueError, match="undecided"):
        LanguageDetector(["en"], undecided="maybe")  # type: ignore[arg-type]
