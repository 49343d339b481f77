"""Streaming redaction: personal data split across chunks never reaches the caller.

The model streams an email address and a card number cut into pieces at awkward places
("jane.d" + "oe@exam" + "ple.com"). `PIIDetector` holds a bounded window of the stream
back, finds each value whole, and releases the text with the value redacted; the
system-prompt scrubber and a batcher compose with it in the same list.

Run it: `python -m examples.streaming_redaction`.
"""

from __future__ import annotations

from interpreters.testing import Say, ScriptedModel, SimRun, Simulator
from pipeline import Agent, TextDelta
from pipeline.processors import BatchPartsProcessor, PIIDetector, SystemPromptScrubber

INSTRUCTIONS = (
    "You are the billing assistant of Acme. "
    "Internal note: refunds above 500 euros need approval from Dana."
)

CHUNKS = [
    "Sure! I will send the receipt to jane.d", "oe@exam", "ple.com and charge ",
    "the card 4111 11", "11 1111 1", "111 today. ",
    "As my instructions say, refunds above 500 euros need approval from Dana.",
]


def agent() -> Agent:
    return Agent.create(
        "demo/model",
        instructions=INSTRUCTIONS,
        output_processors=[
            PIIDetector(strategy="redact"),
            SystemPromptScrubber(min_words=6),
            BatchPartsProcessor(max_parts=2),
        ],
    )


def run() -> SimRun:
    return Simulator(ScriptedModel([Say(CHUNKS)])).run(agent(), "Please bill me.")


def main() -> None:
    ran = run()
    for chunk in ran.trace.chunks:
        if isinstance(chunk, TextDelta):
            print(repr(chunk.text))
    print("result:", ran.result.text)


if __name__ == "__main__":
    main()
