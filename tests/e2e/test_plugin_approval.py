"""The trust gate through the five real services: a community plugin the player has not approved
(tests/fixtures/plugins/approval-probe: a hook, a tool, a function with a guard, an agent and a
detached job) runs none of its code; the turn record lists its runtimes as skipped with why; once
approved with SetPluginApprovals, the next turn runs them all."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli.launcher import ServiceGroup, free_port_addrs
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_value
from tests.e2e.conftest import TEST_PLUGIN_DIR, minimal_session
from tests.telemetry.scrape import metric_value, scrape

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "approval-probe"
GATED = ["approval-probe/counter", "approval-probe/thinker", "approval-probe/later"]
APPROVAL = "approval-required: plugin `approval-probe` is a community plugin; approve it with SetPluginApprovals"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def gated(tmp_path_factory):
    """The services with the gateway's /metrics on, to count model calls."""
    metrics_port = _free_port()
    env = {
        "COVEL_PLUGIN_DIRS": f"{REPO_ROOT / 'plugins'}:{TEST_PLUGIN_DIR}",
        "COVEL_LOG_LEVEL": "info",
        "COVEL_GATEWAY_METRICS_PORT": str(metrics_port),
    }
    group = ServiceGroup(free_port_addrs(), tmp_path_factory.mktemp("approval"), extra_env=env)
    try:
        await group.start()
        yield group, metrics_port
    finally:
        await group.stop()


def plugin_model_calls(metrics_port: int) -> float:
    return metric_value(scrape(metrics_port), "covel_model_call_duration_seconds_count", slot="plugin")


def notes(data_dir: Path, session_id: str) -> list[str]:
    """What the probe's hook and tool (in the hooks service) and guard (in the scheduler, no session) wrote."""
    path = data_dir / "approval-probe.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [record["what"] for record in map(json.loads, lines) if record["session"] in (session_id, None)]


async def plugin_data(store, session_id: str) -> dict:
    entries = (await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id=PROBE, namespace="ran"))).entries
    return {entry.key: from_value(entry.value) for entry in entries}


async def submit(stub, session_id: str, text: str) -> store_pb2.Turn:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(text=text)])
    return [event async for event in stub.SubmitActions(request)][-1].turn_completed


async def jobs_done(store, session_id: str, timeout_s: float = 20.0) -> list[store_pb2.DetachedJob]:
    for _ in range(int(timeout_s / 0.1)):
        jobs = list((await store.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(session_id=session_id))).jobs)
        if jobs and all(job.status not in ("queued", "running") for job in jobs):
            return jobs
        await asyncio.sleep(0.1)
    raise AssertionError(f"the detached job did not finish: {jobs}")


async def test_an_unapproved_community_plugin_runs_no_code_until_approved(gated) -> None:
    group, metrics_port = gated
    async with open_channel(group.addrs["scheduler"]) as channel, group.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        store = store_pb2_grpc.TransactionalStoreStub(store_channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=[PROBE]))).session
        assert PROBE in session.active_plugins and PROBE not in session.approved_plugins, "it stays in the session's set"
        calls_before = plugin_model_calls(metrics_port)

        turn = await submit(stub, session.id, "I wait by the door.")
        assert turn.status == store_pb2.TURN_STATUS_COMMITTED
        results = {result.runtime_id: result for result in turn.runtime_results}
        assert results["narrator"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
        assert {runtime: (results[runtime].status, results[runtime].reason) for runtime in GATED} == {
            runtime: (resources_pb2.RUNTIME_STATUS_SKIPPED, APPROVAL) for runtime in GATED}
        assert not [entry for entry in turn.hook_trace if entry.handler_plugin_id == PROBE]
        # Nothing of it ran: no plugin data (handler, detached job), no hook, tool or guard, no model call.
        assert await plugin_data(store, session.id) == {}
        assert notes(group.data_dir, session.id) == []
        assert plugin_model_calls(metrics_port) == calls_before
        assert list((await store.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(session_id=session.id))).jobs) == []
        with pytest.raises(grpc.aio.AioRpcError) as manual:
            [event async for event in stub.RunManual(scheduler_pb2.RunManualRequest(session_id=session.id, runtime_id=GATED[0]))]
        assert manual.value.code() == grpc.StatusCode.FAILED_PRECONDITION and APPROVAL in manual.value.details()
        listed = await stub.GetSessionPlugins(scheduler_pb2.GetSessionPluginsRequest(session_id=session.id))
        assert PROBE not in listed.runnable and [(u.plugin_id, u.code) for u in listed.unavailable] == [(PROBE, resources_pb2.PLUGIN_REJECTION_APPROVAL_REQUIRED)]

        await stub.SetPluginApprovals(scheduler_pb2.SetPluginApprovalsRequest(session_id=session.id, approve=[PROBE]))
        turn = await submit(stub, session.id, "I open the door.")
        assert turn.status == store_pb2.TURN_STATUS_COMMITTED
        results = {result.runtime_id: result for result in turn.runtime_results}
        assert results["approval-probe/counter"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, results["approval-probe/counter"].reason
        assert results["approval-probe/thinker"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, results["approval-probe/thinker"].reason
        assert [job.runtime_id for job in await jobs_done(store, session.id)] == ["approval-probe/later"]
        assert await plugin_data(store, session.id) == {"handler": True, "detached": True}
        assert set(notes(group.data_dir, session.id)) == {"guard", "hook", "tool"}, "the detached job runs TurnStart too"
        assert plugin_model_calls(metrics_port) > calls_before
        listed = await stub.GetSessionPlugins(scheduler_pb2.GetSessionPluginsRequest(session_id=session.id))
        assert PROBE in listed.runnable and not listed.unavailable


async def test_an_unapproved_setup_runtime_is_skipped_and_runs_as_late_setup_once_approved(gated) -> None:
    group, _ = gated
    intro = "setup-probe/intro"
    async with open_channel(group.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=["setup-probe"]))).session
        turn = await submit(stub, session.id, "I look around.")
        assert turn.status == store_pb2.TURN_STATUS_COMMITTED
        results = {result.runtime_id: result for result in turn.runtime_results}
        assert results[intro].status == resources_pb2.RUNTIME_STATUS_SKIPPED and results[intro].reason.startswith("approval-required: plugin `setup-probe`")
        await stub.SetPluginApprovals(scheduler_pb2.SetPluginApprovalsRequest(session_id=session.id, approve=["setup-probe"]))
        turn = await submit(stub, session.id, "I look again.")
        results = {result.runtime_id: result for result in turn.runtime_results}
        assert results[intro].status == resources_pb2.RUNTIME_STATUS_SUCCESS, results[intro].reason
