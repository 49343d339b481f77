"""A chat service that keeps its threads: history, recall of an old fact, working memory.

    python -m examples.memory_chat [URL]      # default: sqlite:///memory_chat.db

Each user (a resource) has threads; a thread's last messages come back on every turn
(`MessageHistory`), a fact said long ago, or in another thread of the same user, is
recalled by similarity (`SemanticRecall`), and the model keeps a profile of the user up
to date through a tool (`WorkingMemory`). Only what every output processor approved is
saved; here a guard blocks answers that would leak a card number, and a blocked turn
leaves nothing in the store.

The model is scripted (no network, no key) so the example runs anywhere; in your code,
pass a real provider (`interpreters.providers.Resolver()`) and a real embedder.
"""

from __future__ import annotations

import re

from effects import Abort, Continue
from interpreters.memory import HashEmbedder, MemoryStore, memory_handlers, open_memory_store
from interpreters.sync import SyncInterpreter
from interpreters.testing import Say, ScriptedModel, call
from pipeline import Agent, ModelRequest
from pipeline.processor import OutputResultArgs, OutputResultResult, processor
from pipeline.processors import MessageHistory, SemanticRecall, WorkingMemory

CARD = re.compile(r"\b\d{4}(?: ?\d{4}){3}\b")


def no_card_numbers(args: OutputResultArgs[None]) -> OutputResultResult[None]:
    return Abort("the answer holds a card number") if CARD.search(args.result.text) else Continue()


def script(request: ModelRequest) -> Say:
    """A stand-in model that reads what memory put in front of it."""
    said = [m.text for m in request.messages]
    question = said[-1] if said else ""
    system = "\n".join(s.content for s in request.system)
    if any(m.role == "tool" for m in request.messages[-1:]):
        return Say("Noted.")
    if (name := re.search(r"my name is (\w+)", question, re.I)) is not None:
        return Say(calls=[call("update_working_memory", text=f"name: {name.group(1)}")])
    if "card" in question:
        return Say("Your card is 4111 1111 1111 1111.")  # the guard blocks this
    if "who am i" in question.lower():
        found = re.search(r"name: (\w+)", system)
        return Say(f"You are {found.group(1)}." if found else "I don't know yet.")
    if "colour" in question and "?" in question:
        for text in said[:-1]:
            if (fact := re.search(r"favourite colour is (\w+)", text)) is not None:
                return Say(f"Your favourite colour is {fact.group(1)}.")
        return Say("You haven't told me.")
    return Say("Got it.")


class ChatService:
    """One agent, one store, any number of users and threads."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.agent = Agent.create(
            "chat/model",
            instructions="You are a helpful assistant with a memory.",
            input_processors=[
                MessageHistory(last_messages=4),
                SemanticRecall(top_k=2, message_range=1, scope="resource"),
                WorkingMemory(scope="resource", template="name: unknown"),
            ],
            output_processors=[processor("no-cards", process_output_result=no_card_numbers)],
        )
        self.interpreter = SyncInterpreter(
            ScriptedModel(script), handlers=memory_handlers(store, HashEmbedder())
        )

    def say(self, user: str, thread: str, text: str) -> str:
        result = self.interpreter.run(self.agent, text, thread_id=thread, resource_id=user)
        if result.status != "finished":
            return f"(not answered: {result.tripwire.reason if result.tripwire else result.error})"
        return result.text


def conversation(service: ChatService) -> list[tuple[str, str]]:
    """A user's turns over two threads, and the answers."""
    turns = [
        ("monday", "My favourite colour is teal."),
        ("monday", "My name is Ada."),
        ("monday", "What is the weather like?"),
        ("monday", "Tell me a joke."),
        ("monday", "Read me my card number."),
        ("friday", "Who am I?"),
        ("friday", "What is my favourite colour?"),
    ]
    return [(text, service.say("ada", thread, text)) for thread, text in turns]


def main(url: str = "sqlite:///memory_chat.db") -> list[tuple[str, str]]:
    """The conversation over the store `url` names: a SQLite file (kept across restarts:
    run it twice and the second run still knows Ada), `postgresql://user@host/db` for
    PostgreSQL with pgvector (the `postgres` extra), or `memory://`."""
    store = open_memory_store(url)
    service = ChatService(store)
    try:
        out = conversation(service)
    finally:
        store.close()
    for question, answer in out:
        print(f"> {question}\n{answer}")
    return out


if __name__ == "__main__":
    import sys

    main(*sys.argv[1:2])
