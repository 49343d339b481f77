"""What the SQLite store reads to answer: a message's neighbours are found through the
thread's order index, without walking the thread, however many of its messages share a
turn (a history imported in one save, or one long run)."""

from __future__ import annotations

from pathlib import Path

from interpreters.memory import SQLiteStore
from pipeline.values.messages import user


def _steps_for_neighbours(path: Path, messages: int) -> int:
    """SQLite virtual-machine steps (counted in hundreds) that the neighbours of the
    thread's middle message take, in a thread of `messages` saved in one turn."""
    store = SQLiteStore(path)
    try:
        store.save_messages("t1", [user(f"m {i}", id=f"m{i:06d}") for i in range(messages)],
                            resource_id="u1", created_at=1.0)
        middle = f"m{messages // 2:06d}"
        steps = 0

        def count() -> int:
            nonlocal steps
            steps += 1
            return 0  # (0: go on)

        conn = store._conn
        assert conn is not None
        conn.set_progress_handler(count, 100)
        try:
            found = store.neighbours("t1", middle, before=2, after=2)
        finally:
            conn.set_progress_handler(None, 0)
        assert [m.id for m in found] == [f"m{i:06d}" for i in
                                         range(messages // 2 - 2, messages // 2 + 3)]
        return steps
    finally:
        store.close()


def test_the_neighbours_of_a_message_do_not_walk_its_thread(tmp_path: Path) -> None:
    small = _steps_for_neighbours(tmp_path / "small.db", 1_000)
    large = _steps_for_neighbours(tmp_path / "large.db", 20_000)
    # A walk of the thread would take twenty times the steps; index seeks about the same.
    assert large <= small + 2, (small, large)
