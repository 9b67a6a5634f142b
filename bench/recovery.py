"""Recovery after a crash: each service killed (kill -9) in the middle of play and started again.

`python -m bench.recovery`: five service processes with the scripted model (its replies to "slowly" take
2.5 s, so a kill lands inside a turn). For each service in turn, 8 sessions play back to back as clients
do (every submit re-sent with its idempotency key while the error says it may pass, docs/retries.md);
one of them is in its slow turn when the service is killed; the service is started again at once, as
Kubernetes or `covel up` would. Reported per service: how long it took to serve again, the stuck window
(from serving again until the slow session's retried turn started) and the submits lost (never
committed within 60 s; should be 0). `--postgres` runs the store on the machine's PostgreSQL;
`--lease-ttl-ms 30000 --restart-grace-ms 600000` measures the settings of before. Writes
bench/results/recovery.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import time
import uuid

import grpc

from bench.common import create_session, running_services, table, write_result
from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel_cli.launcher import SERVICES
from shared.errors import retry_after_ms
from shared.grpc_client import open_channel

SLOW_TEXT = "I walk on, slowly."
SCRIPT = "rules:\n  - match: slowly\n    reply: {json: {segments: [{kind: narration, text: The fog thins.}]}, delay_ms: 2500}\n"
PLAYERS = 8
GIVE_UP_S = 60.0
RETRIED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED)


async def submit(stub, session_id: str, text: str) -> float | None:
    """One submit re-sent until its turn commits: when (monotonic) the committed attempt's turn started; None: lost."""
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, idempotency_key=uuid.uuid4().hex,
                                                 actions=[resources_pb2.PlayerAction(text=text)])
    give_up = time.monotonic() + GIVE_UP_S
    while time.monotonic() < give_up:
        started = None
        try:
            async for event in stub.SubmitActions(request, timeout=30):
                if event.WhichOneof("event") == "turn_started" and started is None:
                    started = time.monotonic()
                if event.WhichOneof("event") == "turn_completed" and event.turn_completed.status == resources_pb2.TURN_STATUS_COMMITTED:
                    return started or time.monotonic()
        except grpc.aio.AioRpcError as error:
            if error.code() not in RETRIED:
                return None
            await asyncio.sleep((retry_after_ms(error) or 200) / 1000)
    return None


async def kill_during_play(group, stubs, sessions: list[str], victim: str) -> dict:
    stop = asyncio.Event()
    lost = [0]

    async def player(index: int) -> None:
        step = 0
        while not stop.is_set():
            if await submit(stubs[index], sessions[index], f"Player {index} looks around, step {step}.") is None:
                lost[0] += 1
            step += 1

    players = [asyncio.create_task(player(index)) for index in range(1, len(sessions))]
    slow = asyncio.create_task(submit(stubs[0], sessions[0], SLOW_TEXT))
    await asyncio.sleep(1.0)  # the slow turn holds its lease and waits for the model
    os.kill(group.processes[victim].pid, signal.SIGKILL)
    killed = time.monotonic()
    await group.restart(victim)
    back = time.monotonic()
    started = await slow
    await asyncio.sleep(1.0)  # the others play on a little with the service back
    stop.set()
    await asyncio.gather(*players)
    return {"service": victim, "restart_s": back - killed, "stuck_s": None if started is None else max(0.0, started - back),
            "lost": lost[0] + (started is None)}


async def measure(postgres: bool, env: dict[str, str]) -> dict:
    schema = ""
    if postgres:
        schema = f"covel_bench_{uuid.uuid4().hex[:10]}"
        env = {**env, "COVEL_STORE_DATABASE_URL": os.environ.get("COVEL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"),
               "COVEL_STORE_DATABASE_SCHEMA": schema}
    rows = []
    async with running_services(extra_env=env) as group:
        script = group.data_dir / "recovery-script.yaml"
        script.write_text(SCRIPT)
        group.extra_env["COVEL_GATEWAY_SCRIPT"] = str(script)
        await group.restart("gateway")
        channels = [open_channel(group.addrs["scheduler"]) for _ in range(PLAYERS)]
        try:
            stubs = [scheduler_pb2_grpc.SchedulerStub(channel) for channel in channels]
            for victim in SERVICES:
                sessions = [(await create_session(stub)).id for stub in stubs]
                rows.append(await kill_during_play(group, stubs, sessions, victim))
        finally:
            for channel in channels:
                await channel.close()
    if schema:
        from tests.store.conftest import drop_schema

        drop_schema(schema)
    return {"backend": "postgres" if postgres else "sqlite", "cores": os.cpu_count(), "load_average_at_end": os.getloadavg()[0],
            "settings": env, "rows": rows, "longest_stuck_s": max((r["stuck_s"] or 0.0) for r in rows),
            "lost": sum(r["lost"] for r in rows)}


def render(result: dict) -> str:
    return table(["service killed", "serving again after s", "stuck window s", "submits lost"],
                 [[r["service"], r["restart_s"], r["stuck_s"] if r["stuck_s"] is not None else "never", r["lost"]] for r in result["rows"]])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--postgres", action="store_true", help="the store on PostgreSQL (COVEL_TEST_POSTGRES_URL)")
    parser.add_argument("--lease-ttl-ms", type=int, help="COVEL_SCHEDULER_LEASE_TTL_MS (default: the setting's)")
    parser.add_argument("--restart-grace-ms", type=int, help="COVEL_STORE_RESTART_LEASE_GRACE_MS (default: the setting's)")
    args = parser.parse_args(argv)
    env = {}
    if args.lease_ttl_ms:
        env["COVEL_SCHEDULER_LEASE_TTL_MS"] = str(args.lease_ttl_ms)
    if args.restart_grace_ms:
        env["COVEL_STORE_RESTART_LEASE_GRACE_MS"] = str(args.restart_grace_ms)
    result = asyncio.run(measure(args.postgres, env))
    write_result("recovery", result)
    print(f"each service killed mid-turn and started again, {PLAYERS} sessions playing, store on {result['backend']}, "
          f"{result['cores']} cores (load {result['load_average_at_end']:.1f}){', settings ' + str(env) if env else ''}:")
    print(render(result))
    print(f"longest stuck window {result['longest_stuck_s']:.2f} s; submits lost {result['lost']}")
    return result


if __name__ == "__main__":
    main()
