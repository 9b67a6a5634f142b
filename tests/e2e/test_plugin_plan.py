"""Packs, the plugin plan and plugins turned on and off in a running session, through the five services:
GetPluginPlan shows what CreateSession(world_id, pack_id) starts with, and SetSessionPlugins resolves
the set again, from the next turn."""

from __future__ import annotations

import grpc
import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.errors import field_violations
from shared.grpc_client import open_channel
from tests.e2e.conftest import TEST_PLUGIN_DIR, running_services
from tests.support.builtin_plugins import SETUP_PLUGINS

pytestmark = pytest.mark.asyncio(loop_scope="session")

COVE = "name: Cove\npluginPolicy: {preset: quiet, plus: [dice-check, not-installed]}\n"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def services(tmp_path_factory):
    worlds = tmp_path_factory.mktemp("worlds")
    (worlds / "cove").mkdir()
    (worlds / "cove" / "world.yaml").write_text(COVE, encoding="utf-8")
    async with running_services(tmp_path_factory.mktemp("covel-data"), plugin_dirs=(TEST_PLUGIN_DIR,),
                                extra_env={"COVEL_WORLD_DIRS": str(worlds)}) as group:
        yield group


async def ran(stub, session_id) -> set[str]:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="act", text="I wait.")])
    turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
    return {result.runtime_id.split("/")[0] for result in turn.runtime_results if result.status == resources_pb2.RUNTIME_STATUS_SUCCESS}


async def test_the_plan_is_what_a_session_in_the_world_starts_with(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        packs = (await stub.ListPacks(scheduler_pb2.ListPacksRequest(locale="zh"))).packs
        plan = (await stub.GetPluginPlan(scheduler_pb2.GetPluginPlanRequest(world_id="cove"))).plan
        created = await stub.CreateSession(scheduler_pb2.CreateSessionRequest(world_id="cove"))
        switched = (await stub.GetPluginPlan(scheduler_pb2.GetPluginPlanRequest(world_id="cove", pack_id="tabletop"))).plan
        tabletop = await stub.CreateSession(scheduler_pb2.CreateSessionRequest(world_id="cove", pack_id="tabletop",
                                                                               excluded_plugins=["inventory"]))
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await stub.CreateSession(scheduler_pb2.CreateSessionRequest(world_id="cove", pack_id="arena"))
    assert [p.id for p in packs] == ["story", "tabletop", "quiet"] and packs[2].name == "安静"
    assert plan.pack.id == "quiet" and list(plan.default_plugin_ids) == ["narrator", "dice-check"]
    assert [(m.plugin_id, m.source) for m in plan.missing] == [("not-installed", "world")]
    assert "world-time" in plan.excluded and "world-time" not in plan.resolution.active
    session = created.session
    assert list(session.requested_plugins) == ["narrator", "dice-check"]
    assert set(session.active_plugins) == set(plan.resolution.session_plugins)
    assert [(r.plugin_id, r.code) for r in created.rejected] == [("not-installed", resources_pb2.PLUGIN_REJECTION_NOT_INSTALLED)]
    assert list(switched.pack_requested)[:3] == ["narrator", "dice-check", "inventory"]
    # The player's exclusion wins over the pack's request.
    assert "inventory" not in tabletop.session.active_plugins and "world-time" in tabletop.session.active_plugins
    assert unknown.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field_violations(unknown.value)[0].field == "pack_id"


async def test_plugins_turned_on_and_off_run_from_the_next_turn(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(world_id="cove", excluded_plugins=SETUP_PLUGINS))).session
        before = await ran(stub, session.id)
        changed = await stub.SetSessionPlugins(scheduler_pb2.SetSessionPluginsRequest(
            session_id=session.id, enable=["guide"], disable=["dice-check"]))
        after = await ran(stub, session.id)
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await stub.SetSessionPlugins(scheduler_pb2.SetSessionPluginsRequest(session_id=session.id, enable=["not-installed"]))
        with pytest.raises(grpc.aio.AioRpcError) as both:
            await stub.SetSessionPlugins(scheduler_pb2.SetSessionPluginsRequest(session_id=session.id, enable=["guide"], disable=["guide"]))
        kept = (await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id=session.id))).session
    assert "dice-check" in before and "guide" not in before
    assert "guide" in changed.session.active_plugins and "dice-check" not in changed.session.active_plugins
    assert "dice-check" in changed.session.excluded_plugins and "guide" in changed.session.requested_plugins
    assert "guide" in after and "dice-check" not in after
    assert missing.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field_violations(missing.value)[0].field == "enable[0]"
    assert field_violations(both.value)[0].field == "disable"
    assert list(kept.active_plugins) == list(changed.session.active_plugins), "a refused change changes nothing"
