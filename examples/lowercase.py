"""An input processor that lowercases the text of every input message."""

from __future__ import annotations

from effects import Replace
from pipeline import InputArgs, InputResult, Message, Processor, TextPart


def lowercase_message(m: Message) -> Message:
    return m.with_parts(
        TextPart(p.text.lower()) if isinstance(p, TextPart) else p for p in m.parts
    )


class Lowercase(Processor):
    id = "lowercase"

    def process_input(self, args: InputArgs[None]) -> InputResult[None]:
        return Replace(args.message_list.map_messages(lowercase_message))
