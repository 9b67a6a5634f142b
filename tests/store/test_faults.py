"""Faults: a store killed mid-commit (kill -9), PostgreSQL restarted during a run, two schedulers on one session."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import grpc
import pytest

from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.store_pages import all_messages, all_turns
from services.store.settings import StoreSettings
from shared.grpc_client import check_health
from shared.grpc_server import LIVENESS
from tests.conftest import POSTGRES_URL, free_addr
from tests.store.conftest import BACKENDS, StoreUnderTest, drop_schema, postgres_reachable
from tests.store.helpers import acquire, data_proposal, new_session, story_proposal, story_result, turn_for
from tests.support.identities import bare_channel_as, issued, service_tls
from tests.support.postgres_cluster import throwaway_cluster, why_unavailable

ROOT = Path(__file__).resolve().parents[2]
PROPOSALS_PER_TURN = 20


class StoreProcess:
    """`python -m services.store` as a child process on a free port."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None
        self.addr = ""

    async def start(self) -> store_pb2_grpc.TransactionalStoreStub:
        self.addr = free_addr()
        env = {**os.environ, **self.env, **issued("store").env(), "COVEL_STORE_ADDR": self.addr, "COVEL_LOG_LEVEL": "warning"}
        self.process = subprocess.Popen([sys.executable, "-m", "services.store"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.channel = bare_channel_as(self.addr, "scheduler")
        stub = store_pb2_grpc.TransactionalStoreStub(self.channel)
        deadline = time.monotonic() + 60  # a cold start (imports, migrations) on a loaded machine
        while True:
            try:
                await stub.GetSession(store_pb2.GetSessionRequest(session_id="probe"), timeout=1)
            except grpc.aio.AioRpcError as error:
                if error.code() == grpc.StatusCode.NOT_FOUND:
                    return stub
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"store process did not start: {error.code()}") from error
                await asyncio.sleep(0.1)

    async def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    async def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        await self.channel.close()


def turn_keys(turn_number: int) -> list[str]:
    return [f"t{turn_number}-{index}" for index in range(PROPOSALS_PER_TURN)]


async def commit_loop(stub, session_id: str, start: int, stop_after: int) -> None:
    """Commit turns start, start+1, ... (each: a story + PROPOSALS_PER_TURN data writes tagged with the turn)."""
    for number in range(start, start + stop_after):
        reply = await acquire(stub, session_id, ttl_ms=500, wait_ms=5_000, idempotency_key=f"turn-{number}")
        if reply.HasField("existing_turn"):
            continue
        lease = reply.lease
        proposals = [story_proposal(f"story {number}")]
        proposals += [data_proposal("log", key, {"turn": number}, runtime_id="recorder") for key in turn_keys(number)]
        turn = turn_for(lease, idempotency_key=f"turn-{number}", player_message=f"action {number}", runtime_results=[story_result()])
        await stub.CommitTurn(
            store_pb2.CommitTurnRequest(session_id=session_id, lease_id=lease.lease_id, turn=turn, proposals=proposals, release_lease=True)
        )


async def check_whole_or_absent(stub, session_id: str) -> int:
    turns, messages = await all_turns(stub, session_id), await all_messages(stub, session_id)
    entries = (await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, namespace="log"))).entries
    session = (await stub.GetSession(store_pb2.GetSessionRequest(session_id=session_id))).session
    committed = {turn.idempotency_key for turn in turns if turn.status == store_pb2.TURN_STATUS_COMMITTED}
    assert len(committed) == len(turns), "only whole committed turns are recorded"
    assert [message.seq for message in messages] == list(range(1, 2 * len(turns) + 1))
    by_turn: dict[str, set[str]] = {}
    for entry in entries:
        by_turn.setdefault(entry.turn_id, set()).add(entry.key)
    for turn in turns:
        number = int(turn.idempotency_key.split("-")[1])
        assert by_turn.pop(turn.id, set()) == set(turn_keys(number)), f"turn {number} is partial"
        assert [message.text for message in turn.messages] == [f"action {number}", f"story {number}"]
    assert by_turn == {}, "plugin data of a turn that was not recorded"
    assert session.completed_player_turns == len(turns)
    return len(turns)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_kill_9_during_a_commit_loop_leaves_whole_turns_or_nothing(backend, tmp_path):
    if backend == "postgres" and (reason := postgres_reachable()):
        pytest.skip(reason)
    env = {"COVEL_DATA_DIR": str(tmp_path)}
    schema = ""
    if backend == "postgres":
        schema = f"covel_test_{uuid.uuid4().hex[:12]}"
        env |= {"COVEL_STORE_DATABASE_URL": POSTGRES_URL, "COVEL_STORE_DATABASE_SCHEMA": schema}
    store = StoreProcess(env)
    try:
        stub = await store.start()
        session_id = (await new_session(stub)).id
        next_turn = 0
        for round_number, run_for_s in enumerate((0.4, 0.25, 0.6)):
            loop = asyncio.create_task(commit_loop(stub, session_id, next_turn, 10_000))
            await asyncio.sleep(run_for_s)
            await store.kill()  # mid-commit, most likely: the loop commits back to back
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await loop
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
            await store.channel.close()
            stub = await store.start()
            recorded = await check_whole_or_absent(stub, session_id)
            assert recorded > 0 or round_number == 0
            next_turn += 10_000
        # After the restarts the session still works (the dead holder's lease lapses).
        await commit_loop(stub, session_id, next_turn, 2)
        assert await check_whole_or_absent(stub, session_id) >= 2
    finally:
        await store.stop()
        if schema:
            drop_schema(schema)


@pytest.mark.postgres
@pytest.mark.skipif(why_unavailable() is not None, reason=str(why_unavailable()))
async def test_postgres_restart_during_a_run_the_store_reconnects(tmp_path):
    # A cluster of its own: the machine's shared server is never restarted.
    with throwaway_cluster() as cluster:
        settings = StoreSettings(data_dir=tmp_path, store_database_url=cluster.url, store_pool_size=4)
        store = StoreUnderTest(settings)
        await store.start()
        try:
            await _commits_survive_a_restart(store.stub, cluster)
        finally:
            await store.stop()


async def _commits_survive_a_restart(stub, cluster) -> None:
    session_id = (await new_session(stub)).id
    await commit_loop(stub, session_id, 0, 3)
    started = time.monotonic()
    restart = await asyncio.create_subprocess_exec(
        *cluster.restart_command(), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    unavailable = 0
    committed_after = 0
    number = 100
    while committed_after < 3:
        assert time.monotonic() - started < 25, f"no recovery in 25 s ({unavailable} UNAVAILABLE answers)"
        try:
            await commit_loop(stub, session_id, number, 1)
            if restart.returncode is not None:
                committed_after += 1
            number += 1
        except grpc.aio.AioRpcError as error:
            # During the restart: retryable answers only, never INTERNAL.
            assert error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED), error.details()
            unavailable += 1
            await asyncio.sleep(0.2)
        if restart.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(restart.wait(), 0.05)
    _, errors = await restart.communicate()
    assert restart.returncode == 0, errors.decode()
    print(f"PostgreSQL restart: {unavailable} retryable answers, recovered after {time.monotonic() - started:.1f} s")
    assert await check_whole_or_absent(stub, session_id) >= 6


async def test_two_schedulers_submit_to_one_session_none_lost_or_doubled(store):
    """Two independent clients, each with its own channel, racing for the lease with waits."""
    turns_each = 8
    channels = [bare_channel_as(store.settings.store_addr, "scheduler") for _ in range(2)]
    stubs = [store_pb2_grpc.TransactionalStoreStub(channel) for channel in channels]
    session_id = (await new_session(stubs[0])).id

    async def scheduler(name: str, stub) -> None:
        for number in range(turns_each):
            key = f"{name}-{number}"
            for _attempt in range(2):  # every submit is retried once: the retry must not run twice
                reply = await acquire(stub, session_id, holder=name, ttl_ms=5_000, wait_ms=30_000, idempotency_key=key)
                if reply.HasField("existing_turn"):
                    continue
                lease = reply.lease
                turn = turn_for(lease, idempotency_key=key, player_message=f"action {key}", runtime_results=[story_result()])
                await stub.CommitTurn(store_pb2.CommitTurnRequest(
                    session_id=session_id, lease_id=lease.lease_id, turn=turn,
                    proposals=[story_proposal(f"story {key}"), data_proposal("log", key, key)], release_lease=True,
                ))

    try:
        await asyncio.gather(scheduler("a", stubs[0]), scheduler("b", stubs[1]))
        turns = (await stubs[1].ListTurns(store_pb2.ListTurnsRequest(session_id=session_id))).turns
        keys = [turn.idempotency_key for turn in turns]
        assert sorted(keys) == sorted(f"{name}-{number}" for name in "ab" for number in range(turns_each))
        assert [turn.logical_turn for turn in turns] == list(range(1, 2 * turns_each + 1))
        messages = (await stubs[0].ListMessages(store_pb2.ListMessagesRequest(session_id=session_id))).messages
        assert [message.seq for message in messages] == list(range(1, 4 * turns_each + 1))
        entries = (await stubs[0].ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id))).entries
        assert len(entries) == 2 * turns_each
        session = (await stubs[0].GetSession(store_pb2.GetSessionRequest(session_id=session_id))).session
        assert session.completed_player_turns == 2 * turns_each
    finally:
        for channel in channels:
            await channel.close()


async def test_readiness_follows_the_database_and_liveness_does_not(tmp_path):
    """PostgreSQL stopped: the store's health turns NOT_SERVING (its pod leaves the Service), its liveness stays
    SERVING (no restart loop); started again: SERVING again. A throwaway cluster, never the shared server."""
    with throwaway_cluster() as cluster:
        settings = StoreSettings(data_dir=tmp_path, store_database_url=cluster.url, store_pool_size=2, store_readiness_interval_s=0.2)
        store = StoreUnderTest(settings)
        await store.start()
        addr, security = store.settings.store_addr, StoreSettings(**service_tls("scheduler"))
        try:
            assert await check_health(addr, security=security) == "SERVING"
            subprocess.run(cluster.pg_ctl("stop", "-w", "-m", "fast"), check=True, capture_output=True)
            assert await _health_becomes(addr, security, "NOT_SERVING")
            assert await check_health(addr, LIVENESS, security=security) == "SERVING"
            subprocess.run(cluster.pg_ctl("start", "-w", "-l", str(cluster.data_dir / "server.log"), "-o", cluster._options()),
                           check=True, capture_output=True)
            assert await _health_becomes(addr, security, "SERVING")
        finally:
            await store.stop()


async def _health_becomes(addr: str, security, status: str, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if await check_health(addr, security=security) == status:
            return True
        await asyncio.sleep(0.1)
    return False
