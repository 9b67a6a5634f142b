"""One real turn through all five services over gRPC, twice."""

from __future__ import annotations

import json

import grpc
import pytest

from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from covel_cli.launcher import SERVICES
from shared.errors import field_violations
from shared.grpc_client import check_health, open_channel
from tests.e2e.conftest import CORE_PLUGINS, minimal_session
from tests.support.builtin_plugins import SETUP_PLUGINS

# Its own sessions only: the session's shared group (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def submit(stub, session_id: str, text: str, key: str = "") -> list[scheduler_pb2.TurnEvent]:
    request = scheduler_pb2.SubmitActionsRequest(
        session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)], idempotency_key=key
    )
    return [event async for event in stub.SubmitActions(request)]


def of_kind(events, kind: str):
    return [getattr(event, kind) for event in events if event.WhichOneof("event") == kind]


async def test_all_five_report_serving(services) -> None:
    for name in SERVICES:
        assert await check_health(services.addrs[name], security=services.security(name)) == "SERVING", name


async def test_two_turns_stream_commit_and_run_hooks(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        created = await stub.CreateSession(minimal_session(requested_plugins=["hook-probe"], approved_plugins=["hook-probe"]))
        session = created.session
        assert set(session.active_plugins) == {"narrator", "hook-probe"}

        first = await submit(stub, session.id, "I light the lantern and step into the cellar.", key="turn-one")
        kinds = [event.WhichOneof("event") for event in first]
        assert kinds[0] == "turn_started" and kinds[-1] == "turn_completed"
        deltas = of_kind(first, "narrative_delta")
        assert len(deltas) > 1, "the story arrives in pieces as it is produced"
        turn = of_kind(first, "turn_completed")[0]
        assert turn.status == store_pb2.TURN_STATUS_COMMITTED
        streamed = "".join(delta.text for delta in deltas)
        assert streamed == turn.narrative
        assert "{" not in streamed and "segments" not in streamed
        assert "light the lantern" in turn.narrative
        [outcome] = of_kind(first, "proposal")
        assert outcome.status == store_pb2.PROPOSAL_STATUS_COMMITTED
        hooks_ran = {(entry.event, entry.handler_plugin_id, entry.status) for entry in of_kind(first, "hook")}
        assert ("TurnStart", "hook-probe", resources_pb2.HOOK_STATUS_OK) in hooks_ran
        assert ("TurnStop", "hook-probe", resources_pb2.HOOK_STATUS_OK) in hooks_ran

        second = await submit(stub, session.id, "I open the old chest.")
        second_turn = of_kind(second, "turn_completed")[0]
        assert second_turn.status == store_pb2.TURN_STATUS_COMMITTED
        assert second_turn.logical_turn == turn.logical_turn + 1

        messages = (await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session.id))).messages
        assert [(m.role, m.seq) for m in messages] == [(resources_pb2.MESSAGE_ROLE_PLAYER, 1), (resources_pb2.MESSAGE_ROLE_STORY, 2),
                                                        (resources_pb2.MESSAGE_ROLE_PLAYER, 3), (resources_pb2.MESSAGE_ROLE_STORY, 4)]
        assert messages[0].text == "I light the lantern and step into the cellar."
        assert messages[1].text == turn.narrative and messages[1].plugin_id == "narrator"
        assert messages[3].text == second_turn.narrative
        # The narrator read turn one's story as history: the scripted model refers back to it.
        assert "light the lantern" in second_turn.narrative

        retried = await submit(stub, session.id, "I light the lantern and step into the cellar.", key="turn-one")
        assert [event.WhichOneof("event") for event in retried] == ["turn_completed"]
        assert retried[0].turn_completed.id == turn.id
        assert len((await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session.id))).messages) == 4

        # The same key for other actions is the caller's mistake, not a replay of the old turn.
        with pytest.raises(grpc.aio.AioRpcError) as reused:
            await submit(stub, session.id, "I burn the chest instead.", key="turn-one")
        assert reused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "idempotency_key" in reused.value.details() and turn.id in reused.value.details()
        assert len((await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session.id))).messages) == 4


async def test_core_plugins_join_every_session_unless_excluded(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("registry", "scheduler") as registry_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        registry = registry_pb2_grpc.PluginRegistryStub(registry_channel)
        # The spec's builtin list: narrator, history-compaction, memory, world-time and the setup plugins are kind: core.
        assert set(CORE_PLUGINS) == {"narrator", "history-compaction", "memory", "world-time", *SETUP_PLUGINS}
        bare = await stub.CreateSession(scheduler_pb2.CreateSessionRequest())
        assert set(bare.session.active_plugins) == set(CORE_PLUGINS) and not bare.rejected
        turn = of_kind(await submit(stub, bare.session.id, "I look at the harbor clock."), "turn_completed")[0]
        assert turn.status == store_pb2.TURN_STATUS_COMMITTED
        ran = {r.runtime_id: r for r in turn.runtime_results}
        assert [ran[r].status for r in ("world-time/context", "narrator", "world-time/advance")] == [resources_pb2.RUNTIME_STATUS_SUCCESS] * 3
        assert ran["memory/extract"].reason.startswith("detached"), "memory's extraction is queued after the turn"

        # An explicit exclusion wins over the core default, and over a request of the same plugin.
        created = await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            requested_plugins=["world-time"], excluded_plugins=["world-time", "memory", *SETUP_PLUGINS]))
        session = created.session
        assert set(session.active_plugins) == {"narrator", "history-compaction"} and not created.rejected
        assert list(session.excluded_plugins) == ["world-time", "memory", *SETUP_PLUGINS]
        turn = of_kind(await submit(stub, session.id, "I look at the harbor clock."), "turn_completed")[0]
        assert turn.status == store_pb2.TURN_STATUS_COMMITTED
        assert [r.runtime_id for r in turn.runtime_results] == ["narrator"], "no runtime of an excluded core plugin runs"
        # Starting over keeps the player's exclusions.
        again = (await stub.ResetSession(scheduler_pb2.ResetSessionRequest(session_id=session.id))).session
        assert set(again.active_plugins) == {"narrator", "history-compaction"}

        # An excluded core plugin is not brought back either as the provider of a required contract.
        required = ["world-time-context@1"]
        kept_out = await registry.ResolveSessionPlugins(registry_pb2.ResolveSessionPluginsRequest(
            excluded=["world-time"], required_contracts=required))
        assert "world-time" not in kept_out.active and "world-time" not in kept_out.auto_added
        assert [(u.contract, u.code) for u in kept_out.unmet] == [("world-time-context@1", "excluded")]
        met = await registry.ResolveSessionPlugins(registry_pb2.ResolveSessionPluginsRequest(required_contracts=required))
        assert "world-time" in met.active and not met.unmet


async def test_a_turnstart_hook_can_abort_the_turn(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=["hook-probe"], approved_plugins=["hook-probe"]))).session
        events = await submit(stub, session.id, "I try the forbidden door.")
        turn = of_kind(events, "turn_completed")[0]
        assert turn.status == store_pb2.TURN_STATUS_ABORTED
        assert turn.abort_reason == "hook-probe: that action is forbidden here"
        assert of_kind(events, "narrative_delta") == []
        assert (await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session.id))).messages == []


async def test_missing_session_is_not_found(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await submit(stub, "00000000-0000-0000-0000-000000000000", "hello")
        assert raised.value.code() == grpc.StatusCode.NOT_FOUND
        assert "00000000-0000-0000-0000-000000000000" in raised.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id="00000000-0000-0000-0000-000000000000"))
        assert raised.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (scheduler_pb2.SubmitActionsRequest(actions=[resources_pb2.PlayerAction(kind="do", text="hi")]), "session_id"),
        (scheduler_pb2.SubmitActionsRequest(session_id="x"), "actions"),
        (scheduler_pb2.SubmitActionsRequest(session_id="x", actions=[resources_pb2.PlayerAction(kind="do", text="  ")]), "actions[0].text"),
        (scheduler_pb2.SubmitActionsRequest(session_id="x", actions=[resources_pb2.PlayerAction(kind="fly", text="up")]), "actions[0].kind"),
        (scheduler_pb2.SubmitActionsRequest(session_id="x", idempotency_key="has spaces", actions=[resources_pb2.PlayerAction(text="a")]), "idempotency_key"),
    ],
)
async def test_malformed_submit_is_invalid_argument_naming_the_field(services, request_, field) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            _ = [event async for event in stub.SubmitActions(request_)]
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(raised.value)] == [field]


async def test_bad_locale_is_invalid_argument(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.CreateSession(scheduler_pb2.CreateSessionRequest(locale="klingon"))
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(raised.value)] == ["locale"]


async def test_community_plugin_hooks_run_only_after_approval(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=["hook-probe"]))).session
        events = await submit(stub, session.id, "I try the forbidden door.")
        turn = of_kind(events, "turn_completed")[0]
        assert turn.status == store_pb2.TURN_STATUS_COMMITTED
        assert [entry for entry in of_kind(events, "hook") if entry.handler_plugin_id == "hook-probe"] == []
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.CreateSession(scheduler_pb2.CreateSessionRequest(approved_plugins=["hook-probe"]))
        assert [v.field for v in field_violations(raised.value)] == ["approved_plugins[0]"]

        approved = await stub.SetPluginApprovals(scheduler_pb2.SetPluginApprovalsRequest(session_id=session.id, approve=["hook-probe"]))
        assert list(approved.session.approved_plugins) == ["hook-probe"]
        blocked = of_kind(await submit(stub, session.id, "I try the forbidden door again."), "turn_completed")[0]
        assert blocked.status == store_pb2.TURN_STATUS_ABORTED
        await stub.SetPluginApprovals(scheduler_pb2.SetPluginApprovalsRequest(session_id=session.id, revoke=["hook-probe"]))
        allowed = of_kind(await submit(stub, session.id, "I try the forbidden door once more."), "turn_completed")[0]
        assert allowed.status == store_pb2.TURN_STATUS_COMMITTED
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.SetPluginApprovals(scheduler_pb2.SetPluginApprovalsRequest(session_id=session.id, approve=["narrator", "nope"]))
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_story_speakers_resolve_to_the_sessions_characters(services) -> None:
    from covel.store.v1 import store_pb2_grpc
    from shared.structs import from_struct, to_struct

    names = ["Mira", "Old Tobin", "Sela", "Captain Rhee", "Brother Anselm", "Kestrel"]
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        store = store_pb2_grpc.TransactionalStoreStub(store_channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest())).session
        # A world with characters, written through the store's own commit (as a setup runtime would).
        lease = (await store.AcquireTurnLease(store_pb2.AcquireTurnLeaseRequest(
            session_id=session.id, holder="test", ttl_ms=10000, origin="manual"))).lease
        proposals = [store_pb2.Proposal(id="schema", type="character.schema.set", plugin_id="world", runtime_id="world/setup",
                                        payload=to_struct({"types": ["npc"], "attributes": {}}))]
        for index, name in enumerate(names):
            proposals.append(store_pb2.Proposal(
                id=f"c{index}", type="character.upsert", plugin_id="world", runtime_id="world/setup",
                payload=to_struct({"characterId": f"npc-{index}", "expectedVersion": 0, "character": {"name": name, "type": "npc"}})))
        await store.CommitTurn(store_pb2.CommitTurnRequest(
            session_id=session.id, lease_id=lease.lease_id, release_lease=True, proposals=proposals,
            turn=store_pb2.Turn(id=lease.turn_id, status=store_pb2.TURN_STATUS_COMMITTED, origin="manual")))

        events = await submit(stub, session.id, "I greet whoever is here.")
        turn = of_kind(events, "turn_completed")[0]
        story = next(m for m in turn.messages if m.role == resources_pb2.MESSAGE_ROLE_STORY)
        metadata = from_struct(story.metadata)
        speakers = [s for s in metadata["segments"] if s.get("speaker")]
        assert speakers and all(s["speakerId"].startswith("npc-") for s in speakers)
        assert metadata["presentCharacterIds"] and metadata["presentCharacterIds"][0].startswith("npc-")


async def test_integers_a_handler_returns_reach_clients_as_integers(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=["integer-probe"], approved_plugins=["integer-probe"]))).session
        events = await submit(stub, session.id, "I count my coins.")
        turn = of_kind(events, "turn_completed")[0]
        [result] = [r for r in turn.runtime_results if r.runtime_id == "integer-probe/counter"]
        assert json.loads(result.output_json) == {"count": 1, "ratio": 0.5, "rolls": [6, 2]}
        assert '"count":1,' in result.output_json and "1.0" not in result.output_json
        [event] = [e for e in turn.events if e.name == "probe.counted"]
        assert event.payload_json == '{"count":1}'
        again = (await stub.GetTurn(scheduler_pb2.GetTurnRequest(session_id=session.id, turn_id=turn.id))).turn
        assert [r.output_json for r in again.runtime_results if r.runtime_id == "integer-probe/counter"] == [result.output_json]
