"""A session's plugin lifecycle through the five real services: a plugin stopped by a missing
dependency stays in activePlugins and comes back by itself when the dependency does; a requested
plugin rejected for a conflict fails CreateSession (plugin_rejected); the world's requirements
reach the resolver and unmet ones come back with why; command:new fires for a new-session command
only."""

from __future__ import annotations

import grpc
import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.errors import field_violations
from shared.grpc_client import open_channel
from shared.structs import from_value
from tests.e2e.conftest import minimal_session
from tests.e2e.test_event_keys import PROBE as EVENT_KEY_PROBE
from tests.e2e.test_event_keys import of, wait_for

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROVIDER, DEPENDENT, CONTRACT = "approval-probe", "approval-dependent", "approval-probe.work@1"


async def submit(stub, session_id: str, text: str) -> store_pb2.Turn:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(text=text)])
    return [event async for event in stub.SubmitActions(request)][-1].turn_completed


async def test_a_plugin_waiting_for_its_provider_stays_and_comes_back_when_the_provider_is_approved(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        store = store_pb2_grpc.TransactionalStoreStub(store_channel)
        created = await stub.CreateSession(minimal_session(requested_plugins=[DEPENDENT], approved_plugins=[DEPENDENT]))
        session = created.session
        # Its only provider is a community plugin not approved: it waits, recorded with the provider it waits for.
        assert {DEPENDENT, PROVIDER} <= set(session.active_plugins)
        assert [(u.plugin_id, u.code, u.contract) for u in created.unavailable] == [(DEPENDENT, resources_pb2.PLUGIN_REJECTION_APPROVAL_REQUIRED, CONTRACT)]
        assert DEPENDENT not in [r.plugin_id for r in created.rejected]

        turn = await submit(stub, session.id, "I wait.")
        results = {result.runtime_id: result for result in turn.runtime_results}
        follow = results[f"{DEPENDENT}/follow"]
        assert follow.status == resources_pb2.RUNTIME_STATUS_SKIPPED and follow.reason.startswith(f"missing-provider: {CONTRACT} is required")
        assert f"its provider `{PROVIDER}` does not run now: approval-required" in follow.reason
        listed = await stub.GetSessionPlugins(scheduler_pb2.GetSessionPluginsRequest(session_id=session.id))
        assert {(u.plugin_id, u.code, u.contract) for u in listed.unavailable} == {
            (DEPENDENT, resources_pb2.PLUGIN_REJECTION_MISSING_PROVIDER, CONTRACT),
            (PROVIDER, resources_pb2.PLUGIN_REJECTION_APPROVAL_REQUIRED, "")}

        # The dependency returns: nothing else is done for the dependent, it runs from the next turn.
        await stub.SetPluginApprovals(scheduler_pb2.SetPluginApprovalsRequest(session_id=session.id, approve=[PROVIDER]))
        turn = await submit(stub, session.id, "I go on.")
        results = {result.runtime_id: result for result in turn.runtime_results}
        assert results[f"{DEPENDENT}/follow"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, results[f"{DEPENDENT}/follow"].reason
        entries = (await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id=DEPENDENT))).entries
        assert [(entry.key, from_value(entry.value)) for entry in entries] == [("follow", True)]
        listed = await stub.GetSessionPlugins(scheduler_pb2.GetSessionPluginsRequest(session_id=session.id))
        assert not listed.unavailable and {DEPENDENT, PROVIDER} <= set(listed.runnable)


async def test_a_requested_plugin_rejected_for_a_conflict_fails_the_create(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.CreateSession(minimal_session(requested_plugins=["conflict-probe-dark", "conflict-probe-lamp"]))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        [violation] = field_violations(refused.value)
        assert violation.field == "requested_plugins[1]"
        assert violation.description.startswith("plugin_rejected: plugin 'conflict-probe-lamp' cannot join this session (conflict)")
        assert "conflict-probe.light@1" in violation.description and "conflict-probe-dark" in violation.description
        # One of them alone is fine.
        alone = await stub.CreateSession(minimal_session(requested_plugins=["conflict-probe-lamp"]))
        assert "conflict-probe-lamp" in alone.session.active_plugins


async def test_the_worlds_requirements_reach_the_resolver_and_unmet_ones_come_back(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        met = await stub.CreateSession(minimal_session(required_contracts=[CONTRACT], approved_plugins=[PROVIDER]))
        assert PROVIDER in met.session.active_plugins and not met.unmet_requirements, "the only provider joins for the world"
        unmet = await stub.CreateSession(minimal_session(required_contracts=[CONTRACT, "nobody.lifecycle@1"]))
        assert {(u.contract, u.code, tuple(u.providers)) for u in unmet.unmet_requirements} == {
            (CONTRACT, resources_pb2.REQUIREMENT_GAP_APPROVAL_REQUIRED, (PROVIDER,)),
            ("nobody.lifecycle@1", resources_pb2.REQUIREMENT_GAP_MISSING_PROVIDER, ())}
        excluded = await stub.CreateSession(minimal_session(required_contracts=[CONTRACT], excluded_plugins=[PROVIDER]))
        assert [(u.contract, u.code) for u in excluded.unmet_requirements] == [(CONTRACT, resources_pb2.REQUIREMENT_GAP_EXCLUDED)]
        assert excluded.session.status == store_pb2.SESSION_STATUS_ACTIVE, "unmet requirements never block the session"


async def test_command_new_fires_for_a_new_session_command_only(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        probe = dict(requested_plugins=[EVENT_KEY_PROBE], approved_plugins=[EVENT_KEY_PROBE])
        parent = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(**probe))).session
        child = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            **probe, parent_session_id=parent.id, emit_command_hooks=True))).session
        [new] = await wait_for(services.data_dir, of("command:new", child.id))
        assert new["by"] == "command" and new["has_cfg"] and new["context"]["commandSource"] == "gateway:sessions.create"
        assert new["context"]["sessionEntry"]["id"] == child.id and new["context"]["previousSessionEntry"]["id"] == parent.id
        for absent in ("senderId", "agentId", "workspaceDir", "storePath"):
            assert absent not in new["context"], absent
        # The plain create of the parent, and a child not asking for command hooks, emit nothing.
        quiet = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(**probe, parent_session_id=parent.id))).session
        assert not await wait_for(services.data_dir, of("command:new", parent.id), timeout_s=0.3)
        assert not await wait_for(services.data_dir, of("command:new", quiet.id), timeout_s=0.3)

        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.CreateSession(scheduler_pb2.CreateSessionRequest(**probe, emit_command_hooks=True))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(refused.value)] == ["parent_session_id"]
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await stub.CreateSession(scheduler_pb2.CreateSessionRequest(**probe, emit_command_hooks=True, parent_session_id="nope"))
        assert unknown.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "no session 'nope'" in unknown.value.details()
