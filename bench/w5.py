"""W5 of bench/WORKLOADS.md: the real HTTP path, as client CPU time per streamed chunk.

    python -m bench.w5                 # N = 2,000 deltas, 7 timed repetitions per system
    python -m bench.w5 --quick         # smoke mode: N = 200, 2 repetitions (no timing asserted)
    python -m bench.w5 --systems floor agent-async             # some of the systems
    python -m bench.w5 --pause 0.005 --n 500 --systems floor agent-async   # paced

A loopback server (bench/wire_server.py, its own process) streams N text deltas, one
write per SSE event. Each system runs in a fresh process and reports its process CPU time
per chunk (min and median over the repetitions, after warm-up runs):

- floor: plain httpx `iter_lines` and msgspec decoding of each `data:` line, the least a
  Python client on httpx can do;
- provider-openai / provider-anthropic: this library's provider alone (`stream(request)`);
- floor-responses / provider-openai-responses: the same two for an OpenAI Responses stream
  (`/responses`), the provider measured against that floor;
- floor-bedrock / provider-bedrock: the same for a Bedrock Converse event stream (its
  floor: httpx `iter_raw`, botocore's event-stream parser and msgspec decoding of each
  payload; the provider signs each call with SigV4);
- floor-gemini / provider-gemini: the same two over Gemini's stream (each data frame a
  whole GenerateContentResponse), the provider measured against that floor;
- agent-sync / agent-async: a whole agent run with no processors, on the SyncInterpreter
  and on the AsyncInterpreter (asyncio).

Each figure is also given as a ratio to its floor (`FLOORS`) measured in the same sitting. The last
line printed is a JSON summary.

Unpaced, the server writes faster than any of these clients reads, so one network read
brings a couple of hundred events (about 50 reads for 10,000 chunks): what a system pays
per read (above all an async client's wait on its event loop) hardly shows. `--pause`
makes the server wait that many seconds before each write, so each read is one event, as
from a model streaming at its own pace (the CPU times then include a wake-up per event,
and move more with the load).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

SYSTEMS = ("floor", "provider-openai", "provider-anthropic", "agent-sync", "agent-async",
           "floor-responses", "provider-openai-responses", "floor-bedrock", "provider-bedrock",
           "floor-gemini", "provider-gemini")
GOALS = {"provider-openai": 1.1, "provider-anthropic": 1.1, "agent-sync": 1.1, "agent-async": 1.2,
         "provider-openai-responses": 1.1, "provider-bedrock": 1.1, "provider-gemini": 1.1}
FLOORS = {"floor-responses": "floor-responses", "provider-openai-responses": "floor-responses",
          "floor-bedrock": "floor-bedrock", "provider-bedrock": "floor-bedrock",
          "floor-gemini": "floor-gemini", "provider-gemini": "floor-gemini"}
"""The floor each system is measured against, when not `floor` (its own format's stream)."""
BEDROCK_MODEL = "us.amazon.nova-micro-v1:0"
AWS_ENV = {"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
           "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
WARM = 3


def _measure(one: Callable[[], int], n: int, reps: int, warm: int) -> dict[str, Any]:
    for _ in range(warm):
        got = one()
        if got != n:
            raise AssertionError(f"{got} text deltas, expected {n}")
    per_chunk: list[float] = []
    for _ in range(reps):
        c0 = time.process_time()
        got = one()
        per_chunk.append((time.process_time() - c0) * 1e6 / n)
        if got != n:
            raise AssertionError(f"{got} text deltas, expected {n}")
    return {
        "cpu_us_per_chunk_min": min(per_chunk),
        "cpu_us_per_chunk_median": statistics.median(per_chunk),
        "completed": n,
    }


def _one_call(system: str, base: str) -> Callable[[], int]:
    """A function doing one streamed call of `system` and returning its text-delta count."""
    if system == "floor":
        import httpx
        import msgspec

        client = httpx.Client()
        body = msgspec.json.encode({
            "model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True,
        })
        decode = msgspec.json.Decoder().decode

        def floor() -> int:
            k = 0
            with client.stream("POST", base + "/chat/completions", content=body,
                               headers={"content-type": "application/json"}) as r:
                for line in r.iter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        for ch in decode(line[6:])["choices"]:
                            if ch["delta"].get("content"):
                                k += 1
            return k

        return floor

    if system == "floor-responses":
        import httpx
        import msgspec

        client = httpx.Client()
        body = msgspec.json.encode({"model": "gpt-4o", "input": "hi", "stream": True})
        decode = msgspec.json.Decoder().decode

        def floor_responses() -> int:
            k = 0
            with client.stream("POST", base + "/responses", content=body,
                               headers={"content-type": "application/json"}) as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        ev = decode(line[6:])
                        if ev["type"] == "response.output_text.delta" and ev["delta"]:
                            k += 1
            return k

        return floor_responses

    if system == "floor-bedrock":
        import httpx
        import msgspec
        from botocore.eventstream import EventStreamBuffer

        client = httpx.Client()
        body = msgspec.json.encode({"messages": [{"role": "user", "content": [{"text": "hi"}]}]})
        decode = msgspec.json.Decoder().decode

        def floor_bedrock() -> int:
            k = 0
            buf = EventStreamBuffer()
            with client.stream("POST", base + "/model/m/converse-stream", content=body,
                               headers={"content-type": "application/json"}) as r:
                for chunk in r.iter_raw():
                    buf.add_data(chunk)
                    for message in buf:
                        if decode(message.payload).get("delta", {}).get("text"):
                            k += 1
            return k

        return floor_bedrock

    if system == "provider-bedrock":
        from interpreters.providers import resolve_provider
        from pipeline.values.chunks import TextDelta
        from pipeline.values.messages import user
        from pipeline.values.model import ModelRequest

        provider = resolve_provider(f"bedrock/{BEDROCK_MODEL}", base_url=base, env=AWS_ENV)
        request = ModelRequest(model=BEDROCK_MODEL, system=(), messages=(user("hi", id="m1"),))

        def bedrock_alone() -> int:
            return sum(1 for ev in provider.stream(request) if type(ev) is TextDelta)

        return bedrock_alone

    if system == "floor-gemini":
        import httpx
        import msgspec

        client = httpx.Client()
        body = msgspec.json.encode({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
        decode = msgspec.json.Decoder().decode
        url = base + "/models/gemini-2.5-flash:streamGenerateContent?alt=sse"

        def floor_gemini() -> int:
            k = 0
            with client.stream("POST", url, content=body,
                               headers={"content-type": "application/json"}) as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        for cand in decode(line[6:])["candidates"]:
                            for part in cand["content"]["parts"]:
                                if part.get("text"):
                                    k += 1
            return k

        return floor_gemini

    if system.startswith("provider-"):
        from interpreters.providers import resolve_provider
        from pipeline.values.chunks import TextDelta
        from pipeline.values.messages import user
        from pipeline.values.model import ModelRequest

        route, model = {"provider-openai": ("openai", "gpt-4o"),
                        "provider-anthropic": ("anthropic", "claude-sonnet-4-5"),
                        "provider-openai-responses": ("openai-responses", "gpt-4o"),
                        "provider-gemini": ("google", "gemini-2.5-flash")}[system]
        provider = resolve_provider(f"{route}/{model}", base_url=base, api_key="sk-test")
        request = ModelRequest(model=model, system=(), messages=(user("hi", id="m1"),))

        def provider_alone() -> int:
            return sum(1 for ev in provider.stream(request) if type(ev) is TextDelta)

        return provider_alone

    from interpreters import AsyncInterpreter, SyncInterpreter
    from interpreters.providers import AsyncResolver, Resolver
    from pipeline import Agent

    agent = Agent.create("openai/gpt-4o", instructions="Be brief.")
    keys, urls = {"openai": "sk-test"}, {"openai": base}

    def deltas(text: str) -> int:
        return text.count(" word")

    if system == "agent-sync":
        sync = SyncInterpreter(resolve=Resolver(api_keys=keys, base_urls=urls))

        def agent_sync() -> int:
            result = sync.run(agent, "hi")
            if result.status != "finished":
                raise AssertionError(result.error)
            return deltas(result.text)

        return agent_sync

    import anyio

    aio = AsyncInterpreter(resolve=AsyncResolver(api_keys=keys, base_urls=urls))

    def agent_async() -> int:
        async def go() -> int:
            result = await aio.run(agent, "hi")
            if result.status != "finished":
                raise AssertionError(result.error)
            return deltas(result.text)

        return anyio.run(go)

    return agent_async


def _child(system: str, port: int, n: int, reps: int, warm: int) -> None:
    row = _measure(_one_call(system, f"http://127.0.0.1:{port}/v1"), n, reps, warm)
    print(json.dumps({"system": system, "workload": "W5", "units": n, **row}))


def run(
    n: int, reps: int, warm: int, systems: tuple[str, ...] = SYSTEMS, pause: float = 0.0
) -> list[dict[str, Any]]:
    """Start the server (waiting `pause` seconds before each write), measure each system in
    its own process, add ratios to the floor."""
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.wire_server", str(n), *([str(pause)] if pause else [])],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        rows: list[dict[str, Any]] = []
        for system in systems:
            print(f"[W5] {system}", file=sys.stderr, flush=True)
            proc = subprocess.run(
                [sys.executable, "-m", "bench.w5", "--child", system, "--port", str(port),
                 "--n", str(n), "--reps", str(reps), "--warm", str(warm)],
                capture_output=True, text=True, timeout=600,
            )
            if proc.returncode != 0:
                rows.append({"system": system, "workload": "W5", "units": n,
                             "error": proc.stderr.strip().splitlines()[-1:]})
                continue
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    finally:
        server.kill()
        server.wait(timeout=10)
    floors = {r["system"]: r for r in rows if r["system"].startswith("floor") and "error" not in r}
    for r in rows:
        floor = floors.get(FLOORS.get(r["system"], "floor"))
        if floor is not None and "error" not in r:
            r["ratio_min"] = r["cpu_us_per_chunk_min"] / floor["cpu_us_per_chunk_min"]
            r["ratio_median"] = r["cpu_us_per_chunk_median"] / floor["cpu_us_per_chunk_median"]
            if r["system"] in GOALS:
                r["goal_ratio"] = GOALS[r["system"]]
                r["met"] = r["ratio_min"] <= GOALS[r["system"]]
    return rows


def print_rows(rows: list[dict[str, Any]]) -> None:
    print("\nW5: client CPU per streamed chunk over loopback (us; ratio to the floor)")
    for r in rows:
        if "error" in r:
            print(f"  {r['system']:20} ERROR {r['error']}")
            continue
        goal = f"  goal {r['goal_ratio']:.2f}x {'met' if r['met'] else 'MISSED'}" \
            if "goal_ratio" in r else ""
        ratio = f"{r['ratio_min']:5.2f}x ({r['ratio_median']:.2f}x)" if "ratio_min" in r else ""
        print(f"  {r['system']:20} {r['cpu_us_per_chunk_min']:7.2f} "
              f"({r['cpu_us_per_chunk_median']:.2f})  {ratio}{goal}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke mode: N = 200, 2 repetitions")
    ap.add_argument("--n", type=int, help="text deltas per response (default 2,000)")
    ap.add_argument("--reps", type=int, help="timed repetitions (default 7)")
    ap.add_argument("--systems", nargs="+", choices=SYSTEMS, help="some of the systems, "
                    "each with its floor (default: all)")
    ap.add_argument("--pause", type=float, default=0.0, help="seconds the server waits "
                    "before each write (default 0: as fast as it can)")
    ap.add_argument("--warm", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child", choices=SYSTEMS, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    n = args.n or (200 if args.quick else 2000)
    reps = args.reps or (2 if args.quick else 7)
    warm = args.warm if args.warm is not None else (1 if args.quick else WARM)
    if args.child:
        _child(args.child, args.port, n, reps, warm)
        return
    systems: tuple[str, ...] = SYSTEMS
    if args.systems:  # the floors first, so each ratio has its floor
        wanted = {s: None for a in args.systems for s in (FLOORS.get(a, "floor"), a)}
        systems = tuple(sorted(wanted, key=lambda s: not s.startswith("floor")))
    rows = run(n, reps, warm, systems, args.pause)
    print_rows(rows)
    print(json.dumps({"workload": "W5", "n": n, "reps": reps, "pause": args.pause,
                      "results": rows}))


if __name__ == "__main__":
    main()
