"""provide_lifespan and provide_environment through the five real services: lifespan-probe's lifespans are
entered in its sandbox worker when the hooks service loads it, left for the old load on a Reload and for the
last when the service stops; environment-probe's provide_environment gives each session its variables and its
own workspace folder, which its code writes from a worker of the sandbox as it ships (tests/fixtures/plugins)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
from covel.scheduler.v1 import scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from services.hooks.common.workspaces import workspace_root
from shared.grpc_client import open_channel
from tests.e2e.conftest import running_services
from tests.e2e.test_event_keys import new_session, submit

pytestmark = pytest.mark.asyncio(loop_scope="session")


def lifespan_records(data_dir: Path) -> list[dict]:
    path = data_dir / "lifespan-probe.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


async def until(data_dir: Path, predicate, timeout_s: float = 15.0) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while not predicate(found := lifespan_records(data_dir)):
        assert time.monotonic() < deadline, found
        await asyncio.sleep(0.1)
    return found


def moves(records: list[dict], load: str) -> list[tuple[str, str]]:
    return [(r["event"], r.get("lifespan") or r.get("stage")) for r in records if r["load"] == load]


async def test_lifespans_are_entered_at_load_and_left_on_reload_and_at_shutdown(tmp_path) -> None:
    async with running_services(tmp_path) as group:
        # A community plugin: its code loads (its lifespans entered) once a session approved it.
        assert lifespan_records(tmp_path) == []
        async with open_channel(group.addrs["scheduler"]) as channel:
            await new_session(scheduler_pb2_grpc.SchedulerStub(channel), "lifespan-probe")
        first = await until(tmp_path, lambda found: len(found) >= 3)
        load = first[0]["load"]
        # In the plugin's sandbox worker, not in the hooks service's process.
        assert {r["pid"] for r in first} != {group.processes["hooks"].pid}
        assert moves(first, load) == [("enter", "lamp"), ("on_error", "provide_lifespan"), ("enter", "hearth")]
        async with open_channel(group.addrs["hooks"], security=group.security("hooks")) as channel:
            await hooks_pb2_grpc.HookDispatcherStub(channel).Reload(hooks_pb2.ReloadRequest(), timeout=60)
        found = await until(tmp_path, lambda found: moves(found, load)[-1:] == [("exit", "lamp")])
        assert moves(found, load)[3:] == [("exit", "hearth"), ("exit", "lamp")]
        reloaded = next(r["load"] for r in found if r["load"] != load)
        assert moves(found, reloaded) == [("enter", "lamp"), ("on_error", "provide_lifespan"), ("enter", "hearth")]
    # The group stopped the hooks service gracefully (SIGTERM): the last load's lifespans were left before its worker went.
    assert moves(lifespan_records(tmp_path), reloaded)[3:] == [("exit", "hearth"), ("exit", "lamp")]


async def test_each_session_gets_its_environment_and_its_own_workspace_in_the_shipped_sandbox(tmp_path) -> None:
    async with running_services(tmp_path, observable_sandbox=False) as group:
        async with open_channel(group.addrs["scheduler"]) as channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            sessions = [await new_session(stub, "environment-probe") for _ in range(2)]
            for session in sessions:
                turn = (await submit(stub, session.id, "I look around."))[-1].turn_completed
                assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    root = workspace_root(tmp_path, "environment-probe")
    for session in sessions:
        folder = root / session.id
        expected = {"PROBE_SESSION": session.id, "PROBE_GREETING": "hello"}
        assert (folder / "asked.txt").read_text() == session.id
        assert json.loads((folder / "notes" / "handler.json").read_text()) == expected
        assert json.loads((folder / "notes" / "hookspec.json").read_text()) == expected
    assert sorted(path.name for path in root.iterdir()) == sorted(session.id for session in sessions)
