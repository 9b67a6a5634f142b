"""A stranger's session and a missing one answer alike, in time too: `python -m bench.session_privacy --pairs 400`.

The scheduler with a users file (docs/security.md, Session owners): alice creates a session, then bob asks GetSession
for it and for an id that does not exist, in pairs whose order alternates; both answer NOT_FOUND. Prints the median
and mean of (stranger - missing) and in how many pairs the stranger's answer was the slower (half of them when the
two cost the same). Writes bench/results/session_privacy.json.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import grpc

from bench.common import write_result
from covel.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc
from covel_cli.launcher import ServiceGroup, free_port_addrs
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT

OPERATOR_TOKEN = "bench-operator-token"
USERS = "users:\n  - principal: alice\n    token: alice-token\n  - principal: bob\n    token: bob-token\n"
MISSING_ID = "00000000-0000-0000-0000-000000000000"
WARMUP = 50


async def _asked(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str) -> float:
    started = time.perf_counter()
    try:
        await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id=session_id), timeout=10)
    except grpc.aio.AioRpcError as error:
        if error.code() != grpc.StatusCode.NOT_FOUND:
            raise
    else:
        raise RuntimeError(f"bob could read session {session_id}")
    return time.perf_counter() - started


async def measure(pairs: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="cvp") as folder:
        root = Path(folder)
        (root / "users.yaml").write_text(USERS)
        env = {"COVEL_PLUGIN_DIRS": str(REPO_ROOT / "plugins"), "COVEL_API_USERS_FILE": str(root / "users.yaml"),
               "COVEL_API_TOKEN": OPERATOR_TOKEN, "COVEL_LOG_LEVEL": "warning"}
        group = ServiceGroup(free_port_addrs(), root / "data", extra_env=env)
        await group.start()
        try:
            addr = group.addrs["scheduler"]
            async with open_channel(addr, bearer_token="alice-token") as a, open_channel(addr, bearer_token="bob-token") as b:
                alice, bob = scheduler_pb2_grpc.SchedulerStub(a), scheduler_pb2_grpc.SchedulerStub(b)
                for _ in range(100):
                    try:
                        session = (await alice.CreateSession(scheduler_pb2.CreateSessionRequest(), timeout=30)).session
                        break
                    except grpc.aio.AioRpcError as error:
                        if error.code() != grpc.StatusCode.UNAVAILABLE:
                            raise
                        await asyncio.sleep(0.2)
                for _ in range(WARMUP):
                    await _asked(bob, session.id)
                    await _asked(bob, MISSING_ID)
                diffs, slower = [], 0
                for index in range(pairs):
                    order = (session.id, MISSING_ID) if index % 2 else (MISSING_ID, session.id)
                    times = {asked: await _asked(bob, asked) for asked in order}
                    diffs.append((times[session.id] - times[MISSING_ID]) * 1000)
                    slower += times[session.id] > times[MISSING_ID]
        finally:
            await group.stop()
    return {"pairs": pairs, "median_ms": statistics.median(diffs), "mean_ms": statistics.mean(diffs), "stranger_slower": slower}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=400)
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args.pairs))
    print(f"GetSession as a stranger against a missing id, {result['pairs']} pairs: stranger - missing median "
          f"{result['median_ms']:+.3f} ms, mean {result['mean_ms']:+.3f} ms; the stranger's answer slower in "
          f"{result['stranger_slower']} of {result['pairs']} (half when they cost the same)")
    write_result("session_privacy", result)
    return result


if __name__ == "__main__":
    main()
