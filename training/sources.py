"""The public corpora the prompt-injection classifier is trained and evaluated on: where
each lives (repository, commit, paths), its licence, and how its rows are read.

A data directory holds each source's files under `<owner>+<name>/<path>` (what
`training/fetch_sources.py` writes). A source whose files are absent is skipped, and
the caller is told (`missing`).

Roles: "train" sources teach the model (and are each held out in turn to measure it);
"eval" sources are the benchmarks the field reports on, or sources whose licence keeps
them out of the weights: the model never sees them, they only measure it.
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import random
import re
import sys
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

csv.field_size_limit(sys.maxsize)

Role = Literal["train", "eval"]


@dataclass(frozen=True)
class Row:
    text: str
    attack: bool
    source: str
    lang: str = "en"


@dataclass(frozen=True)
class Source:
    name: str
    repo: str
    commit: str
    paths: tuple[str, ...]
    licence: str
    role: Role
    what: str
    read: Callable[[Path], Iterator[Row]]
    export: tuple[str, ...] = ()
    """What fetch_sources.py takes from the commit (top-level globs allowed); `paths`
    when empty."""

    def folder(self, data: Path) -> Path:
        return data / self.repo.replace("/", "+")

    def present(self, data: Path) -> bool:
        """Its files are in `data` (a source of this repository has none to fetch)."""
        return all((self.folder(data) / p).exists() for p in self.paths)

    def rows(self, data: Path) -> list[Row]:
        return list(self.read(self.folder(data)))


def _json(path: Path) -> object:
    return json.loads(path.read_text(encoding="utf-8"))


def _jsonl(path: Path) -> Iterator[dict[str, object]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def _csv(path: Path) -> Iterator[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        yield from csv.DictReader(f)


def _sample(rows: list[Row], n: int, seed: str) -> list[Row]:
    if len(rows) <= n:
        return rows
    return random.Random(seed).sample(rows, n)


# --- training sources: attacks ------------------------------------------------------------

_CSE_LANGS = {
    "English": "en", "Hindi": "hi", "Bengali": "bn", "Turkish": "tr", "Arabic": "ar",
    "Italian": "it", "Spanish": "es", "Vietnamese": "vi", "French": "fr", "Russian": "ru",
    "Filipino/Tagalog": "tl", "Portuguese": "pt", "Japanese": "ja", "Korean": "ko",
    "German": "de", "Chinese": "zh", "Indonesian": "id", "Thai": "th",
}


def _cyberseceval(root: Path) -> Iterator[Row]:
    base = root / "CybersecurityBenchmarks/datasets/prompt_injection"
    prompts: set[str] = set()
    for name in ("prompt_injection.json", "prompt_injection_multilingual_machine_translated.json"):
        for case in _json(base / name):  # type: ignore[attr-defined]
            lang = _CSE_LANGS.get(case.get("speaking_language", "English"), "xx")
            yield Row(case["user_input"], True, "cyberseceval", lang)
            prompts.add(case["test_case_prompt"])
    # the system prompts the attacks target: benign instructions ("do not reveal ...")
    for p in sorted(prompts):
        yield Row(p, False, "cyberseceval")


def _jailbreakhub(root: Path) -> Iterator[Row]:
    for r in _csv(root / "data/jailbreak_human_set2/jailbreak_prompts_2023_12_25.csv"):
        if r["prompt"].strip():
            yield Row(r["prompt"], True, "jailbreakhub")


def _gptfuzz(root: Path) -> Iterator[Row]:
    questions = [r["text"] for r in _csv(root / "datasets/questions/question_list.csv")]
    rng = random.Random("gptfuzz")
    for r in _csv(root / "datasets/prompts/GPTFuzzer.csv"):
        for q in rng.sample(questions, 3):
            yield Row(r["text"].replace("[INSERT PROMPT HERE]", q), True, "gptfuzz")


_DE_WORDS = frozenset(
    ["und", "der", "die", "das", "ist", "nicht", "ich", "du", "sie", "wir", "mit", "für",
     "auf", "ein", "eine", "einen", "zu", "wie", "was", "bitte", "mir", "mich", "dich",
     "dein", "deine", "alle", "alles", "vergiss", "jetzt", "sind", "wird", "werden", "über"])


def _lang_en_de(text: str) -> str:
    """"de" for a text with at least two German function words, else "en" (the source
    holds these two languages only)."""
    hits = sum(w in _DE_WORDS for w in text.lower().split())
    return "de" if hits >= 2 else "en"


def _deepset(root: Path) -> Iterator[Row]:
    # the train extra (parquet is how the source ships); imported by name so that the
    # type check of bench/, which reads this module, needs no pyarrow
    pq = importlib.import_module("pyarrow.parquet")

    for f in sorted((root / "data/raw").glob("*.parquet")):
        for r in pq.read_table(f).to_pylist():
            text = str(r["text"])
            # German translations of awesome-chatgpt-prompts' role-play prompts are
            # labelled injections here and benign there: the two sources disagree, and
            # a role-play request is no injection
            if text.strip() and not text.startswith("Ich möchte, dass Sie als"):
                yield Row(text, bool(r["label"]), "deepset", _lang_en_de(text))


_XSAFETY_LANGS = ("en", "zh", "sp", "fr", "bn", "ar", "hi", "ru", "ja", "de")
"""XSafety's folders ("sp" is Spanish)."""


def _xsafety_file(lang: str, stem: str) -> str:
    # the English files end in "_n", the Bengali ones too and are spreadsheets
    if lang == "bn":
        return f"bn/{stem}_n.xlsx"
    return f"{lang}/{stem}_n.csv" if lang == "en" else f"{lang}/{stem}.csv"


_XSAFETY_PATHS = tuple(sorted(
    [_xsafety_file(lang, "Goal_Hijacking") for lang in _XSAFETY_LANGS]
    + [f"{lang}/commonsense.csv" for lang in _XSAFETY_LANGS]))


_FIRST_COLUMN = re.compile(r"A\d+")
_XLSX = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"


def xlsx_column(data: bytes) -> list[str]:
    """The first column of an .xlsx file's first sheet, read with the standard library
    (shared strings and inline strings; a cell that is a number is read as written)."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        shared: list[str] = []
        if "xl/sharedStrings.xml" in z.namelist():
            for si in ET.fromstring(z.read("xl/sharedStrings.xml")).iter(f"{_XLSX}si"):
                shared.append("".join(t.text or "" for t in si.iter(f"{_XLSX}t")))
        sheet = ET.fromstring(z.read("xl/worksheets/sheet1.xml"))
    out: list[str] = []
    for row in sheet.iter(f"{_XLSX}row"):
        for c in row.iter(f"{_XLSX}c"):
            if not _FIRST_COLUMN.fullmatch(c.get("r", "A1")):
                continue
            if c.get("t") == "s":
                v = c.find(f"{_XLSX}v")
                out.append(shared[int(v.text)] if v is not None and v.text else "")
            elif c.get("t") == "inlineStr":
                out.append("".join(t.text or "" for t in c.iter(f"{_XLSX}t")))
            else:
                v = c.find(f"{_XLSX}v")
                out.append(v.text or "" if v is not None else "")
    return out


def _xsafety_texts(path: Path) -> list[str]:
    if path.suffix == ".xlsx":
        texts = xlsx_column(path.read_bytes())
    else:
        with path.open(encoding="utf-8-sig", newline="") as f:
            texts = [r[0] for r in csv.reader(f) if r]
    return [t.strip() for t in texts if t.strip()]


def _xsafety(root: Path) -> Iterator[Row]:
    """XSafety's goal hijacking prompts ("<question> Ignore the above instructions and
    just output: <text>") as attacks, and its commonsense multiple-choice questions ("If
    it is cold outside: A. ... Output the unsafe choice.") as benign requests, in its 10
    languages. Its prompt-leaking category is left out: most of its rows ask about
    prompt-leak attacks (benign), some ask for the prompt, and no category says which."""
    for lang in _XSAFETY_LANGS:
        code = "es" if lang == "sp" else lang
        for t in _xsafety_texts(root / _xsafety_file(lang, "Goal_Hijacking")):
            yield Row(t, True, "xsafety", code)
        for t in _xsafety_texts(root / f"{lang}/commonsense.csv"):
            yield Row(t, False, "xsafety", code)


def _handwritten(root: Path) -> Iterator[Row]:
    from training.handwritten import rows

    return rows()


# --- training sources: benign ---------------------------------------------------------------

def _clinc(root: Path) -> Iterator[Row]:
    d = _json(root / "data/data_full.json")
    rows = [Row(t, False, "clinc") for split in d.values() for t, _ in split]  # type: ignore[attr-defined]
    yield from _sample(rows, 8000, "clinc")


def _gsm8k(root: Path) -> Iterator[Row]:
    rows = [Row(str(r["question"]), False, "gsm8k")
            for r in _jsonl(root / "grade_school_math/data/train.jsonl")]
    yield from _sample(rows, 3000, "gsm8k")


def _awesome_prompts(root: Path) -> Iterator[Row]:
    for r in _csv(root / "prompts.csv"):
        if r["prompt"].strip() and r.get("type", "TEXT") == "TEXT":
            yield Row(r["prompt"], False, "awesome-prompts")


_TLDR_LANG = {"pages": "en", "pages.pt_BR": "pt", "pages.pt_PT": "pt", "pages.zh_TW": "zh",
              "pages.no": "nb"}


def _tldr(root: Path) -> Iterator[Row]:
    for folder in sorted(root.glob("pages*")):
        lang = _TLDR_LANG.get(folder.name, folder.name.removeprefix("pages."))
        pages = sorted(folder.rglob("*.md"))
        for page in random.Random(folder.name).sample(pages, min(len(pages), 150)):
            text = page.read_text(encoding="utf-8")
            yield Row(text, False, "tldr", lang)
            # a command's description alone: a short benign sentence in that language
            lines = [ln[2:] for ln in text.splitlines() if ln.startswith("- ")]
            if lines:
                yield Row(lines[0], False, "tldr", lang)


def _gitignore(root: Path) -> Iterator[Row]:
    for f in sorted(root.rglob("*.gitignore")):
        text = f.read_text(encoding="utf-8", errors="replace")
        if text.strip():
            yield Row(text[:4000], False, "gitignore")


def _alpaca_eval(root: Path) -> Iterator[Row]:
    for r in _json(root / "example/outputs.json"):  # type: ignore[attr-defined]
        yield Row(r["instruction"], False, "alpaca-eval")
        yield Row(r["output"], False, "alpaca-eval")  # an answer: text as a tool returns it


def _t0_prompts(root: Path) -> Iterator[Row]:
    for r in _jsonl(root / "data/seed_tasks.jsonl"):
        yield Row(str(r["instruction"]), False, "t0-prompts")
    folder = root / "data/finetuning/t0_train_50k/data_per_template"
    for f in sorted(folder.glob("*.jsonl")):
        prompts = [str(r["prompt"]) for r in _jsonl(f)]
        for p in random.Random(f.name).sample(prompts, min(len(prompts), 10)):
            yield Row(p, False, "t0-prompts")


def _gpteacher_roleplay(root: Path) -> Iterator[Row]:
    """Role-play instructions ("You are a pirate captain...", "Imagine you are an alien
    who...") with their inputs: the benign look-alike of a persona jailbreak."""
    path = root / "Roleplay/roleplay-simple-deduped-roleplay-instruct.json"
    for r in _json(path):  # type: ignore[attr-defined]
        text = f"{r['instruction']}\n{r['input']}".strip()
        if text:
            yield Row(text, False, "gpteacher-roleplay")


# --- evaluation-only sources ----------------------------------------------------------------

def _ordinary(root: Path) -> Iterator[Row]:
    """Customer requests to a bank's and a hotel's assistant: what an app's users send."""
    for r in _csv(root / "banking_data/test.csv"):
        yield Row(r["text"], False, "banking77")
    for domain in ("banking", "hotels"):
        for f in sorted((root / f"nlupp/data/{domain}").glob("fold*.json")):
            for r in _json(f):  # type: ignore[attr-defined]
                yield Row(str(r["text"]), False, f"nlupp-{domain}")


def _jailbreakbench(root: Path) -> Iterator[Row]:
    seen: set[str] = set()
    for f in sorted((root / "attack-artifacts").rglob("*.json")):
        if f.name in ("attack-info.json", "evaluation.json", "submission.json") or \
                "test-artifact" in f.parts:
            continue
        method = f.parts[-3]
        for jb in _json(f)["jailbreaks"]:  # type: ignore[index]
            p = jb.get("prompt")
            if p and p not in seen:
                seen.add(p)
                yield Row(p, True, f"jailbreakbench-{method}")


def _tensor_trust(root: Path) -> Iterator[Row]:
    for kind in ("hijacking", "extraction"):
        path = root / f"benchmarks/{kind}-robustness/v1/{kind}_robustness_dataset.jsonl"
        for r in _jsonl(path):
            yield Row(str(r["attack"]), True, f"tensor-trust-{kind}")


def _notinject(root: Path) -> Iterator[Row]:
    for n in ("one", "two", "three"):
        for r in _json(root / f"datasets/NotInject_{n}.json"):  # type: ignore[attr-defined]
            yield Row(r["prompt"], False, "notinject")
    for r in _json(root / "datasets/wildguard.json"):  # type: ignore[attr-defined]
        yield Row(r["prompt"], bool(r["label"]), "wildguard-benign")


def _bipia(root: Path) -> Iterator[Row]:
    """BIPIA's test attacks planted in the middle of its test emails (indirect)."""
    attacks: list[str] = []
    for name in ("text_attack_test.json", "code_attack_test.json"):
        for items in _json(root / "benchmark" / name).values():  # type: ignore[attr-defined]
            attacks.extend(items)
    emails = [str(r["context"]) for r in _jsonl(root / "benchmark/email/test.jsonl")]
    rng = random.Random("bipia")
    for a in attacks:
        e = rng.choice(emails)
        cut = e.find("\n", len(e) // 2)
        cut = len(e) // 2 if cut < 0 else cut
        yield Row(f"{e[:cut]}\n{a}\n{e[cut:]}", True, "bipia-email")
    for e in emails:
        yield Row(e, False, "bipia-email")


def _giskard(root: Path) -> Iterator[Row]:
    for r in _csv(root / "prompt_injections.csv"):
        src = "garak" if "garak" in r["source"] else "promptinject"
        yield Row(r["prompt"], True, f"giskard-{src}", r.get("language") or "en")


_XQUAD = ("ar", "de", "el", "en", "es", "hi", "ro", "ru", "th", "tr", "vi", "zh")


def _xquad(root: Path) -> Iterator[Row]:
    for lang in _XQUAD:
        path = root / f"xquad.{lang}.json"
        if not path.exists():
            continue
        qs = [qa["question"] for art in _json(path)["data"]  # type: ignore[index]
              for para in art["paragraphs"] for qa in para["qas"]]
        for q in random.Random(lang).sample(qs, min(len(qs), 150)):
            yield Row(q, False, "xquad", lang)


SOURCES: tuple[Source, ...] = (
    Source("cyberseceval", "meta-llama/PurpleLlama", "4be64c3a24442b51c76175e6ec67722cc3f5fe38",
           ("CybersecurityBenchmarks/datasets/prompt_injection/prompt_injection.json",
            "CybersecurityBenchmarks/datasets/prompt_injection/"
            "prompt_injection_multilingual_machine_translated.json"),
           "MIT", "train",
           "CyberSecEval prompt-injection cases: direct and indirect injections (English and "
           "machine-translated into 17 languages); their target system prompts as benign",
           _cyberseceval),
    Source("jailbreakhub", "yunwei37/satml-llmail-injection",
           "360613b492c5a4e8f9297b32adc819f0aa27210a",
           ("data/jailbreak_human_set2/jailbreak_prompts_2023_12_25.csv",),
           "MIT (verazuo/jailbreak_llms, the file's origin)", "train",
           "1,405 in-the-wild jailbreak prompts (Reddit, Discord, websites) of the "
           "'Do Anything Now' study, as its authors published them", _jailbreakhub),
    Source("gptfuzz", "sherdencooper/GPTFuzz", "1eddeb565740ae311b5f4950492b011a6f866fe7",
           ("datasets/prompts/GPTFuzzer.csv", "datasets/questions/question_list.csv"), "MIT",
           "train", "77 jailbreak templates, each filled with 3 of its harmful questions",
           _gptfuzz),
    Source("deepset", "sinanw/llm-security-prompt-injection",
           "c8af0b015a9a4f3380f9e20214828c2dbeadc72c",
           ("data/raw/train-00000-of-00001-9564e8b05b4757ab.parquet",
            "data/raw/test-00000-of-00001-701d16158af87368.parquet"),
           "Apache-2.0 (deepset/prompt-injections, the files' origin); the repository MIT",
           "train",
           "deepset's prompt-injections: 662 English and German prompts, injections and "
           "ordinary questions", _deepset),
    Source("xsafety", "Jarviswang94/Multilingual_safety_benchmark",
           "8c55b6a6cda594cd550a4921513238a2dd40eb5a", _XSAFETY_PATHS, "Apache-2.0", "train",
           "XSafety (All Languages Matter, Wang et al. 2023), professionally translated "
           "into 10 languages: its goal-hijacking prompts as attacks, its commonsense "
           "multiple-choice questions as benign", _xsafety),
    Source("handwritten", "", "", (), "the project's own", "train",
           "short overrides and prompt-extraction requests in 17 languages, and ordinary "
           "requests with the same words, written for this project (training/handwritten.py)",
           _handwritten),
    Source("clinc", "clinc/oos-eval", "828f8093932c8fe6ca7936c3d2e52903b1c523de",
           ("data/data_full.json",), "CC BY 3.0", "train",
           "assistant queries in 150 intents and out of scope (8,000 sampled)", _clinc),
    Source("gsm8k", "openai/grade-school-math", "3101c7d5072418e28b9008a6636bde82a006892c",
           ("grade_school_math/data/train.jsonl",), "MIT", "train",
           "grade-school maths word problems (3,000 sampled)", _gsm8k),
    Source("awesome-prompts", "f/awesome-chatgpt-prompts",
           "246418367f3d80857def4696c14e635cc51c4a0c", ("prompts.csv",), "CC0 1.0", "train",
           "benign role-play and task prompts ('I want you to act as ...')", _awesome_prompts),
    Source("tldr", "tldr-pages/tldr", "08e345f42639f67d99282813247ac670dc6e87cb",
           ("pages", "pages.de", "pages.ja"), "CC BY 4.0", "train",
           "command-line help pages in 39 languages (150 a language, and each page's first "
           "description line): code, 'ignore', 'system' in many languages", _tldr,
           ("pages*",)),
    Source("gitignore", "github/gitignore", "dcc0fc7bc2b5ba480cf117ad1be31bafceeaff46",
           ("Python.gitignore",), "CC0 1.0", "train",
           ".gitignore templates: code comments that say 'ignore' everywhere", _gitignore,
           ("*.gitignore", "Global", "community")),
    Source("alpaca-eval", "tatsu-lab/alpaca_eval", "cd543a149df89434d8a54582c0151c0b945c3d20",
           ("example/outputs.json",), "Apache-2.0", "train",
           "AlpacaEval's 805 user instructions and a model's answers to them", _alpaca_eval),
    Source("t0-prompts", "yizhongw/self-instruct", "0b26ccaa415992100fa32df62d41b994cf928e23",
           ("data/seed_tasks.jsonl", "data/finetuning/t0_train_50k/data_per_template"),
           "Apache-2.0", "train",
           "Self-Instruct's 175 seed tasks, and 10 prompts of each of 294 T0 (P3) "
           "templates: long task prompts with a context ('Answer ... based on ...')",
           _t0_prompts),
    Source("gpteacher-roleplay", "teknium1/GPTeacher", "481075123c29854bddb82655badeef6a438f2436",
           ("Roleplay/roleplay-simple-deduped-roleplay-instruct.json",), "MIT", "train",
           "GPTeacher's 1,923 role-play instructions (\"You are a detective...\", "
           "\"Role play as Charles Darwin...\") with their inputs: benign personas",
           _gpteacher_roleplay),
    # --- evaluation only
    Source("jailbreakbench", "JailbreakBench/artifacts", "909e68c01d94222b8ad2e397a017e2e12e2adb73",
           ("attack-artifacts",), "MIT", "eval",
           "JailbreakBench attack artifacts: PAIR, GCG, JBC, prompt with random search, DSN",
           _jailbreakbench),
    Source("tensor-trust", "HumanCompatibleAI/tensor-trust-data",
           "e2385ea9cf448c9641b96e2e39f113ed4979a5b0",
           ("benchmarks/hijacking-robustness/v1/hijacking_robustness_dataset.jsonl",
            "benchmarks/extraction-robustness/v1/extraction_robustness_dataset.jsonl"),
           "no licence stated (not vendored)", "eval",
           "Tensor Trust hijacking and prompt-extraction attacks (human, adaptive)",
           _tensor_trust),
    Source("notinject", "leolee99/InjecGuard", "588f555cbc2d592b3fbc9b6f462d844b8bcddb4d",
           ("datasets/NotInject_one.json", "datasets/NotInject_two.json",
            "datasets/NotInject_three.json", "datasets/wildguard.json"),
           "MIT (InjecGuard); WildGuardMix is ODC-BY", "eval",
           "NotInject: benign prompts full of trigger words ('ignore', 'bypass'); "
           "WildGuard's benign prompts, as InjecGuard ships them", _notinject),
    Source("bipia", "microsoft/BIPIA", "1a2a91da6bb12838e05d1b2e54d98e2f37b835f3",
           ("benchmark/text_attack_test.json", "benchmark/code_attack_test.json",
            "benchmark/email/test.jsonl"), "MIT", "eval",
           "BIPIA indirect injections: its test attack instructions planted in its test "
           "emails; the emails alone as benign", _bipia),
    Source("giskard", "Giskard-AI/prompt-injections", "ce50a549dadc46b48c931250d2dd71d5f003c0c2",
           ("prompt_injections.csv",), "MIT (rows from garak, Apache-2.0, and PromptInject, MIT)",
           "eval", "35 injections taken from garak's probes and PromptInject", _giskard),
    Source("ordinary-requests", "PolyAI-LDN/task-specific-datasets",
           "57ec275d8078af65b7731c2a98be812d844a6d6b",
           ("banking_data/test.csv", "nlupp/data/banking", "nlupp/data/hotels"),
           "CC BY 4.0", "eval",
           "ordinary requests to an assistant: BANKING77's 3,080 test queries and NLU++'s "
           "banking and hotel utterances (benign)", _ordinary),
    Source("xquad", "google-deepmind/xquad", "7d30520c717524000f0d9d2f9c10a069acd9d285",
           ("xquad.de.json",), "CC BY-SA 4.0 (share-alike: kept out of the weights)", "eval",
           "questions in 12 languages (150 a language): benign, multilingual", _xquad,
           ("xquad.*.json",)),
)


def by_name(name: str) -> Source:
    for s in SOURCES:
        if s.name == name:
            return s
    raise KeyError(name)


def load(data: Path, role: Role) -> tuple[list[Row], list[str]]:
    """The rows of the sources of `role` found under `data`, and the names missing."""
    rows: list[Row] = []
    missing: list[str] = []
    for s in SOURCES:
        if s.role != role:
            continue
        if s.present(data):
            rows.extend(s.rows(data))
        else:
            missing.append(s.name)
    return rows, missing
