"""For any interleaving of streams started, frames added, streams ended and clients
reconnecting (examples/stream_replay.py, what `chat_app(..., resumable=True)` keeps):
a client back after a frame gets the frames after it, each once and in order, to the
end, or a prefix of them when the caps forgot the stream meanwhile; the kept frames
never take more than the cap, nor more chats than allowed; ids never repeat."""

from __future__ import annotations

import anyio
import anyio.lowlevel
from hypothesis import given
from hypothesis import strategies as st

from examples.stream_replay import Gone, Replay, Replays
from interpreters import CancelSignal

CHATS = ("a", "b")

op = st.one_of(
    st.tuples(st.just("start"), st.sampled_from(CHATS)),
    st.tuples(st.just("add"), st.sampled_from(CHATS), st.integers(0, 60)),
    st.tuples(st.just("end"), st.sampled_from(CHATS)),
    st.tuples(st.just("read"), st.sampled_from(CHATS), st.integers(0, 5)),
)


@given(ops=st.lists(op, max_size=40), max_bytes=st.integers(1, 600),
       max_chats=st.integers(1, 2), backend=st.sampled_from(["asyncio", "trio"]))
def test_a_client_back_gets_the_rest_once_within_the_caps(
    ops: list[tuple[object, ...]], max_bytes: int, max_chats: int, backend: str
) -> None:
    sent: dict[int, list[bytes]] = {}  # every frame each stream sent, kept or not
    reads: list[tuple[Replay, int, list[bytes]]] = []

    async def read(replay: Replay, index: int, got: list[bytes]) -> None:
        async for frame in replay.after(index):
            got.append(frame)

    async def main() -> None:
        replays = Replays(max_bytes, max_chats)
        current: dict[str, Replay] = {}
        async with anyio.create_task_group() as tg:
            for o in ops:
                kind, chat = o[0], str(o[1])
                replay = current.get(chat)
                if kind == "start":
                    current[chat] = replays.start(chat, CancelSignal())
                    sent[current[chat].number] = []
                elif kind == "add" and replay is not None and not replay.ended:
                    size = o[2]
                    assert isinstance(size, int)
                    framed = replays.add(replay, b"data: " + b"x" * size + b"\n\n")
                    sent[replay.number].append(framed)
                elif kind == "end" and replay is not None:
                    replays.end(replay)
                elif kind == "read" and replay is not None and sent[replay.number]:
                    back = o[2]
                    assert isinstance(back, int)
                    index = max(0, len(sent[replay.number]) - 1 - back)
                    last = sent[replay.number][index].split(b"\n", 1)[0].removeprefix(b"id: ")
                    try:
                        kept, at = replays.resumed(chat, last.decode())
                    except Gone:
                        assert replay.dropped  # only a stream forgotten is gone
                        continue
                    assert (kept, at) == (replay, index)
                    got: list[bytes] = []
                    reads.append((replay, index, got))
                    tg.start_soon(read, replay, index, got)
                await anyio.lowlevel.checkpoint()  # the readers take what came
                assert replays.kept_bytes <= max_bytes
                assert sum(1 for r in current.values() if not r.dropped) <= max_chats
            for replay in current.values():
                replays.end(replay)  # (every run ends: its readers stop)

    anyio.run(main, backend=backend)
    for replay, index, got in reads:
        rest = sent[replay.number][index + 1:]
        if replay.dropped:
            assert got == rest[:len(got)]
        else:
            assert got == rest
    ids = [f.split(b"\n", 1)[0] for frames in sent.values() for f in frames]
    assert len(ids) == len(set(ids))
