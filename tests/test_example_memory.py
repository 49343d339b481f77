"""examples/memory_chat.py: a chat service that keeps threads, recalls an old fact from
another thread of the same user, updates working memory, and stores no blocked answer."""

from __future__ import annotations

from pathlib import Path

from examples.memory_chat import ChatService, conversation, main
from interpreters.memory import InMemoryStore, open_memory_store


def test_the_chat_recalls_an_old_fact_and_keeps_working_memory() -> None:
    store = InMemoryStore()
    answers = dict(conversation(ChatService(store)))
    assert answers["Who am I?"] == "You are Ada."
    assert answers["What is my favourite colour?"] == "Your favourite colour is teal."
    assert answers["Read me my card number."].startswith("(not answered")
    assert store.get_working_memory("resource:ada") == "name: Ada"
    saved = [m.text for t in ("monday", "friday") for m in store.last_messages(t, 100)]
    assert "Read me my card number." not in saved  # the blocked turn left nothing
    assert not any("4111" in t for t in saved)
    assert len(store.last_messages("friday", 100)) == 4


def test_the_example_runs_as_a_script_and_its_sqlite_threads_survive_a_restart(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    assert len(main(url)) == 7
    store = open_memory_store(url)  # a new process would open the file the same way
    try:
        again = ChatService(store)
        assert again.say("ada", "next-week", "Who am I?") == "You are Ada."
        assert again.say("ada", "next-week", "What is my favourite colour?") == (
            "Your favourite colour is teal."
        )
        # four approved turns (one with a tool call and its result); not the blocked one
        assert len(store.last_messages("monday", 100)) == 10
    finally:
        store.close()
