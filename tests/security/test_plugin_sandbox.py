"""Plugin code in the sandbox, through the five real services as they ship (issue 18 item 4): a hook
and a function handler that read env secrets, another process's /proc/<pid>/environ and the SQLite
file, call os._exit, busy-loop and sleep 10 s are refused or bounded; the kernel stays up, other
sessions' turns go on within their own time, and the faults are counted."""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from covel_cli.launcher import SERVICES
from shared.grpc_client import check_health, open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_struct, to_struct
from tests.conftest import SHIPPED_SANDBOX
from tests.e2e.conftest import minimal_session, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
ATTACKER = "sandbox-attacker"
SECRET = "sk-test-never-to-be-seen"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def services(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("covel-sandbox")
    async with running_services(data_dir, plugin_dirs=(REPO_ROOT / "tests" / "fixtures" / "sandbox",), observable_sandbox=False,
                                extra_env={**SHIPPED_SANDBOX, "COVEL_TEST_GATEWAY_SECRET": SECRET}) as group:
        yield group


async def new_session(stub, settings: dict | None = None, plugins: tuple[str, ...] = (ATTACKER,)) -> str:
    request = minimal_session(requested_plugins=list(plugins), approved_plugins=list(plugins),
                              plugin_settings={ATTACKER: to_struct(settings or {})} if ATTACKER in plugins else {})
    return (await stub.CreateSession(request)).session.id


async def play(stub, session_id: str) -> tuple[list, float]:
    started = time.monotonic()
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text="I look around.")])
    events = [event async for event in stub.SubmitActions(request)]
    return events, time.monotonic() - started


def turn_start_trace(events) -> list:
    return [e.hook for e in events if e.WhichOneof("event") == "hook" and e.hook.event == "TurnStart"
            and e.hook.handler_plugin_id == ATTACKER]


def probe_result(events):
    turn = events[-1].turn_completed
    return next(r for r in turn.runtime_results if r.runtime_id == f"{ATTACKER}/probe")


def attack_settings(services, **attacks: str) -> dict:
    return {**attacks, "targetPid": services.processes["gateway"].pid, "database": str(services.data_dir / "covel.db")}


def check_observation(seen: dict) -> None:
    assert seen["covelEnv"] == [], "no COVEL_* variable reaches plugin code"
    assert seen["target"] in ("FileNotFoundError", "PermissionError"), "the gateway's environment is out of reach"
    assert seen["othersWithSecrets"] == []
    assert seen["database"] in ("FileNotFoundError", "PermissionError"), "the SQLite file is out of reach"
    if os.geteuid() == 0:
        assert seen["uid"] == 65534
    assert seen["pid"] == 1, "the worker is alone in its PID namespace (this kernel allows one)"


async def all_serving(services) -> bool:
    return all([await check_health(services.addrs[name], timeout_s=2.0, security=services.security(name)) == "SERVING" for name in SERVICES])


async def test_a_hook_and_a_handler_see_no_secret_no_other_process_and_no_database(services) -> None:
    assert (services.data_dir / "covel.db").exists()
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        events, _ = await play(stub, await new_session(stub, attack_settings(services, hook="observe")))
        turn = events[-1].turn_completed
        assert turn.status == store_pb2.TURN_STATUS_ABORTED
        check_observation(json.loads(turn.abort_reason))
        events, _ = await play(stub, await new_session(stub, attack_settings(services, function="observe")))
        result = probe_result(events)
        assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, result.reason
        check_observation(from_struct(result.output))


async def test_os_exit_in_a_hook_or_a_handler_fails_that_call_only_and_counts_as_a_fault(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = await new_session(stub, {"hook": "exit"})
        for _ in range(3):
            events, _ = await play(stub, session)
            assert events[-1].turn_completed.status == store_pb2.TURN_STATUS_ABORTED, "a guard that fails blocks (fail closed)"
            statuses = [(entry.status, entry.message) for entry in turn_start_trace(events)]
            assert any(status == resources_pb2.HOOK_STATUS_ERROR and "exited (exit code 3)" in message for status, message in statuses), statuses
        paused = await stub.ListPausedPlugins(scheduler_pb2.ListPausedPluginsRequest(session_id=session))
        assert [plugin.plugin_id for plugin in paused.plugins] == [ATTACKER], "three faults pause the plugin for the session"
        events, _ = await play(stub, await new_session(stub, {"function": "exit"}))
        result = probe_result(events)
        assert result.status == resources_pb2.RUNTIME_STATUS_FAILED and "exited (exit code 3)" in result.reason
        assert events[-1].turn_completed.status == store_pb2.TURN_STATUS_COMMITTED
        # The services stay up, and the plugin's next call gets a fresh worker.
        assert await all_serving(services)
        events, _ = await play(stub, await new_session(stub, {}))
        assert events[-1].turn_completed.status == store_pb2.TURN_STATUS_COMMITTED
    log = (services.log_dir / "scheduler.log").read_text()
    assert any('"sandbox.worker_fault"' in line and ATTACKER in line and "exit code 3" in line for line in log.splitlines())


@pytest.mark.parametrize("attack", ["spin", "sleep", "spin-async"])
async def test_an_overrunning_hook_is_stopped_at_its_timeout_and_other_sessions_go_on(services, attack: str) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        # A sync overrun runs in a thread of the plugin's worker: another session of the same plugin goes on
        # beside it. An async one holds that worker's loop, so the other session here has no attacker.
        other_plugins = (ATTACKER,) if attack != "spin-async" else ()
        attacked, other = await new_session(stub, {"hook": attack}), await new_session(stub, {}, other_plugins)
        slow = asyncio.ensure_future(play(stub, attacked))
        await asyncio.sleep(0.3)
        events, took = await play(stub, other)
        assert events[-1].turn_completed.status == store_pb2.TURN_STATUS_COMMITTED
        assert took < 3.0 and not slow.done(), f"the other session's turn took {took:.2f} s"
        events, took = await slow
        assert events[-1].turn_completed.status == store_pb2.TURN_STATUS_ABORTED
        assert took < 5.0, f"the attacked turn took {took:.2f} s: its hook was not stopped at 1000 ms"
        assert resources_pb2.HOOK_STATUS_TIMEOUT in [entry.status for entry in turn_start_trace(events)]
        # The next turn of the attacked session is not held up by the 10 s of the last one.
        events, took = await play(stub, attacked)
        assert took < 5.0 and events[-1].turn_completed.status == store_pb2.TURN_STATUS_ABORTED


@pytest.mark.parametrize("attack", ["spin", "sleep", "spin-async"])
async def test_an_overrunning_handler_fails_at_its_timeout_and_other_sessions_go_on(services, attack: str) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        attacked, other = await new_session(stub, {"function": attack}), await new_session(stub, {}, ())
        slow = asyncio.ensure_future(play(stub, attacked))
        await asyncio.sleep(0.3)
        events, took = await play(stub, other)
        assert events[-1].turn_completed.status == store_pb2.TURN_STATUS_COMMITTED and took < 3.0, took
        events, took = await slow
        result = probe_result(events)
        assert result.status == resources_pb2.RUNTIME_STATUS_FAILED and "did not finish within 1500 ms" in result.reason
        assert took < 6.0, f"the attacked turn took {took:.2f} s"
        assert events[-1].turn_completed.status == store_pb2.TURN_STATUS_COMMITTED
        assert await all_serving(services)


async def test_the_sandbox_s_isolation_is_logged(services) -> None:
    lines = [json.loads(line) for line in (services.log_dir / "hooks.log").read_text().splitlines() if '"sandbox.isolation"' in line]
    assert lines and lines[0]["namespaces"].startswith("pid+mount")
    assert str(services.data_dir.resolve()) in lines[0]["hidden"]
