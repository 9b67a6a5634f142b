"""The cost of the split: the same turn with the five services as five processes and in one process.

`python -m bench.split_cost --turns 40`: plays the turn of bench.turn_latency (default plugins,
scripted model, zero latency) in four set-ups, each in a fresh Python process:

- five processes over loopback TCP (what `covel up` runs),
- five processes over unix sockets,
- one process over loopback TCP, one process over unix sockets (covel_cli/in_process.py).

"In one process" means: the five real grpc.aio servers started in one asyncio event loop of
one interpreter, calling each other through gRPC exactly as before (protobuf serialisation,
HTTP/2, a socket per channel); grpcio's Python API has no in-memory channel, so no call is
short-circuited. It removes the process boundary (context switches between processes, five
interpreters competing for two cores), and it also removes parallelism: one process runs on
one core. Writes bench/results/split_cost.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from bench.common import IN_PROCESS, PROCESSES, TCP, UNIX, table, write_result
from shared.settings import REPO_ROOT

SETUPS = [(PROCESSES, TCP), (PROCESSES, UNIX), (IN_PROCESS, TCP), (IN_PROCESS, UNIX)]


def measure_setup(mode: str, transport: str, turns: int, warmup: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "bench.turn_latency", "--json", "--turns", str(turns), "--warmup", str(warmup),
         "--mode", mode, "--transport", transport],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{mode}/{transport} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def render(rows: list[dict]) -> str:
    base = rows[0]["turn_ms"]["p50"]
    return table(
        ["services", "transport", "turn p50 ms", "turn p95 ms", "first text p50 ms", "p50 vs 5 processes/tcp"],
        [[r["mode"], r["transport"], r["turn_ms"]["p50"], r["turn_ms"]["p95"], r["first_story_text_ms"]["p50"],
          f"{(r['turn_ms']['p50'] - base):+.1f} ms ({r['turn_ms']['p50'] / base * 100 - 100:+.0f}%)"] for r in rows],
    )


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args(argv)
    rows = [measure_setup(mode, transport, args.turns, args.warmup) for mode, transport in SETUPS]
    write_result("split_cost", rows)
    print(f"the same turn ({args.turns} turns in one session), five processes vs one process:")
    print(render(rows))
    print("one process = the five real gRPC servers in one asyncio loop; calls still go through gRPC and a socket.")
    return rows


if __name__ == "__main__":
    main()
